"""Node-wide telemetry for each heartbeat: CPU, memory, network counters and NVML GPUs.

NVML is optional: without it (``NVMLError_LibraryNotFound``, no driver, no GPU) the message
carries ``nvml=False`` and no GPU entries.
"""

from __future__ import annotations

import logging
from typing import Any

import psutil

from mlsched.v1 import agent_pb2

__all__ = ["NodeTelemetry"]

log = logging.getLogger(__name__)


def _nvml_handles() -> tuple[Any | None, list[Any]]:
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        return pynvml, [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    except Exception as err:  # NVMLError_LibraryNotFound, driver missing, no module
        log.debug("NVML unavailable: %s", err)
        return None, []


class NodeTelemetry:
    """Samples this machine; CPU percent is measured between successive :meth:`sample` calls."""

    def __init__(self, *, use_nvml: bool = True) -> None:
        self._nv, self._handles = _nvml_handles() if use_nvml else (None, [])
        psutil.cpu_percent(None)  # prime the counter

    @property
    def nvml(self) -> bool:
        return self._nv is not None

    def sample(self) -> agent_pb2.Telemetry:
        net = psutil.net_io_counters()
        msg = agent_pb2.Telemetry(
            cpu_percent=psutil.cpu_percent(None),
            mem_used_bytes=int(psutil.virtual_memory().used),
            net_sent_bytes=float(net.bytes_sent) if net else 0.0,
            net_recv_bytes=float(net.bytes_recv) if net else 0.0,
            nvml=self.nvml,
        )
        for index, handle in enumerate(self._handles):
            msg.gpus.append(self._gpu(index, handle))
        return msg

    def _gpu(self, index: int, handle: Any) -> agent_pb2.GpuTelemetry:
        nv = self._nv
        assert nv is not None
        gpu = agent_pb2.GpuTelemetry(index=index)
        try:
            gpu.util_percent = float(nv.nvmlDeviceGetUtilizationRates(handle).gpu)
            gpu.mem_used_bytes = int(nv.nvmlDeviceGetMemoryInfo(handle).used)
            gpu.pcie_tx_kbps = float(
                nv.nvmlDeviceGetPcieThroughput(handle, nv.NVML_PCIE_UTIL_TX_BYTES)
            )
            gpu.pcie_rx_kbps = float(
                nv.nvmlDeviceGetPcieThroughput(handle, nv.NVML_PCIE_UTIL_RX_BYTES)
            )
        except Exception as err:  # a counter this GPU does not support: report the rest
            log.debug("GPU %d telemetry: %s", index, err)
        return gpu
