"""Measured communication next to the runtime model's, slot by slot, on an emulated cluster.

The controller stores one measurement per job and slot (layout, compute and communication
seconds per iteration, achieved Gbit/s). :func:`comm_report` replays them, in slot order,
into a fresh :class:`RuntimeEstimator` over the emulated cluster (every host, whatever
joined or left since), as the controller's own model saw them: each slot's prediction comes
from the fit of the slots before it, then the slot is observed and the model refitted. It
returns per job and slot the measured and predicted communication (:class:`CommRow`), and
after each slot the bandwidth the model then gives an in-rack and a cross-rack placement of
each job beside the rate the links are shaped to (:class:`BandwidthFit`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mlsched.controller.measurement_rows import measurement_from_row
from mlsched.controller.runs import Layout
from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster, Pool, Server, Topology
from mlsched.core.job import Arch, JobSpec
from mlsched.core.resources import ResourceVector
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.testbed.emulated.topology import NetworkPlan

__all__ = [
    "BandwidthFit",
    "CommRow",
    "bandwidth_table",
    "comm_report",
    "comm_table",
    "model_cluster",
    "path_class",
]

LOCAL, IN_RACK, CROSS_RACK = "local", "in-rack", "cross-rack"


@dataclass(frozen=True)
class CommRow:
    """One job's slot: measured per-iteration means against the model's prediction."""

    job_id: str
    slot: int
    path: str  # the slowest link its traffic crosses: local, in-rack or cross-rack
    iterations: float
    measured_iter_s: float
    predicted_iter_s: float
    measured_comm_s: float
    predicted_comm_s: float
    measured_gbps: float | None
    predicted_gbps: float | None

    @property
    def iter_error(self) -> float:
        """(predicted - measured) / measured iteration time."""
        return _rel(self.predicted_iter_s, self.measured_iter_s)

    @property
    def comm_error(self) -> float:
        return _rel(self.predicted_comm_s, self.measured_comm_s)


@dataclass(frozen=True)
class BandwidthFit:
    """The model's bandwidth on one path class after a slot's refit, for the jobs that share
    one profile key (they share its parameters): one worker and one PS, or two workers."""

    slot: int
    jobs: str  # the jobs of the key, comma-separated
    path: str
    model_gbps: float
    shaped_gbps: float  # what the links carry (both directions for a ring: 2x the rate)
    measured_on: str = ""  # the paths the key has measurements of, comma-separated

    @property
    def error(self) -> float:
        return _rel(self.model_gbps, self.shaped_gbps)


def _rel(value: float, reference: float) -> float:
    return (value - reference) / reference if reference else 0.0


def model_cluster(plan: NetworkPlan, topology: Topology) -> Cluster:
    """Every host of the emulated cluster as the controller models it (in host order)."""
    spec = plan.spec
    capacity = ResourceVector({"gpu": spec.gpus, "cpu": spec.cpus, "mem_gb": spec.mem_gb})
    servers = tuple(
        Server(h.name, capacity, pool=Pool(h.pool), gpu_type=spec.gpu_type, rack=h.rack,
               uplink_gbps=spec.host_gbps)
        for h in plan.hosts
    )  # fmt: skip
    return Cluster(servers, topology)


def path_class(plan: NetworkPlan, hosts: Iterable[str]) -> str:
    """local (one host), in-rack (hosts of one rack) or cross-rack."""
    names = set(hosts)
    if len(names) <= 1:
        return LOCAL
    racks = {plan.host(n).rack for n in names}
    return IN_RACK if len(racks) == 1 else CROSS_RACK


def _placement(cluster: Cluster, layout: Layout) -> Placement | None:
    index = {s.name: i for i, s in enumerate(cluster.servers)}
    if any(a not in index for a, _, _ in layout):
        return None
    return Placement(
        tuple((index[a], w) for a, w, _ in layout if w),
        tuple((index[a], p) for a, _, p in layout if p),
    )


def _shape(plan: NetworkPlan, job: JobSpec, path: str) -> Placement | None:
    """A placement of ``job`` whose traffic crosses ``path``: one worker and one PS (PS
    jobs) or two workers (rings) on two hosts of one rack, or of two racks."""
    hosts = plan.hosts
    pair = next(
        (
            (a.index, b.index)
            for a in hosts
            for b in hosts
            if a.index < b.index and (a.rack == b.rack) == (path == IN_RACK)
        ),
        None,
    )
    if pair is None:
        return None
    if job.arch is Arch.ALLREDUCE:
        return Placement(((pair[0], 1), (pair[1], 1)))
    return Placement(((pair[0], 1),), ((pair[1], 1),))


def comm_report(
    plan: NetworkPlan,
    topology: Topology,
    specs: Mapping[str, JobSpec],
    rows: Sequence[Mapping[str, Any]],
) -> tuple[list[CommRow], list[BandwidthFit]]:
    """Replay the controller's stored measurement ``rows`` (``Store.measurements()``) of
    the jobs in ``specs``; see the module's docstring."""
    cluster = model_cluster(plan, topology)
    model = RuntimeEstimator(cluster)
    spec = plan.spec
    comm_rows: list[CommRow] = []
    fits: list[BandwidthFit] = []
    by_slot: dict[int, list[Mapping[str, Any]]] = {}
    for row in rows:
        if row["job_id"] in specs and float(row.get("iterations") or 0) > 0:
            by_slot.setdefault(int(row["slot"]), []).append(row)
    seen: dict[str, JobSpec] = {}
    paths: dict[Any, set[str]] = {}  # profile key -> the path classes it was measured on
    for slot in sorted(by_slot):
        measured = []
        for row in by_slot[slot]:
            job = specs[row["job_id"]]
            m = measurement_from_row(row, lambda layout: _placement(cluster, layout))
            if m is None:
                continue
            placement = m.placement
            compute, comm = model.iteration_parts(job, placement)
            comm_rows.append(
                CommRow(
                    job_id=job.job_id,
                    slot=slot,
                    path=path_class(plan, (str(a) for a, _, _ in row["layout"])),
                    iterations=m.iterations,
                    measured_iter_s=m.iteration_time_s,
                    predicted_iter_s=compute + comm,
                    measured_comm_s=m.comm_time_s,
                    predicted_comm_s=comm,
                    measured_gbps=m.comm_gbps,
                    predicted_gbps=model.bandwidth_gbps(job, placement),
                )
            )
            measured.append((m, job))
            seen.setdefault(job.job_id, job)
            paths.setdefault(model.key(job, placement), set()).add(comm_rows[-1].path)
        for m, job in measured:
            model.observe(m, job)
        model.refit()
        for path, rate in ((IN_RACK, spec.host_gbps), (CROSS_RACK, spec.rack_gbps)):
            by_key: dict[Any, list[tuple[JobSpec, Placement]]] = {}
            for job in seen.values():
                shape = _shape(plan, job, path)
                if shape is not None:
                    by_key.setdefault(model.key(job, shape), []).append((job, shape))
            for key, group in by_key.items():
                # A key measured only on one host has no evidence about any link.
                on = paths.get(key, set()) - {LOCAL}
                job, shape = group[0]
                gbps = model.bandwidth_gbps(job, shape)
                if gbps is not None and on:
                    duplex = 2.0 if job.arch is Arch.ALLREDUCE else 1.0
                    label = ",".join(j.job_id for j, _ in group)
                    fits.append(
                        BandwidthFit(slot, label, path, gbps, duplex * rate, ",".join(sorted(on)))
                    )
    return comm_rows, fits


