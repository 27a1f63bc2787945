"""The cluster's telemetry and the jobs' speeds on ``/metrics``, read at scrape time.

Per agent (label ``agent``) what its last heartbeat carried: CPU, memory, the NIC and
InfiniBand byte counters; per GPU (labels ``agent``, ``gpu`` (the NVML index), ``uuid``,
``model``) utilisation, memory, power, PCIe and NVLink throughput, each only where NVML gave
it (a series absent, never a stand-in zero). GPUs allocated and idle over the live agents.
Per unfinished job (label ``job``) its measured and predicted iteration time, the model's
error and its progress: job ids are on this endpoint (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mlsched.controller.status import FINAL_STATES

if TYPE_CHECKING:
    from mlsched.controller.facade import ControllerFacade

__all__ = ["GPU_GAUGES", "ClusterCollector"]

_KB = 1000.0  # NVML's PCIe and NVLink rates are KB/s
_GPU = ["agent", "gpu", "uuid", "model"]
#: (metric, help, GpuTelemetry field, scale to the metric's unit)
GPU_GAUGES = (
    ("mlsched_gpu_utilization_percent", "GPU utilisation (NVML), percent", "util_percent", 1.0),
    ("mlsched_gpu_memory_used_bytes", "GPU memory in use", "mem_used_bytes", 1.0),
    ("mlsched_gpu_memory_total_bytes", "GPU memory", "mem_total_bytes", 1.0),
    ("mlsched_gpu_power_watts", "GPU power draw", "power_w", 1.0),
    ("mlsched_gpu_pcie_tx_bytes_per_second", "PCIe sent, NVML's last 20 ms", "pcie_tx_kbps", _KB),
    ("mlsched_gpu_pcie_rx_bytes_per_second", "PCIe received, NVML's last 20 ms", "pcie_rx_kbps",
     _KB),
    ("mlsched_gpu_nvlink_tx_bytes_per_second", "NVLink sent, over all links", "nvlink_tx_kbps",
     _KB),
    ("mlsched_gpu_nvlink_rx_bytes_per_second", "NVLink received, over all links",
     "nvlink_rx_kbps", _KB),
)  # fmt: skip


class ClusterCollector(Collector):
    """Agents' telemetry, GPUs allocated and idle, jobs' speeds (module docstring)."""

    def __init__(self, ctl: ControllerFacade) -> None:
        self._ctl = ctl

    def collect(self) -> Iterator[Metric]:
        yield from self._agents()
        yield from self._gpus_in_use()
        yield from self._jobs()

    def _agents(self) -> Iterator[Metric]:
        agents = [a for a in self._ctl.agents.all() if a.alive and a.telemetry is not None]
        cpu = GaugeMetricFamily("mlsched_agent_cpu_percent", "Host CPU use", labels=["agent"])
        mem = GaugeMetricFamily(
            "mlsched_agent_memory_used_bytes", "Host memory in use", labels=["agent"]
        )
        net = {
            d: CounterMetricFamily(f"mlsched_agent_network_{d}_bytes", f"Bytes {d} through "
                                   "the agent's interface", labels=["agent", "interface"])
            for d in ("sent", "received")
        }  # fmt: skip
        ib = {
            d: CounterMetricFamily(f"mlsched_agent_infiniband_{d}_bytes", f"Bytes {d} over "
                                   "the InfiniBand/RoCE ports", labels=["agent"])
            for d in ("sent", "received")
        }  # fmt: skip
        gauges = {
            name: GaugeMetricFamily(name, text, labels=_GPU) for name, text, _, _ in GPU_GAUGES
        }
        for a in agents:
            t = a.telemetry
            assert t is not None
            cpu.add_metric([a.agent_id], t.cpu_percent)
            mem.add_metric([a.agent_id], t.mem_used_bytes)
            if t.net_sent_bytes is not None and t.net_recv_bytes is not None:
                where = [a.agent_id, t.net_interface or "physical"]
                net["sent"].add_metric(where, t.net_sent_bytes)
                net["received"].add_metric(where, t.net_recv_bytes)
            if t.ib_sent_bytes is not None and t.ib_recv_bytes is not None:
                ib["sent"].add_metric([a.agent_id], t.ib_sent_bytes)
                ib["received"].add_metric([a.agent_id], t.ib_recv_bytes)
            for g in t.gpus:
                labels = [a.agent_id, str(g.index), g.uuid, a.gpu_model(g.uuid)]
                for name, _, field, scale in GPU_GAUGES:
                    value = getattr(g, field)
                    if value is not None:
                        gauges[name].add_metric(labels, float(value) * scale)
        yield cpu
        yield mem
        yield from net.values()
        yield from ib.values()
        yield from gauges.values()

    def _gpus_in_use(self) -> Iterator[Metric]:
        status = self._ctl.cluster_status()
        total = sum(a.capacity.get("gpu", 0.0) for a in status.agents if a.alive)
        used = sum(a.used.get("gpu", 0.0) for a in status.agents if a.alive)
        gpus = GaugeMetricFamily(
            "mlsched_gpus", "GPUs of the live agents, allocated this slot or idle", labels=["state"]
        )
        gpus.add_metric(["allocated"], used)
        gpus.add_metric(["idle"], max(0.0, total - used))
        yield gpus

    def _jobs(self) -> Iterator[Metric]:
        measured = GaugeMetricFamily(
            "mlsched_job_iteration_seconds", "A running job's measured iteration time",
            labels=["job"],
        )  # fmt: skip
        predicted = GaugeMetricFamily(
            "mlsched_job_predicted_iteration_seconds",
            "The runtime model's prediction of that iteration time", labels=["job"],
        )  # fmt: skip
        error = GaugeMetricFamily(
            "mlsched_job_model_error", "|predicted - measured| / measured iteration time",
            labels=["job"],
        )  # fmt: skip
        speed = GaugeMetricFamily(
            "mlsched_job_iterations_per_second", "A running job's measured throughput",
            labels=["job"],
        )  # fmt: skip
        progress = GaugeMetricFamily(
            "mlsched_job_progress_ratio", "Work done over the job's total", labels=["job"]
        )
        for j in self._ctl.jobs():
            if j.state in FINAL_STATES:
                continue
            if j.total_work > 0:
                progress.add_metric([j.job_id], j.progress / j.total_work)
            if j.measured_iteration_s > 0:
                measured.add_metric([j.job_id], j.measured_iteration_s)
                speed.add_metric([j.job_id], 1.0 / j.measured_iteration_s)
                predicted.add_metric([j.job_id], j.predicted_iteration_s)
                err = abs(j.predicted_iteration_s - j.measured_iteration_s) / j.measured_iteration_s
                error.add_metric([j.job_id], err)
        yield from (measured, predicted, error, speed, progress)
