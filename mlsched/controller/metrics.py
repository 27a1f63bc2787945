"""The controller's Prometheus endpoint (``mlsched controller --metrics-listen HOST:PORT``).

Served over plain HTTP by ``prometheus_client`` from a registry of the controller's own (no
process-wide state), at ``/metrics`` in the text format: jobs by state, agents alive, slot
and decision durations, the runtime model's error, heartbeat handling time and age, revenue;
and (:mod:`.metrics_cluster`) the agents' CPU, memory, network and GPU telemetry, GPUs
allocated and idle, and each unfinished job's speed and model error, by job id. Never specs,
owners, tokens or logs. Gauges are read from the controller when scraped; durations are
histograms observed as they happen. ``deploy/grafana/mlsched.json`` charts them.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mlsched.controller.metrics_cluster import ClusterCollector
from mlsched.core.allocation import JobState

if TYPE_CHECKING:
    from mlsched.controller.facade import ControllerFacade

__all__ = ["JOB_STATES", "ControllerMetrics"]

#: Every state a job can be in, so each series exists (at 0) from the first scrape.
JOB_STATES = tuple(s.value for s in JobState if not s.is_live)

# Slots are seconds to hours; decisions and heartbeats milliseconds to seconds.
_SLOT_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, float("inf"))
_FAST_BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, float("inf"))


class _State(Collector):
    """Gauges read from the controller at scrape time."""

    def __init__(self, ctl: ControllerFacade) -> None:
        self._ctl = ctl

    def collect(self) -> Iterator[Metric]:
        ctl = self._ctl
        states = Counter(s.state for s in ctl.jobs())
        jobs = GaugeMetricFamily("mlsched_jobs", "Jobs by state", labels=["state"])
        for state in sorted(set(JOB_STATES) | set(states)):
            jobs.add_metric([state], states.get(state, 0))
        yield jobs
        status = ctl.cluster_status()
        alive = sum(a.alive for a in status.agents)
        yield GaugeMetricFamily("mlsched_agents_alive", "Agents heard from in time", value=alive)
        yield GaugeMetricFamily(
            "mlsched_agents_known", "Agents ever registered", value=len(status.agents)
        )
        age = GaugeMetricFamily(
            "mlsched_heartbeat_age_seconds",
            "Seconds since each agent's last heartbeat",
            labels=["agent"],
        )
        for a in status.agents:
            age.add_metric([a.agent_id], a.last_heartbeat_age_s)
        yield age
        yield GaugeMetricFamily("mlsched_slot", "The slot the controller is in", value=status.slot)
        yield GaugeMetricFamily(
            "mlsched_model_error_mean_abs",
            "Mean |predicted - measured| / measured iteration time of the runtime model",
            value=status.model_error_mean_abs,
        )
        yield GaugeMetricFamily(
            "mlsched_model_error_samples",
            "Job-slots the model error is measured over",
            value=status.model_error_samples,
        )
        yield GaugeMetricFamily(
            "mlsched_revenue", "Charges of the jobs priced so far", value=ctl.revenue()
        )


class ControllerMetrics:
    """The registry, its histograms, and the HTTP server once :meth:`serve` is called."""

    def __init__(self, ctl: ControllerFacade) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_State(ctl))
        self.registry.register(ClusterCollector(ctl))
        self.slot_seconds = Histogram(
            "mlsched_slot_duration_seconds",
            "Wall time of a slot (the engine's step, training included)",
            buckets=_SLOT_BUCKETS,
            registry=self.registry,
        )
        self.decision_seconds = Histogram(
            "mlsched_decision_seconds",
            "Wall time of the policy's calls, by call (on_arrival, allocate, ...)",
            labelnames=["call"],
            buckets=_FAST_BUCKETS,
            registry=self.registry,
        )
        self.heartbeat_seconds = Histogram(
            "mlsched_heartbeat_handling_seconds",
            "Wall time the controller takes to handle an agent's heartbeat",
            buckets=_FAST_BUCKETS,
            registry=self.registry,
        )
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port = 0

    def observe_decision(self, call: str, seconds: float) -> None:
        self.decision_seconds.labels(call=call).observe(seconds)

    def serve(self, listen: str) -> int:
        """Serve ``/metrics`` on ``HOST:PORT`` (port 0: any free one); the port bound."""
        host, _, port = listen.rpartition(":")
        server, thread = start_http_server(int(port), addr=host, registry=self.registry)
        self._server, self._thread = server, thread
        self.port = int(server.server_port)
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
