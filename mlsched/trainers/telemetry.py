"""Background sampling of GPU (NVML) and process (psutil) telemetry.

NVML is optional: where the library is absent (``NVMLError_LibraryNotFound``) or there is no
GPU, samples carry ``"nvml": false`` and only process figures. The sampler runs in a daemon
thread and writes ``telemetry`` lines to the metrics sink every ``interval_s``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import psutil

from mlsched.trainers.metrics import MetricsSink

__all__ = ["TelemetrySampler", "gpu_inventory", "nvml_available"]

log = logging.getLogger(__name__)


def _nvml() -> Any | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception as err:  # NVMLError_LibraryNotFound, driver missing, no module
        log.debug("[telemetry] NVML unavailable: %s", err)
        return None


def nvml_available() -> bool:
    return _nvml() is not None


def gpu_inventory() -> list[dict[str, Any]]:
    """Each visible GPU's index, name and memory; empty without NVML."""
    nv = _nvml()
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
        self._nv = _nvml()
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
            gpus = []
            for h in self._handles:
                g: dict[str, Any] = {}
                try:
                    util = self._nv.nvmlDeviceGetUtilizationRates(h)
                    mem = self._nv.nvmlDeviceGetMemoryInfo(h)
                    g.update(
                        util_percent=util.gpu,
                        mem_util_percent=util.memory,
                        mem_used_bytes=int(mem.used),
                        mem_total_bytes=int(mem.total),
                    )
                    g["pcie_tx_kbps"] = self._nv.nvmlDeviceGetPcieThroughput(
                        h, self._nv.NVML_PCIE_UTIL_TX_BYTES
                    )
                    g["pcie_rx_kbps"] = self._nv.nvmlDeviceGetPcieThroughput(
                        h, self._nv.NVML_PCIE_UTIL_RX_BYTES
                    )
                except Exception as err:  # a counter a GPU does not support
                    g["error"] = str(err)
                gpus.append(g)
            rec["gpus"] = gpus
        return rec

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sink.emit(self.sample())
                self.samples += 1
            except Exception as err:  # telemetry must never kill training
                log.warning("[telemetry] sampling failed: %s", err)
