"""``mlsched experiment testbed --emulate``: policies compared on an emulated cluster.

Each policy runs the same small job mix for real, on a fresh emulated cluster (4 hosts in 2
racks, 1 Gbit/s host links, 200 Mbit/s between racks) with the controller in this process.
The run's records become the same :class:`RunResult` a simulation gives, so the output is
what ``mlsched simulate --policy a,b --out`` writes (a folder per policy with
``summary.json`` and ``jobs.csv``, ``comparison.json``, the JCT CDF and utilisation plots),
plus ``results.json`` with a fidelity report: each job's JCT measured on the testbed next
to the JCT the simulator gives the same policy on the same jobs and cluster (its truth = the
job specs), and the runtime model's error per slot.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mlsched.core.job import JobSpec
from mlsched.engine.results import RunResult
from mlsched.engine.simulator import TruthConfig
from mlsched.engine.summary import jct_s, summarize
from mlsched.testbed.emulated.cluster import EmulatedCluster
from mlsched.testbed.emulated.comm_report import model_cluster
from mlsched.testbed.emulated.demo import DEMO_SPEC, emulated_controller, wait_for_engine
from mlsched.testbed.emulated.topology import EmulationSpec, plan_network
from mlsched.workloads.base import Workload

__all__ = [
    "TESTBED_JOBS",
    "fidelity_rows",
    "fidelity_table",
    "run_policy",
    "run_testbed_experiment",
    "testbed_workload",
]

log = logging.getLogger(__name__)

_FINAL = ("done", "rejected", "failed", "cancelled")
_TRAINING = {"num_samples": 256, "image_size": 32, "timeout_s": 30.0}


def _job(
    job_id: str, arch: str, workers: int, units: int, arrival: int, **kw: Any
) -> dict[str, Any]:
    job: dict[str, Any] = {
        "job_id": job_id,
        "model": "mlp",
        "arch": arch,
        "batch_size": 8,
        "batches_per_chunk": units,
        "max_workers": workers,
        "requested_workers": workers,
        "arrival_slot": arrival,
        "worker": {"gpu": 1, "cpu": 0.5},
        "compute_s": 0.004,
        "gradient_mb": 0.79,  # the MLP on 32x32 images: 197,322 parameters
        "training": _TRAINING,
    }
    if arch == "ps":
        job.update(requested_ps=1, ps={"cpu": 0.5})
    job.update(kw)
    return job


#: Small on purpose: at most 3 training processes at once fit 2 cores; each job a few slots.
TESTBED_JOBS: list[dict[str, Any]] = [
    _job("ps-a", "ps", 1, 300, 0),
    _job("ring-b", "allreduce", 2, 200, 0),
    _job("ps-sync-c", "ps", 2, 150, 1, sync="sync"),
    _job("ps-d", "ps", 1, 300, 2),
]


def testbed_workload(
    spec: EmulationSpec = DEMO_SPEC,
    jobs: Sequence[dict[str, Any]] = TESTBED_JOBS,
    slot_seconds: float = 5.0,
) -> Workload:
    """The jobs on the emulated cluster as the simulator sees it (same hosts, racks, links)."""
    plan = plan_network(spec, "000000", 0)  # names only: nothing is built
    return Workload(
        name="testbed-emulated",
        cluster=model_cluster(plan, spec.link_topology()),
        jobs=tuple(JobSpec.from_dict(j, f"jobs[{i}]") for i, j in enumerate(jobs)),
        slot_seconds=slot_seconds,
        description=f"{len(jobs)} small jobs on {spec.hosts} emulated hosts in {spec.racks} racks",
    )


def run_policy(
    policy: str, workload: Workload, jobs: Sequence[dict[str, Any]], spec: EmulationSpec,
    run_dir: Path, max_slots: int, say: Callable[[str], None],
) -> tuple[RunResult, Workload]:  # fmt: skip
    """The policy's run on a fresh cluster, and ``workload`` on that cluster as its engine
    numbered the servers (agents register in any order; a policy that places by server
    index places alike only on the same numbering)."""
    with EmulatedCluster.create(spec, run_dir / "state.json") as cluster:
        ctl = emulated_controller(cluster, policy=policy, slot_seconds=workload.slot_seconds)
        started = time.perf_counter()
        try:
            cluster.start_agents(ctl.address)
            ctl.submit(json.dumps(list(jobs)))
            engine = wait_for_engine(ctl, cluster)
            while engine.slot < max_slots:
                states = [j.state for j in ctl.jobs()]
                if states and all(s in _FINAL for s in states):
                    break
                time.sleep(1.0)
        finally:
            ctl.stop(stop_tasks=True)
        result = engine.result(wall_seconds=time.perf_counter() - started)
    done = sum(1 for r in result.records.values() if r.state.value == "done")
    say(f"{policy}: {done} of {len(result.records)} jobs done in {result.slots} slots")
    return result, dataclasses.replace(workload, cluster=engine.cluster)


def fidelity_rows(measured: RunResult, simulated: RunResult) -> list[dict[str, Any]]:
    """Per job: JCT on the testbed and in the simulator (seconds), and their ratio."""
    rows = []
    for job_id, rec in sorted(measured.records.items()):
        sim = simulated.records.get(job_id)
        jm = jct_s(rec, measured.slot_seconds)
        js = jct_s(sim, simulated.slot_seconds) if sim is not None else None
        rows.append(
            {
                "job_id": job_id,
                "state_measured": rec.state.value,
                "state_simulated": sim.state.value if sim is not None else None,
                "jct_measured_s": jm,
                "jct_simulated_s": js,
                "measured_over_simulated": jm / js if jm is not None and js else None,
            }
        )
    return rows


def run_testbed_experiment(
    policies: Sequence[str],
    *,
    out: Path,
    spec: EmulationSpec = DEMO_SPEC,
    jobs: Sequence[dict[str, Any]] = TESTBED_JOBS,
    slot_seconds: float = 5.0,
    max_slots: int = 40,
    say: Callable[[str], None] = print,
    truth: TruthConfig | None = None,
) -> dict[str, Any]:
    """Run every policy for real and in the simulator (its truth ``truth``: default the
    job specs, with the default restart cost); write the outputs under ``out``."""
    from mlsched.engine.builder import SimulationConfig, simulate
    from mlsched.engine.summary import job_rows
    from mlsched.experiments.comparison import write_comparison
    from mlsched.experiments.report import write_run

    workload = testbed_workload(spec, jobs, slot_seconds)
    runs = []
    fidelity: dict[str, Any] = {}
    for policy in policies:
        measured, as_run = run_policy(
            policy, workload, jobs, spec, out / "runs" / policy, max_slots, say
        )
        simulated = simulate(as_run, SimulationConfig(policy, truth=truth or TruthConfig()))
        summary = summarize(measured)
        runs.append((summary, measured))
        write_run(
            out / policy, summary, job_rows(measured), workload=workload, seed=0,
            truth={"emulated": spec.to_dict()},
        )  # fmt: skip
        errors = [
            {"job_id": e.job_id, "slot": e.slot, "relative": e.relative}
            for e in measured.model_errors
        ]
        fidelity[policy] = {
            "jobs": fidelity_rows(measured, simulated),
            "simulated_summary": summarize(simulated).to_dict(),
            "model_errors": errors,
        }
    plots = write_comparison(out, runs, workload=workload, seed=0, policy_options={})
    results = {
        "experiment": "testbed",
        "emulated": spec.to_dict(),
        "slot_seconds": slot_seconds,
        "policies": list(policies),
        "summaries": {s.policy: s.to_dict() for s, _ in runs},
        "fidelity": fidelity,
        "simulated_truth": (truth or TruthConfig()).describe(),
        "plots": [str(p) for p in plots[1:]],
    }
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    return results


def fidelity_table(results: dict[str, Any]) -> str:
    """One line per policy and job: JCT measured vs simulated."""
    lines = [f"{'policy':<10}{'job':<12}{'measured':>10}{'simulated':>11}{'ratio':>8}"]
    for policy, data in results["fidelity"].items():
        for row in data["jobs"]:
            m, s, r = row["jct_measured_s"], row["jct_simulated_s"], row["measured_over_simulated"]
            lines.append(
                f"{policy:<10}{row['job_id']:<12}"
                f"{'-' if m is None else f'{m:.1f} s':>10}{'-' if s is None else f'{s:.1f} s':>11}"
                f"{'-' if r is None else f'{r:.2f}':>8}"
            )
    return "\n".join(lines)
