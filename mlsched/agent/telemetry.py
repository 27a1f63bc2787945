"""Node-wide telemetry for each heartbeat: CPU, memory, NIC counters and NVML GPUs.

The NIC counters are cumulative bytes (psutil) with the time they were read, so the
controller turns two heartbeats into the host's achieved throughput over a slot. They count
the interface holding the agent's address (``--host``: the one its tasks' peers reach, which
is loopback on a one-machine cluster); where no interface holds it, the sum over the
physical-looking interfaces (loopback, container and bridge interfaces left out, as their
traffic would count twice or never leaves the machine).

NVML is optional: without it (``NVMLError_LibraryNotFound``, no driver, no GPU) the message
carries ``nvml=False`` and no GPU entries; with it, a counter a GPU does not give (NVLink on a
GPU without links) is absent from its entry, never zero.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import psutil

from mlsched.agent.discovery import is_virtual_interface
from mlsched.core.reports import GpuTelemetry, Telemetry
from mlsched.trainers.telemetry import gpu_counters

__all__ = ["NodeTelemetry"]

log = logging.getLogger(__name__)

#: KiB (NVML's NVLink counters) in KB (the unit of the kbps fields).
_KIB_IN_KB = 1.024


def _nvml_handles() -> tuple[Any | None, list[Any]]:
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        return pynvml, [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    except Exception as err:  # NVMLError_LibraryNotFound, driver missing, no module
        log.debug("NVML unavailable: %s", err)
        return None, []


def nic_counters(interface: str | None) -> tuple[float, float] | None:
    """Cumulative (sent, received) bytes of ``interface``, or of the physical-looking
    interfaces together when None; None when psutil has no counters for it."""
    try:
        per_nic = psutil.net_io_counters(pernic=True)
    except OSError as err:
        log.debug("NIC counters: %s", err)
        return None
    if interface is not None:
        counters = [per_nic[interface]] if interface in per_nic else []
    else:
        counters = [c for name, c in per_nic.items() if not is_virtual_interface(name)]
    if not counters:
        return None
    return float(sum(c.bytes_sent for c in counters)), float(sum(c.bytes_recv for c in counters))


class NodeTelemetry:
    """Samples this machine; CPU percent and NVLink throughput are measured between
    successive :meth:`sample` calls. ``interface``: the NIC to count (None: the physical
    ones together)."""

    def __init__(self, *, use_nvml: bool = True, interface: str | None = None) -> None:
        self.interface = interface
        self._nv, self._handles = _nvml_handles() if use_nvml else (None, [])
        self._nvlink: dict[int, tuple[float, float, float]] = {}  # index -> (t, tx, rx KiB)
        psutil.cpu_percent(None)  # prime the counter

    @property
    def nvml(self) -> bool:
        return self._nv is not None

    def sample(self) -> Telemetry:
        now = time.time()
        net = nic_counters(self.interface)
        return Telemetry(
            cpu_percent=psutil.cpu_percent(None),
            mem_used_bytes=int(psutil.virtual_memory().used),
            net_sent_bytes=net[0] if net is not None else None,
            net_recv_bytes=net[1] if net is not None else None,
            gpus=tuple(self._gpu(i, h, now) for i, h in enumerate(self._handles)),
            nvml=self.nvml,
            net_interface=self.interface or "",
            sampled_unix=now,
        )

    def _gpu(self, index: int, handle: Any, now: float) -> GpuTelemetry:
        counters = gpu_counters(self._nv, handle)
        values: dict[str, Any] = {
            name: float(counters[name])
            for name in ("util_percent", "pcie_tx_kbps", "pcie_rx_kbps")
            if name in counters
        }
        if "mem_used_bytes" in counters:
            values["mem_used_bytes"] = int(counters["mem_used_bytes"])
        if "nvlink_tx_kib" in counters:
            tx, rx = counters["nvlink_tx_kib"], counters["nvlink_rx_kib"]
            before = self._nvlink.get(index)
            self._nvlink[index] = (now, tx, rx)
            if before is not None and now > before[0] and tx >= before[1] and rx >= before[2]:
                dt = now - before[0]
                values["nvlink_tx_kbps"] = (tx - before[1]) * _KIB_IN_KB / dt
                values["nvlink_rx_kbps"] = (rx - before[2]) * _KIB_IN_KB / dt
        return GpuTelemetry(index=index, **values)