def _gbps(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def comm_table(rows: Sequence[CommRow]) -> str:
    """Per job and slot: path, measured and predicted communication and iteration."""
    lines = [
        f"{'job':<16}{'slot':>5}  {'path':<11}{'its':>6}{'comm s/it':>11}{'model':>9}"
        f"{'Gbit/s':>9}{'model':>8}{'iter err':>10}"
    ]
    for r in rows:
        lines.append(
            f"{r.job_id:<16}{r.slot:>5}  {r.path:<11}{r.iterations:>6.0f}"
            f"{r.measured_comm_s:>11.4f}{r.predicted_comm_s:>9.4f}"
            f"{_gbps(r.measured_gbps):>9}{_gbps(r.predicted_gbps):>8}{100 * r.iter_error:>9.0f}%"
        )
    return "\n".join(lines)


def bandwidth_table(fits: Sequence[BandwidthFit]) -> str:
    """After each slot: the model's bandwidth per path (and key) against the shaped rate."""
    lines = [
        f"{'after slot':>10}  {'path':<11}{'model Gbit/s':>13}{'shaped':>8}{'error':>8}"
        "  jobs (measured on)"
    ]
    for f in fits:
        lines.append(
            f"{f.slot:>10}  {f.path:<11}{f.model_gbps:>13.3f}"
            f"{f.shaped_gbps:>8.3f}{100 * f.error:>7.0f}%  {f.jobs} ({f.measured_on})"
        )
    return "\n".join(lines)
