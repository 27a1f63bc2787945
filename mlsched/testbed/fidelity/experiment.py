"""``mlsched experiment fidelity``: does the simulator predict the emulated testbed?

The same job mix runs for real, under each policy, on a fresh emulated cluster whose stand-in
GPUs are CPU slices (:data:`FIDELITY_SPEC`: every task in a share of its own, so a job's speed
depends on its devices and links, not on the other jobs); then the simulator runs the same
jobs on the same cluster with, as its truth, a profile of exactly those slices (measured
first, with the same trainers, unless one is given). The report
(:mod:`mlsched.testbed.fidelity.report`) sets each job's measured JCT beside its simulated
one, each policy's mean beside its simulated mean, and the ranking of the policies in both,
with an ablation: the simulator without the profile (the job specs), without start-up and
restart costs, and (``ablate_isolation``) a real run without the slices.

Slots are 10 s: a job's start-up in its slices (14-18 s measured, the torch import in a
quarter of a core most of it) is a quarter to a half of a job's time.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mlsched.engine.builder import SimulationConfig, simulate
from mlsched.engine.simulator import TruthConfig
from mlsched.perfmodel.profile import Profile, load_profile, mean_profile
from mlsched.profiling.grid import cells_for_jobs, measure_budget, run_grid
from mlsched.profiling.measure import SLICED_STEPS, Settings
from mlsched.testbed.emulated.topology import EmulationSpec
from mlsched.testbed.experiment import run_policy, testbed_workload
from mlsched.testbed.fidelity.report import (
    FidelityRun,
    ablation_rows,
    fidelity_checks,
    write_plots,
)

__all__ = [
    "FIDELITY_POLICIES",
    "FIDELITY_SPEC",
    "SCALES",
    "fidelity_jobs",
    "profile_settings",
    "run_fidelity",
]

#: 4 hosts in 2 racks, one stand-in GPU each: a quarter core per training rank and a fifth
#: per parameter server; a host declares 0.45 cores (a rank and a PS) and may use 0.5, the
#: rest for its agent. The slices hold at most 1.8 of this 2-core machine's cores: the
#: controller has the rest.
FIDELITY_SPEC = EmulationSpec(
    hosts=4, racks=2, host_gbps=1.0, rack_gbps=0.2, gpus=1, cpus=0.45, host_cpus=0.5,
    device_cores=0.25, ps_cores=0.2,
)  # fmt: skip
FIDELITY_POLICIES = ("fifo", "drf", "las2d")
SLOT_SECONDS = 10.0
_SAMPLES = 512
_TRAINING: dict[str, Any] = {"num_samples": _SAMPLES, "timeout_s": 60.0}
_GRADIENT_MB = {"mlp": 0.79, "resnet20": 1.08, "vgg11-narrow": 0.60}
_IMAGE_SIZE = 16  # pixels, unless _IMAGE names another
_IMAGE = {"mlp": 32, "resnet20": _IMAGE_SIZE, "vgg11-narrow": 32}
_KIND = {"ps_async": ("ps", "async"), "ps_sync": ("ps", "sync"), "ring": ("allreduce", "sync")}


def _job(
    job_id: str, model: str, kind: str, workers: int, units: int, arrival: int, batch: int = 8
) -> dict:
    arch, sync = _KIND[kind]
    job: dict[str, Any] = {
        "job_id": job_id,
        "model": model,
        "arch": arch,
        "sync": sync,
        "batch_size": batch,
        "batches_per_chunk": units,  # mini-batches: a 2-worker step does two
        "max_workers": workers,
        "requested_workers": workers,
        "arrival_slot": arrival,
        "worker": {"gpu": 1, "cpu": FIDELITY_SPEC.device_cores},
        "compute_s": 0.05,  # the specs' guess, which the ablation's "no profile" row uses
        "gradient_mb": _GRADIENT_MB[model],
        "training": {**_TRAINING, "image_size": _IMAGE[model]},
    }
    if arch == "ps":
        job.update(requested_ps=1, ps={"cpu": FIDELITY_SPEC.ps_cores})
    return job


#: Per scale: the jobs (three kinds, three models; more demand than the 4 devices hold, so
#: the policies' orders differ) and the policies run by default.
SCALES: dict[str, tuple[list[dict[str, Any]], tuple[str, ...]]] = {
    "default": (
        [
            _job("mlp-a", "mlp", "ps_async", 1, 1500, 0),
            _job("resnet-sync-b", "resnet20", "ps_sync", 2, 600, 0),
            _job("vgg-ring-c", "vgg11-narrow", "ring", 2, 800, 0),
            _job("mlp-ring-d", "mlp", "ring", 2, 2000, 1),
            _job("resnet-e", "resnet20", "ps_async", 1, 350, 1),
            _job("mlp-f", "mlp", "ps_async", 1, 1200, 2),
            _job("vgg-ring-g", "vgg11-narrow", "ring", 2, 600, 3),
            _job("resnet-sync-h", "resnet20", "ps_sync", 2, 400, 4),
        ],
        FIDELITY_POLICIES,
    ),
    # Mini-batches of 64: compute is most of an iteration (about 0.034 of 0.043 s), as in
    # the jobs a cluster runs, so a simulator that gets compute wrong shows it.
    "smoke": (
        [
            _job("mlp-a", "mlp", "ps_async", 1, 300, 0, batch=64),
            _job("mlp-ring-b", "mlp", "ring", 2, 600, 0, batch=64),
            _job("mlp-sync-c", "mlp", "ps_sync", 2, 360, 0, batch=64),
            _job("mlp-d", "mlp", "ps_async", 1, 150, 1, batch=64),
        ],
        ("las2d", "tiresias"),  # tiresias preempts: the form's restarts
    ),
}


def fidelity_jobs(scale: str = "default") -> list[dict[str, Any]]:
    if scale not in SCALES:
        raise ValueError(f"scale: {scale!r}: one of {', '.join(SCALES)}")
    return [dict(j) for j in SCALES[scale][0]]


def profile_settings(spec: EmulationSpec = FIDELITY_SPEC, batch_size: int = 8) -> Settings:
    """What the jobs run with, in the slices the cluster gives them."""
    return Settings(
        steps=SLICED_STEPS, warmup=10, resume_steps=5, batch_size=batch_size,
        image_size=_IMAGE_SIZE,
        num_samples=_SAMPLES,
        image_sizes=tuple(sorted((m, px) for m, px in _IMAGE.items() if px != _IMAGE_SIZE)),
        device_cores=spec.device_cores, ps_cores=spec.ps_cores,
        ranks_per_node=spec.gpus,  # a ring spread over hosts runs a launcher per host
    )  # fmt: skip


def _batch(jobs: Sequence[dict[str, Any]]) -> int:
    """The one mini-batch size of the jobs, which their cells are measured at."""
    sizes = {int(j["batch_size"]) for j in jobs}
    if len(sizes) != 1:
        raise ValueError(f"jobs: batch sizes {sorted(sizes)}: one for every job of a form")
    return sizes.pop()


def _measure_profile(
    jobs: Sequence[dict[str, Any]], spec: EmulationSpec, path: Path, say: Callable[[str], None]
) -> Profile:
    # The cells at once where their slices fit the machine: the real runs' jobs share it so.
    cells, settings = cells_for_jobs(jobs), profile_settings(spec, _batch(jobs))
    run = run_grid(cells, settings, path, device_type=spec.gpu_type, say=say,
                   budget=measure_budget(settings))  # fmt: skip
    if run.failed:
        cell, why = run.failed[0]
        raise RuntimeError(f"profile cell {' '.join(map(str, cell))} failed: {why}")
    return run.profile


def _measure_through_agents(
    jobs: Sequence[dict[str, Any]], spec: EmulationSpec, path: Path, run_dir: Path,
    say: Callable[[str], None],
) -> Profile:  # fmt: skip
    """The jobs' cells measured through a fresh cluster's agents, in every shape its hosts
    give (:mod:`mlsched.profiling.cluster`): their communication crossed its links."""
    from mlsched.net.auth import ClientAuth, client_channel
    from mlsched.profiling.cluster import run_cluster_grid
    from mlsched.testbed.emulated.cluster import EmulatedCluster
    from mlsched.testbed.emulated.demo import emulated_controller, wait_for_engine

    # The agents run each task in its slice and a launcher per host: theirs to decide.
    settings = dataclasses.replace(
        profile_settings(spec, _batch(jobs)),
        steps=30,
        device_cores=None,
        ps_cores=None,
        ranks_per_node=None,
    )
    with EmulatedCluster.create(spec, run_dir / "state.json") as cluster:
        ctl = emulated_controller(cluster, policy="fifo", slot_seconds=2.0)
        try:
            cluster.start_agents(ctl.address)
            wait_for_engine(ctl, cluster)
            channel = client_channel(ctl.address, ClientAuth(cluster.credentials()[0]))
            try:
                run = run_cluster_grid(
                    ctl.address, channel, cells_for_jobs(jobs), settings, path, say=say
                )
            finally:
                channel.close()
        finally:
            ctl.stop(stop_tasks=True)
    if run.failed:
        cell, why = run.failed[0]
        raise RuntimeError(f"profile cell {' '.join(map(str, cell))} failed: {why}")
    return run.profile


def run_fidelity(
    *,
    out: Path,
    scale: str = "default",
    policies: Sequence[str] | None = None,
    profile_path: Path | None = None,
    ablate_isolation: bool = False,
    profile_via: str = "local",
    spec: EmulationSpec = FIDELITY_SPEC,
    max_slots: int = 60,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Measure the profile (unless ``profile_path`` is an existing file; ``profile_via``:
    here in the cluster's slices, or through its agents), run every policy for real and in
    the simulator, and write ``results.json`` and plots under ``out``."""
    started = time.perf_counter()
    jobs = fidelity_jobs(scale)
    chosen = tuple(policies or SCALES[scale][1])
    out.mkdir(parents=True, exist_ok=True)
    path = profile_path or out / "profile.json"

    def measure(to: Path, name: str) -> Profile:
        if profile_via == "agents":
            return _measure_through_agents(jobs, spec, to, out / "runs" / name, say)
        return _measure_profile(jobs, spec, to, say)

    t0 = time.perf_counter()
    given = profile_path is not None and profile_path.exists()
    before = load_profile(path) if given else measure(out / "profile-before.json", "profile")
    profile_s = 0.0 if given else time.perf_counter() - t0
    workload = testbed_workload(spec, jobs, SLOT_SECONDS)
    real: list[tuple[str, Any, Any]] = []
    for policy in chosen:
        say(f"{policy}: running {len(jobs)} jobs on the emulated cluster ...")
        measured, as_run = run_policy(
            policy, workload, jobs, spec, out / "runs" / policy, max_slots, say
        )
        real.append((policy, measured, as_run))
    profile, bracket = before, []
    if not given:
        # Measured again after the real runs, and the two averaged: a cell measured once in
        # slices of a fraction of a core moved by a third from one measurement to the next
        # (start-up 13 -> 19 s), which shifted every simulated job one way.
        t1 = time.perf_counter()
        after = measure(out / "profile-after.json", "profile-after")
        profile = mean_profile(before, after)
        profile.save(path)
        bracket = _bracket(before, after)
        profile_s += time.perf_counter() - t1
    truths = {
        "profile": TruthConfig(profile=profile),
        "no profile (job specs)": TruthConfig(),
        "profile, no start-up or restart cost": TruthConfig(
            profile=_without_startup(profile), restart_s=0.0
        ),
    }
    runs: list[FidelityRun] = []
    for policy, measured, as_run in real:
        simulated = {
            name: simulate(as_run, SimulationConfig(policy, truth=truth), cache=False)
            for name, truth in truths.items()
        }
        servers = tuple(s.name for s in as_run.cluster.servers)
        runs.append(FidelityRun(policy, measured, simulated, servers, as_run.cluster.to_dict()))
    unisolated = None
    if ablate_isolation:
        bare = dataclasses.replace(spec, device_cores=None, ps_cores=None, isolate_cpu=False)
        policy = chosen[0]
        say(f"{policy}: running again without CPU slices or host shares (ablation) ...")
        measured, _ = run_policy(
            policy, workload, jobs, bare, out / "runs" / f"{policy}-unisolated", max_slots, say
        )
        unisolated = FidelityRun(policy, measured, runs[0].simulated)
    checks = fidelity_checks(runs)
    results: dict[str, Any] = {
        "experiment": "fidelity",
        "scale": scale,
        "emulated": spec.to_dict(),
        "slot_seconds": SLOT_SECONDS,
        "policies": list(chosen),
        "jobs": jobs,
        "profile": {
            "path": str(path),
            "via": profile_via if profile_s else "given",
            "cells": len(profile.cells),
            "measured_s": round(profile_s, 1),
            "bytes": path.stat().st_size if path.exists() else None,
            "bracket": bracket,
        },
        "runs": [r.to_dict() for r in runs],
        "ablation": ablation_rows(runs, unisolated),
        "checks": [c.to_dict() for c in checks],
        "wall_s": None,
    }
    results["plots"] = [str(p) for p in write_plots(out, results["runs"])]
    results["wall_s"] = round(time.perf_counter() - started, 1)
    results = _finite(results)  # what is returned is what the file holds
    text = json.dumps(results, indent=2, default=str, allow_nan=False)
    (out / "results.json").write_text(text, encoding="utf-8")
    return results


def _finite(value: Any) -> Any:
    """JSON has no infinity: an error that could not be measured is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _bracket(before: Profile, after: Profile) -> list[dict[str, Any]]:
    """Per cell, what the measurements before and after the real runs found (iteration and
    start-up seconds), and how far apart they are (relative to their mean)."""
    rows = []
    for cell in before.cells:
        other = after.cell(*cell.key[:4], cell.placement)
        if other is None:
            continue
        row: dict[str, Any] = {"cell": f"{cell.model}:{cell.kind}:{cell.workers}"}
        for name in ("iteration_s", "startup_s"):
            a, b = getattr(cell, name), getattr(other, name)
            row[name] = [a, b]
            row[f"{name}_spread"] = abs(a - b) / ((a + b) / 2) if a and b else None
        rows.append(row)
    return rows


def _without_startup(profile: Profile) -> Profile:
    cells = tuple(dataclasses.replace(c, startup_s=0.0, restart_s=0.0) for c in profile.cells)
    return dataclasses.replace(profile, cells=cells)
