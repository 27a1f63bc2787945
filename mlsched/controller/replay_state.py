"""``mlsched simulate --replay STATE.db``: a testbed run's measurements fed to the engine.

The controller's state file keeps, per slot, every admission decision, every allocation
(by agent), every job's progress and every measurement, and the run's setup (policy and
its settings, seed, slot length, profile, the cluster as the engine numbered its servers).
A replay builds the same engine on that cluster with a :class:`ReplayExecutor` that reports
what the real run reported, slot by slot, and compares what the replayed engine decides
with what the real one decided: given the same measurements, the simulator's engine must
make the same admissions and allocations, or the first slot where it did not is reported.

What a state file cannot replay, refused by name: a run whose cluster changed (agents
joined or left after the first slot) or whose controller was restarted (the engine then
resumed from stored records, not from slot 0). Job failures are not in the history: a run
with failures replays up to the first one. Finish times within a slot are not stored
either; decisions do not depend on them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mlsched.controller.measurement_rows import measurement_from_row
from mlsched.controller.runs import Layout, placement_layout
from mlsched.controller.store import Store
from mlsched.core.allocation import JobState, Placement
from mlsched.core.cluster import Cluster
from mlsched.core.errors import SpecError
from mlsched.core.job import JobSpec
from mlsched.engine.builder import build_engine
from mlsched.engine.executor import JobProgress, SlotReport
from mlsched.engine.replay import ReplayExecutor
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.perfmodel.profile import load_profile
from mlsched.scheduler.registry import create

__all__ = ["Decisions", "Recorded", "ReplayOutcome", "load_recorded", "replay_state"]


@dataclass(frozen=True)
class Decisions:
    """One slot's admissions ``(job, admitted)`` and allocations ``(job, layout)``, each
    sorted by job id."""

    admissions: tuple[tuple[str, bool], ...] = ()
    allocations: tuple[tuple[str, Layout], ...] = ()


@dataclass
class Recorded:
    """What a state file holds of a run, read back."""

    setup: dict[str, Any]
    cluster: Cluster
    jobs: list[JobSpec]
    reports: dict[int, SlotReport]
    decisions: list[Decisions]
    damaged: int = 0  # history rows that could not be read (their sample is lost)


@dataclass
class ReplayOutcome:
    policy: str
    recorded: list[Decisions]
    replayed: list[Decisions]
    damaged: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def slots(self) -> int:
        return len(self.recorded)

    @property
    def first_difference(self) -> int | None:
        for slot, (a, b) in enumerate(zip(self.recorded, self.replayed, strict=True)):
            if a != b:
                return slot
        return None

    def describe(self) -> str:
        admitted = sum(len(d.admissions) for d in self.recorded)
        placed = sum(len(d.allocations) for d in self.recorded)
        head = (
            f"replay of {self.policy}: {self.slots} slots, {admitted} admission decisions, "
            f"{placed} job-slot allocations"
        )
        at = self.first_difference
        if at is None:
            return f"{head}: the same, slot by slot"
        rec, rep = self.recorded[at], self.replayed[at]
        return (
            f"{head}: they differ from slot {at}:\n"
            f"  recorded admissions {list(rec.admissions)}\n"
            f"  replayed admissions {list(rep.admissions)}\n"
            f"  recorded allocations {_show(rec.allocations)}\n"
            f"  replayed allocations {_show(rep.allocations)}"
        )


def load_recorded(path: Path) -> Recorded:
    """The run a controller's state file recorded; SpecError naming what makes it
    unreplayable."""
    if not path.is_file():
        raise SpecError("replay", str(path), "an existing controller state file")
    store = Store(path)
    try:
        setup = store.get_meta("engine")
        if not isinstance(setup, dict):
            raise SpecError(
                "replay",
                str(path),
                "a state file whose controller recorded its setup (this release)",
            )
        if store.get_meta("cluster_changes", 0) or store.get_meta("resumed", False):
            raise SpecError(
                "replay",
                str(path),
                "a run on one cluster by one controller (agents joined or left, or the "
                "controller was restarted, during this one)",
            )
        cluster = Cluster.from_dict(setup["cluster"])
        index = {s.name: i for i, s in enumerate(cluster.servers)}

        def placement_of(layout: Layout) -> Placement | None:
            try:
                return Placement(
                    tuple((index[a], w) for a, w, _ in layout if w),
                    tuple((index[a], p) for a, _, p in layout if p),
                )
            except KeyError:
                return None

        decided: dict[str, int] = {}
        by_slot: dict[int, tuple[list[tuple[str, bool]], list[tuple[str, Layout]]]] = {}
        for d in store.decisions():
            decided.setdefault(d["job_id"], int(d["slot"]))
            by_slot.setdefault(int(d["slot"]), ([], []))[0].append((d["job_id"], d["admitted"]))
        for a in store.allocations():
            layout = tuple(tuple(e) for e in a["placement"]["layout"])
            by_slot.setdefault(int(a["slot"]), ([], []))[1].append((a["job_id"], layout))
        jobs, damaged = _jobs(store.jobs(), decided)
        reports: dict[int, SlotReport] = {}
        for p in store.progress():
            report = reports.setdefault(int(p["slot"]), SlotReport(int(p["slot"])))
            report.progress[p["job_id"]] = JobProgress(
                float(p["units"]), bool(p["finished"]), None, float(p["restart_s"])
            )
        for row in store.measurements():
            try:
                m = measurement_from_row(row, placement_of)
            except ValueError:
                damaged += 1
                continue
            if m is not None:
                reports.setdefault(m.slot, SlotReport(m.slot)).measurements.append(m)
        slots = int(store.get_meta("slot", 0))
    finally:
        store.close()
    decisions = [_decisions(*by_slot.get(t, ([], []))) for t in range(slots)]
    return Recorded(setup, cluster, jobs, reports, decisions, damaged)


def replay_state(path: Path) -> ReplayOutcome:
    """Replay the run in ``path``: the engine on its cluster with its policy, settings,
    seed and jobs, fed its measurements; what the engine decided beside what was recorded."""
    rec = load_recorded(path)
    setup = rec.setup
    policy = create(setup["policy"], **dict(setup.get("policy_options") or {}))
    profile = load_profile(Path(setup["profile"])) if setup.get("profile") else None
    runtime = RuntimeEstimator(rec.cluster, dict(policy.runtime_families) or None, profile=profile)
    engine = build_engine(
        rec.cluster,
        policy,
        rec.jobs,
        executor=ReplayExecutor(rec.reports),
        runtime=runtime,
        slot_seconds=float(setup["slot_seconds"]),
        seed=int(setup.get("seed", 0)),
        stall_slots=10**9,
        reject_on_policy_error=True,
        check_types=False,
    )
    names = [s.name for s in rec.cluster.servers]
    replayed = []
    for _ in rec.decisions:
        outcome = engine.step()
        admissions = [(c.job_id, c.new is not JobState.REJECTED) for c in outcome.decided]
        allocations = [
            (job_id, placement_layout(p, names.__getitem__))
            for job_id, p in engine.placements.items()
        ]
        replayed.append(_decisions(admissions, allocations))
    return ReplayOutcome(setup["policy"], rec.decisions, replayed, rec.damaged)


def _jobs(rows: Iterable[dict[str, Any]], decided: dict[str, int]) -> tuple[list[JobSpec], int]:
    """The submitted jobs, each arriving in the slot the engine decided it (a submission
    between slots arrives at the next slot)."""
    jobs, damaged = [], 0
    for row in rows:
        if row.get("spec") is None:
            damaged += 1
            continue
        try:
            spec = JobSpec.from_dict(row["spec"])
        except SpecError:
            damaged += 1
            continue
        arrival = decided.get(spec.job_id, spec.arrival_slot)
        jobs.append(replace(spec, arrival_slot=max(spec.arrival_slot, arrival)))
    return jobs, damaged


def _decisions(
    admissions: list[tuple[str, bool]], allocations: list[tuple[str, Layout]]
) -> Decisions:
    return Decisions(tuple(sorted(admissions)), tuple(sorted(allocations)))


def _show(allocations: tuple[tuple[str, Layout], ...]) -> str:
    return (
        ", ".join(
            f"{j}: " + " ".join(f"{a}:{w}w{p}ps" for a, w, p in layout) for j, layout in allocations
        )
        or "none"
    )
