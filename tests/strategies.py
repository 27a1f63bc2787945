"""Hypothesis strategies for random clusters and workloads, and a recorded engine run.

A :class:`Scenario` is everything one simulated run needs: a cluster of 1-6 servers
(worker/PS/both pools, some with GPUs of a type, resources gpu/cpu/mem_gb/bw_gbps), 1-15
jobs (PS async, PS sync, ring-all-reduce) whose demands usually fit some worker server but
not always, arrival slots, sigmoid or constant utilities, a horizon (None or small) and a
ground truth for the simulator. :func:`run_recorded` runs one through the real engine and
simulator and keeps every slot's allocation and progress report, so tests can check
invariants without trusting the engine's own checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from engine_helpers import make_engine
from hypothesis import strategies as st

from mlsched.core import (
    Allocation,
    Arch,
    Cluster,
    JobSpec,
    Placement,
    Pool,
    ResourceVector,
    Server,
    SyncMode,
    Topology,
    Utility,
)
from mlsched.engine.engine import RunResult
from mlsched.engine.executor import Executor, SlotReport
from mlsched.engine.simulator import SimulatedExecutor, TruthConfig
from mlsched.scheduler import create

__all__ = [
    "GPU_TYPES",
    "RecordedRun",
    "RecordingExecutor",
    "Scenario",
    "clusters",
    "job_specs",
    "run_recorded",
    "scenarios",
]

GPU_TYPES = ("V100", "K80", "A100")
MODELS = ("resnet20", "vgg16", "lstm")
KINDS = ((Arch.PS, SyncMode.ASYNC), (Arch.PS, SyncMode.SYNC), (Arch.ALLREDUCE, SyncMode.SYNC))


@st.composite
def servers(draw: st.DrawFn, index: int, *, with_gpu: bool, with_bw: bool) -> Server:
    pool = draw(st.sampled_from([Pool.BOTH, Pool.BOTH, Pool.WORKER, Pool.PS]))
    cap: dict[str, float] = {
        "cpu": draw(st.integers(2, 32)),
        "mem_gb": draw(st.integers(4, 128)),
    }
    gpu_type = None
    if with_gpu:
        cap["gpu"] = draw(st.sampled_from([0, 1, 2, 4, 8]))
        if cap["gpu"]:
            gpu_type = draw(st.sampled_from((None, *GPU_TYPES)))
    if with_bw:
        cap["bw_gbps"] = draw(st.sampled_from([5, 10, 25, 40]))
    return Server(
        f"s{index}",
        ResourceVector(cap),
        pool=pool,
        gpu_type=gpu_type,
        rack=f"rack{draw(st.integers(0, 1))}",
        uplink_gbps=draw(st.sampled_from([10.0, 25.0, 40.0])),
    )


@st.composite
def clusters(draw: st.DrawFn, min_servers: int = 1, max_servers: int = 6) -> Cluster:
    n = draw(st.integers(min_servers, max_servers))
    with_gpu = draw(st.booleans())
    with_bw = draw(st.booleans())
    members = tuple(draw(servers(i, with_gpu=with_gpu, with_bw=with_bw)) for i in range(n))
    topology = Topology(intra_server_gbps=100.0, rack_core_gbps=draw(st.sampled_from([10.0, 40.0])))
    return Cluster(members, topology)


def _amount(draw: st.DrawFn, cap: float, oversize: bool, low: int = 1) -> int:
    """An integer demand up to ``cap`` (at least ``low``), or just above it when oversize."""
    top = max(low, int(cap))
    return top + draw(st.integers(1, 4)) if oversize else draw(st.integers(low, top))


@st.composite
def job_specs(draw: st.DrawFn, job_id: str, cluster: Cluster, max_arrival: int = 8) -> JobSpec:
    """One job whose demands usually fit one (random) worker server of ``cluster``."""
    arch, sync = draw(st.sampled_from(KINDS))
    worker_hosts = [cluster.servers[i] for i in cluster.worker_servers] or list(cluster.servers)
    target = draw(st.sampled_from(worker_hosts))
    cap = target.capacity
    oversize = draw(st.integers(0, 9)) == 0  # about one job in ten cannot fit it
    worker: dict[str, float] = {
        "cpu": _amount(draw, min(cap["cpu"], 8), oversize),
        "mem_gb": _amount(draw, min(cap["mem_gb"], 32), False),
    }
    gpu_type = None
    if cap["gpu"] > 0 and draw(st.booleans()):
        worker["gpu"] = _amount(draw, min(cap["gpu"], 2), False)
        if draw(st.integers(0, 3)) == 0:
            gpu_type = draw(st.sampled_from(GPU_TYPES))  # may not exist anywhere
        elif target.gpu_type is not None and draw(st.booleans()):
            gpu_type = target.gpu_type
    elif oversize and draw(st.booleans()):
        worker["gpu"] = 1  # a GPU job where this server (perhaps every server) has none
    ps: dict[str, float] = {"cpu": draw(st.integers(1, 4)), "mem_gb": draw(st.integers(1, 8))}
    if "bw_gbps" in cluster.resource_names and draw(st.booleans()):
        worker_bw = draw(st.integers(1, 10))
        worker["bw_gbps"] = worker_bw
        ps["bw_gbps"] = draw(st.integers(worker_bw, 20))
    chunks = draw(st.integers(1, 4))
    max_workers = draw(st.one_of(st.none(), st.integers(1, 4)))
    cap_workers = chunks if max_workers is None else max_workers
    min_workers = draw(st.sampled_from([1, 1, 1, 2])) if cap_workers >= 2 else 1
    requested = draw(st.one_of(st.none(), st.integers(min_workers, cap_workers)))
    batch_size = draw(st.sampled_from([16, 32]))
    global_batch = None
    if sync is SyncMode.SYNC and draw(st.integers(0, 3)) == 0:
        global_batch = batch_size * draw(st.integers(1, 4))
    if draw(st.booleans()):
        utility = Utility.sigmoid(
            priority=draw(st.integers(1, 10)),
            decay=draw(st.sampled_from([0.0, 0.1, 1.0])),
            target=draw(st.integers(1, 20)),
        )
    else:
        utility = Utility.constant(draw(st.integers(1, 10)))
    return JobSpec(
        job_id=job_id,
        arrival_slot=draw(st.integers(0, max_arrival)),
        model=draw(st.sampled_from(MODELS)),
        arch=arch,
        sync=sync,
        epochs=draw(st.integers(1, 2)),
        chunks=chunks,
        batches_per_chunk=draw(st.integers(1, 30)),
        batch_size=batch_size,
        global_batch=global_batch,
        max_workers=max_workers,
        min_workers=min_workers,
        ps_ratio=draw(st.one_of(st.none(), st.sampled_from([1.0, 2.0]))),
        requested_workers=requested,
        requested_ps=draw(st.one_of(st.none(), st.integers(1, 2))),
        worker=ResourceVector(worker),
        ps=ResourceVector(ps),
        gpu_type=gpu_type,
        compute_s=draw(st.sampled_from([0.05, 0.2, 0.5, 1.0])),
        update_s=draw(st.sampled_from([0.0, 0.01])),
        gradient_mb=draw(st.sampled_from([0.5, 5.0, 50.0])),
        utility=utility,
        valuation=draw(st.one_of(st.none(), st.floats(0.5, 100.0))),
    )


@dataclass(frozen=True)
class Scenario:
    """One simulated run's inputs."""

    cluster: Cluster
    jobs: tuple[JobSpec, ...]
    horizon: int | None
    seed: int
    slot_seconds: float = 10.0
    truth: TruthConfig = field(default_factory=TruthConfig)

    def __repr__(self) -> str:  # what hypothesis prints for a failing example
        servers = ", ".join(
            f"{s.name}({s.pool.value},{s.gpu_type},{dict(s.capacity)})"
            for s in self.cluster.servers
        )
        jobs = "\n    ".join(repr(j) for j in self.jobs)
        return (
            f"Scenario(horizon={self.horizon}, seed={self.seed}, truth={self.truth},\n"
            f"  servers=[{servers}],\n  jobs=[\n    {jobs}])"
        )


