"""Coasting steady jobs (mlsched.engine.coast) changes nothing but the time a run takes.

Each case runs the same engine twice, coasting and stepping every job through the
simulator, and compares everything a run leaves: records, model errors in order,
utilization per slot, the runtime model's fits. The cases are chosen to reach every road
out of a coast: restarts and start-up debts (demo's 30-s restarts), a model that learns
(a truth slower than the specs), preemptive policies that pause and move jobs (tiresias,
las2d, drf), jobs finishing mid-slot (their last slot coasted too), and a queue of
thousands of steady slots (a Philly-shaped trace under fifo). Which bug fails it: a
coasted slot that adds progress in another order, misses a window append, reports a
measurement out of allocation order, ends a job at another second, or coasts a job that
owed a restart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mlsched.engine.builder import build_engine
from mlsched.engine.engine import Engine, RunResult
from mlsched.engine.simulator import TruthConfig
from mlsched.scheduler.registry import create
from mlsched.workloads import load_workload
from mlsched.workloads.base import Workload
from mlsched.workloads.loading import from_trace
from mlsched.workloads.traces.synth import generate_philly, philly_cluster


def _engine(workload: Workload, policy: str, seed: int, truth: TruthConfig) -> Engine:
    return build_engine(
        workload.cluster,
        create(policy),
        workload.jobs,
        slot_seconds=workload.slot_seconds,
        horizon=workload.horizon_slots,
        seed=seed,
        families=workload.runtime,
        truth=truth,
    )


def _same_runs(workload: Workload, policy: str, seed: int, truth: TruthConfig) -> int:
    """Run both ways; assert the results equal; return the job-slots coasted."""
    coasting, stepping = (_engine(workload, policy, seed, truth) for _ in range(2))
    a: RunResult = coasting.run()
    b: RunResult = stepping.run(coast=False)
    assert stepping.coasted_slots == 0
    assert a.slots == b.slots and a.stalled == b.stalled
    assert a.records == b.records, f"{policy} seed {seed}: records differ"
    assert a.model_errors == b.model_errors, f"{policy} seed {seed}: model errors differ"
    assert np.array_equal(a.utilization, b.utilization)
    fa, fb = coasting.runtime.fits, stepping.runtime.fits
    assert fa.keys() == fb.keys()
    for key in fa:
        assert np.array_equal(fa[key].params, fb[key].params), key
    return coasting.coasted_slots


@pytest.mark.parametrize("seed", range(8))
def test_demo_with_restarts_and_a_learning_model(seed: int) -> None:
    """Restarts (30 s: debts over slots), a truth 30 % slower than the specs (the model
    refits), and preemption."""
    workload = load_workload("demo", seed=seed)
    truth = TruthConfig(compute_scale=1.3, comm_scale=0.8)
    coasted = 0
    for policy in ("fifo", "tiresias", "las2d", "drf", "optimus", "oasis"):
        coasted += _same_runs(workload, policy, seed, truth)
    assert coasted > 0, "nothing coasted: the test checks nothing"


def _philly(tmp_path: Path, jobs: int, gpus: int, seed: int) -> Workload:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(generate_philly(jobs, cluster_gpus=gpus, seed=seed)))
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps(philly_cluster(gpus)))
    return from_trace(trace, "philly", options={"cluster": str(cluster)})


@pytest.mark.parametrize("seed", range(8))
def test_a_trace_queue(tmp_path: Path, seed: int) -> None:
    """A loaded Philly-shaped trace: most job-slots are steady, jobs finish mid-slot."""
    workload = _philly(tmp_path, 150, 32, seed)
    coasted = {p: _same_runs(workload, p, seed, TruthConfig()) for p in ("fifo", "tiresias")}
    # fifo never moves a job: nearly every slot of a long job after its first coasts.
    assert coasted["fifo"] > 0


@pytest.mark.parametrize("seed", range(8))
def test_fifo_coasts_every_slot_after_a_jobs_first(tmp_path: Path, seed: int) -> None:
    """Under fifo with no start-up time a job never moves or owes anything after its first
    slot, so every later slot coasts, the one that finishes it included. Which bug fails
    it: a finishing slot sent back to the simulator, or a job that stops coasting early."""
    workload = _philly(tmp_path, 150, 32, seed)
    engine = _engine(workload, "fifo", seed, TruthConfig(startup_s=0.0))
    records = engine.run().records.values()
    ran = [r for r in records if r.slots_run > 0]
    assert len(ran) == len(workload.jobs)
    assert engine.coasted_slots == sum(r.slots_run - 1 for r in ran) > 0


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("differ", ["speed", "workers"])
def test_a_key_refitted_while_its_jobs_coast(seed: int, differ: str) -> None:
    """Jobs of one profile key (same model, batch size and GPU type) arriving one after
    another: each newcomer's first sample refits the key while the earlier jobs coast on a
    quiet repeat, so their predictions change under them. ``speed``: the jobs' compute_s
    disagree, so the key's fit stops being exact; ``workers``: ring jobs of 1 to 4 workers
    under a truth unlike the specs, so the first fit (one worker: no communication) is
    exact and the second, with communication, is exact with new parameters. Which
    bug fails it: a coasted repeat kept on its shortcut (an append and the old prediction)
    after its key's parameters or exactness changed."""
    from dataclasses import replace

    from mlsched.core.job import Arch

    demo = load_workload("demo", seed=seed)
    base = demo.jobs[0]
    rng = np.random.default_rng(seed)
    jobs = []
    for i in range(6):
        job = replace(
            base,
            job_id=f"same-key-{i}",
            arrival_slot=int(3 * i + rng.integers(0, 3)),
            epochs=int(rng.integers(200, 600)),
        )
        if differ == "speed":
            job = replace(job, compute_s=float(rng.uniform(0.03, 0.12)))
        else:
            n = 1 + i % base.worker_cap
            job = replace(
                job, arch=Arch.ALLREDUCE, min_workers=n, max_workers=n, requested_workers=n
            )
        jobs.append(job)
    workload = replace(demo, jobs=tuple(jobs), horizon_slots=None)
    truth = TruthConfig() if differ == "speed" else TruthConfig(compute_scale=1.3, comm_scale=0.8)
    coasted = 0
    for policy in ("fifo", "drf"):
        coasted += _same_runs(workload, policy, seed, truth)
    assert coasted > 0, "nothing coasted: the test checks nothing"


