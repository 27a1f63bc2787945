"""Node-wide telemetry for each heartbeat: CPU, memory, NIC counters and NVML GPUs.

The NIC counters are cumulative bytes (psutil) with the time they were read, so the
controller turns two heartbeats into the host's achieved throughput over a slot. They count
the interface holding the agent's address (``--host``: the one its tasks' peers reach, which
is loopback on a one-machine cluster); where no interface holds it, the sum over the
physical-looking interfaces (loopback, container and bridge interfaces left out, as their
traffic would count twice or never leaves the machine).

NVML is optional: without it (``NVMLError_LibraryNotFound``, no driver, no GPU) the message
carries ``nvml=False`` and no GPU entries; with it, a counter a GPU does not give (NVLink on a
GPU without links) is absent from its entry, never zero. Only the agent's own GPUs are
sampled (by UUID when it has them: a MIG instance is a device of its own).

RDMA traffic (InfiniBand, RoCE: NCCL's between hosts) bypasses the kernel's NIC counters; the
ports' data counters under ``/sys/class/infiniband`` are read beside them where present.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil

from mlsched.agent.discovery import is_virtual_interface
from mlsched.core.reports import GpuTelemetry, Telemetry
from mlsched.trainers.telemetry import gpu_counters, nvml

__all__ = ["IB_ROOT", "NodeTelemetry", "infiniband_counters"]

IB_ROOT = Path("/sys/class/infiniband")
#: port_xmit_data and port_rcv_data count 4-byte words (the InfiniBand spec's unit).
_IB_WORD = 4

log = logging.getLogger(__name__)

#: KiB (NVML's NVLink counters) in KB (the unit of the kbps fields).
_KIB_IN_KB = 1.024


def _nvml_handles(
    devices: Sequence[tuple[int, str]] | None,
) -> tuple[Any | None, list[tuple[int, str, Any]]]:
    """pynvml and (index, uuid, handle) of each of ``devices`` ((NVML index, UUID) pairs;
    None: every GPU NVML lists)."""
    nv = nvml()
    if nv is None:
        return None, []
    try:
        if devices is None:
            count = nv.nvmlDeviceGetCount()
            return nv, [(i, "", nv.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
        return nv, [
            (i, uuid, nv.nvmlDeviceGetHandleByUUID(uuid) if uuid
             else nv.nvmlDeviceGetHandleByIndex(i))
            for i, uuid in devices
        ]  # fmt: skip
    except Exception as err:  # a device gone, or a driver that fails while listing
        log.debug("NVML handles: %s", err)
        return None, []


def infiniband_counters(root: Path = IB_ROOT) -> tuple[float, float] | None:
    """Bytes sent and received through every InfiniBand/RoCE port together, from their
    cumulative data counters; None where there is no such device (or none readable)."""
    sent = recv = 0.0
    found = False
    for counters in sorted(root.glob("*/ports/*/counters")):
        try:
            tx = int((counters / "port_xmit_data").read_text().strip())
            rx = int((counters / "port_rcv_data").read_text().strip())
        except (OSError, ValueError):
            continue
        sent, recv, found = sent + tx * _IB_WORD, recv + rx * _IB_WORD, True
    return (sent, recv) if found else None


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

    def __init__(
        self,
        *,
        use_nvml: bool = True,
        interface: str | None = None,
        devices: Sequence[tuple[int, str]] | None = None,
        ib_root: Path = IB_ROOT,
    ) -> None:
        self.interface = interface
        self.ib_root = ib_root
        self._nv, self._handles = _nvml_handles(devices) if use_nvml else (None, [])
        # (index, uuid) -> (t, tx, rx KiB)
        self._nvlink: dict[tuple[int, str], tuple[float, float, float]] = {}
        psutil.cpu_percent(None)  # prime the counter

    @property
    def nvml(self) -> bool:
        return self._nv is not None

    def sample(self) -> Telemetry:
        now = time.time()
        net = nic_counters(self.interface)
        ib = infiniband_counters(self.ib_root)
        return Telemetry(
            cpu_percent=psutil.cpu_percent(None),
            mem_used_bytes=int(psutil.virtual_memory().used),
            net_sent_bytes=net[0] if net is not None else None,
            net_recv_bytes=net[1] if net is not None else None,
            gpus=tuple(self._gpu(i, uuid, h, now) for i, uuid, h in self._handles),
            nvml=self.nvml,
            net_interface=self.interface or "",
            sampled_unix=now,
            ib_sent_bytes=ib[0] if ib is not None else None,
            ib_recv_bytes=ib[1] if ib is not None else None,
        )

    def _gpu(self, index: int, uuid: str, handle: Any, now: float) -> GpuTelemetry:
        counters = gpu_counters(self._nv, handle)
        values: dict[str, Any] = {
            name: float(counters[name])
            for name in ("util_percent", "power_w", "pcie_tx_kbps", "pcie_rx_kbps")
            if name in counters
        }
        for name in ("mem_used_bytes", "mem_total_bytes"):
            if name in counters:
                values[name] = int(counters[name])
        if "nvlink_tx_kib" in counters:
            tx, rx = counters["nvlink_tx_kib"], counters["nvlink_rx_kib"]
            key = (index, uuid)
            before = self._nvlink.get(key)
            self._nvlink[key] = (now, tx, rx)
            if before is not None and now > before[0] and tx >= before[1] and rx >= before[2]:
                dt = now - before[0]
                values["nvlink_tx_kbps"] = (tx - before[1]) * _KIB_IN_KB / dt
                values["nvlink_rx_kbps"] = (rx - before[2]) * _KIB_IN_KB / dt
        return GpuTelemetry(index=index, uuid=uuid, **values)