@st.composite
def scenarios(draw: st.DrawFn, max_jobs: int = 15) -> Scenario:
    cluster = draw(clusters())
    n_jobs = draw(st.integers(1, max_jobs))
    jobs = tuple(draw(job_specs(f"j{i}", cluster)) for i in range(n_jobs))
    truth = TruthConfig(
        compute_scale=draw(st.sampled_from([1.0, 1.5])),
        noise=draw(st.sampled_from([0.0, 0.1])),
        restart_s=draw(st.sampled_from([0.0, 2.0])),
    )
    return Scenario(
        cluster=cluster,
        jobs=jobs,
        horizon=draw(st.one_of(st.none(), st.integers(1, 25))),
        seed=draw(st.integers(0, 2**16)),
        truth=truth,
    )


class RecordingExecutor(Executor):
    """Runs the real simulator and records every slot's allocation and report."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.allocations: dict[int, dict[str, Placement]] = {}
        self.reports: dict[int, SlotReport] = {}

    def apply(
        self,
        slot: int,
        allocation: Allocation,
        jobs: Mapping[str, JobSpec],
        remaining: Mapping[str, float],
    ) -> None:
        self.allocations[slot] = dict(allocation.items())
        self.inner.apply(slot, allocation, jobs, remaining)

    def collect(self, slot: int) -> SlotReport:
        report = self.inner.collect(slot)
        self.reports[slot] = report
        return report


@dataclass
class RecordedRun:
    result: RunResult
    allocations: dict[int, dict[str, Placement]]
    reports: dict[int, SlotReport]


def run_recorded(
    scenario: Scenario, policy_name: str, *, max_slots: int = 300, stall_slots: int = 20
) -> RecordedRun:
    """Run ``scenario`` with a fresh policy from the registry, engine and simulator."""
    cluster = scenario.cluster
    executor = RecordingExecutor(
        SimulatedExecutor(cluster, scenario.slot_seconds, truth=scenario.truth, seed=scenario.seed)
    )
    engine = make_engine(
        cluster,
        create(policy_name),
        scenario.jobs,
        slot_seconds=scenario.slot_seconds,
        horizon=scenario.horizon,
        seed=scenario.seed,
        executor=executor,
        stall_slots=stall_slots,
    )
    result = engine.run(until=max_slots)
    return RecordedRun(result, executor.allocations, executor.reports)
