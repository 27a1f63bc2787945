"""Background sampling of GPU (NVML) and process (psutil) telemetry.

NVML is optional: where the library is absent (``NVMLError_LibraryNotFound``) or there is no
GPU, samples carry ``"nvml": false`` and only process figures; a counter one GPU does not
give (NVLink on a GPU without it) is left out of that GPU's entry, never reported as zero.
The sampler runs in a daemon thread and writes ``telemetry`` lines to the metrics sink every
``interval_s``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import psutil

from mlsched.trainers.metrics import MetricsSink

__all__ = ["TelemetrySampler", "gpu_counters", "gpu_inventory", "nvml", "nvml_available"]

log = logging.getLogger(__name__)

#: NVML's scope id for "all links": the NVLink counters summed over the GPU's links.
_ALL_LINKS = 0xFFFFFFFF
# c_nvmlValue_t member by NVML_VALUE_TYPE_* (double, uint, ulong, ulonglong, ...).
_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


def nvml() -> Any | None:
    """pynvml, initialised; None where NVML cannot be used here (the reason at debug level)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception as err:  # NVMLError_LibraryNotFound, driver missing, no module
        log.debug("[telemetry] NVML unavailable: %s", err)
        return None


def nvml_available() -> bool:
    return nvml() is not None


def gpu_inventory() -> list[dict[str, Any]]:
    """Each visible GPU's index, name and memory; empty without NVML."""
    nv = nvml()
    if nv is None:
        return []
    out = []
    for i in range(nv.nvmlDeviceGetCount()):
        h = nv.nvmlDeviceGetHandleByIndex(i)
        name = nv.nvmlDeviceGetName(h)
        mem = nv.nvmlDeviceGetMemoryInfo(h)
        out.append(
            {
                "index": i,
                "name": name.decode() if isinstance(name, bytes) else name,
                "memory_bytes": int(mem.total),
            }
        )
    return out


def _guarded(what: str, read: Callable[[], Any]) -> Any | None:
    try:
        return read()
    except Exception as err:  # a query this GPU or driver does not answer
        log.debug("[telemetry] %s: %s", what, err)
        return None


def _nvlink_kib(nv: Any, handle: Any) -> tuple[float, float] | None:
    """Cumulative NVLink data KiB (sent, received) over all links; None without NVLink."""
    fields = [
        (nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, _ALL_LINKS),
        (nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, _ALL_LINKS),
    ]
    try:
        values = nv.nvmlDeviceGetFieldValues(handle, fields)
        out = []
        for v in values:
            if v.nvmlReturn != nv.NVML_SUCCESS or not 0 <= v.valueType < len(_VALUE_MEMBERS):
                return None
            out.append(float(getattr(v.value, _VALUE_MEMBERS[v.valueType])))
    except Exception as err:  # an old driver or pynvml without field values
        log.debug("[telemetry] NVLink counters: %s", err)
        return None
    return out[0], out[1]


def gpu_counters(nv: Any, handle: Any) -> dict[str, float]:
    """One GPU's NVML counters, each query on its own: utilisation (%), memory (bytes),
    power (W), PCIe throughput (KB/s, NVML's sample of its last 20 ms) and the cumulative NVLink data
    counters (KiB over all links). What NVML does not answer is absent from the dict."""
    out: dict[str, float] = {}
    util = _guarded("utilisation", lambda: nv.nvmlDeviceGetUtilizationRates(handle))
    if util is not None:
        out.update(util_percent=float(util.gpu), mem_util_percent=float(util.memory))
    mem = _guarded("memory", lambda: nv.nvmlDeviceGetMemoryInfo(handle))
    if mem is not None:
        out.update(mem_used_bytes=int(mem.used), mem_total_bytes=int(mem.total))
    for key, counter in (
        ("pcie_tx_kbps", nv.NVML_PCIE_UTIL_TX_BYTES),
        ("pcie_rx_kbps", nv.NVML_PCIE_UTIL_RX_BYTES),
    ):
        kbps = _guarded(key, partial(nv.nvmlDeviceGetPcieThroughput, handle, counter))
        if kbps is not None:
            out[key] = float(kbps)
    power = _guarded("power", lambda: nv.nvmlDeviceGetPowerUsage(handle))
    if power is not None:
        out["power_w"] = float(power) / 1000.0  # NVML answers milliwatts
    nvlink = _nvlink_kib(nv, handle)
    if nvlink is not None:
        out["nvlink_tx_kib"], out["nvlink_rx_kib"] = nvlink
    return out


class TelemetrySampler:
    """Samples every ``interval_s`` until :meth:`stop`."""

    def __init__(
        self, sink: MetricsSink, *, interval_s: float = 1.0, gpu_index: int | None = None
    ) -> None:
        self.sink = sink
        self.interval_s = interval_s
        self.gpu_index = gpu_index
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="telemetry", daemon=True)
        self._proc = psutil.Process(os.getpid())
        self._nv = nvml()
        self._handles: list[Any] = []
        if self._nv is not None:
            count = self._nv.nvmlDeviceGetCount()
            indices = [gpu_index] if gpu_index is not None and gpu_index < count else range(count)
            self._handles = [self._nv.nvmlDeviceGetHandleByIndex(i) for i in indices]
        self.samples = 0

    def start(self) -> TelemetrySampler:
        self._proc.cpu_percent(None)  # prime the CPU counter
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2 * self.interval_s + 1)

    def sample(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"type": "telemetry", "t": time.time(), "nvml": self._nv is not None}
        with self._proc.oneshot():
            rec["cpu_percent"] = self._proc.cpu_percent(None)
            rec["rss_bytes"] = self._proc.memory_info().rss
        if self._nv is not None:
            rec["gpus"] = [gpu_counters(self._nv, h) for h in self._handles]
        return rec

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sink.emit(self.sample())
                self.samples += 1
            except Exception as err:  # telemetry must never kill training
                log.warning("[telemetry] sampling failed: %s", err)