@pytest.mark.parametrize("coast", [True, False])
def test_every_measurement_enters_its_keys_window(tmp_path: Path, coast: bool) -> None:
    """Each slot a job measured (one model error each) is one sample in its profile key's
    window, a steady job's repeated sample included, coasted or stepped. Which bug fails
    it: a repeat that updates the model error but skips the window (both ways alike, so
    the runs above would still agree)."""
    from mlsched.perfmodel.estimator import RuntimeEstimator

    workload = _philly(tmp_path, 60, 32, 0)
    runtime = RuntimeEstimator(workload.cluster, workload.runtime, window=1_000_000)
    engine = build_engine(
        workload.cluster,
        create("fifo"),
        workload.jobs,
        slot_seconds=workload.slot_seconds,
        horizon=workload.horizon_slots,
        runtime=runtime,
    )
    result = engine.run(coast=coast)
    windows = [len(state.samples) for state in runtime._keys.values()]
    assert sum(windows) == len(result.model_errors) > len(workload.jobs)
    assert (engine.coasted_slots > 0) is coast


def test_noise_turns_coasting_off(tmp_path: Path) -> None:
    """A noisy truth makes every slot its own: nothing may coast."""
    workload = _philly(tmp_path, 40, 32, 0)
    engine = _engine(workload, "fifo", 0, TruthConfig(noise=0.1))
    engine.run()
    assert engine.coasted_slots == 0


def _cli(*args: Any) -> None:
    from mlsched.cli import main

    assert main([str(a) for a in args]) == 0


def test_simulate_reads_a_trace_in_place(tmp_path: Path, capsys: Any) -> None:
    """``simulate --trace-format`` runs the jobs ``trace import`` writes, in one process,
    and says what the import assumed."""
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(generate_philly(60, cluster_gpus=32, seed=3)))
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps(philly_cluster(32)))
    _cli("trace", "import", trace, "--format", "philly", "--cluster", cluster,
         "--out", tmp_path / "w.yaml")  # fmt: skip
    _cli("simulate", "--workload", tmp_path / "w.yaml", "--policy", "fifo",
         "--out", tmp_path / "two-step")  # fmt: skip
    capsys.readouterr()
    _cli("simulate", "--workload", trace, "--trace-format", "philly", "--cluster", cluster,
         "--policy", "fifo", "--out", tmp_path / "one-step")  # fmt: skip
    said = capsys.readouterr().out
    assert "philly trace trace.json" in said and "assumed:" in said
    one = (tmp_path / "one-step" / "jobs.csv").read_text()
    assert one == (tmp_path / "two-step" / "jobs.csv").read_text()
    assert len(one.splitlines()) == 61


def test_a_trace_in_place_needs_its_cluster(tmp_path: Path, capsys: Any) -> None:
    from mlsched.cli import main

    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(generate_philly(5, cluster_gpus=32, seed=0)))
    assert main(["simulate", "--workload", str(trace), "--trace-format", "philly",
                 "--policy", "fifo"]) != 0  # fmt: skip
    assert "--cluster" in capsys.readouterr().err
    assert main(["simulate", "--workload", str(trace), "--trace-format", "philly",
                 "--policy", "fifo", "--cluster", str(trace), "-W", "speed=2"]) != 0  # fmt: skip
    assert "options.speed" in capsys.readouterr().err
