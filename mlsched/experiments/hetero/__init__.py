"""Experiment ``hetero``: spec 002's evaluation (§5) on the ``hetero-paper`` workload.

Each seed is one job set per architecture part; every scheme of a seed runs the same jobs
on the same servers. Every restart costs 0.1 slot (AMB-15), to every scheme alike; the
claims are checked again charging a cluster's restart cost (``common.COSTS``).

* **schemes** (Figs. 2 and 5): total weighted completion time sum w c of ``hetero``
  (A_online as the paper has it) and of FIFO, DRF, Tiresias, 2D-LAS (``las2d``) and the AntMan-style
  baseline, the baselines at their ideal worker counts (AMB-13); also sum w (c - a).
  PS-only (Fig. 2) and ring-only (Fig. 5) parts, each on clusters holding 0.2, 0.35 and
  0.5 of the jobs' ideal demand (§5); both mixed half and half as an extra row at the
  default capacity. lambda's T is the paper's horizon; a run lasts until every job is
  done (bounded far beyond, with a check that nothing was left). Checks: the ordering
  (hetero lowest on the mean at every point), the paper's size (>= 30 % lower than every
  baseline), the preempting baselines trailing, each with every point's figures.
  ``hetero-compact`` (the spec's compacted offsets, ours) runs beside, its checks rows of
  their own.
* **alpha**: hetero at alpha = 1 beside the default 4, at the default capacity.
* **runtime** (Fig. 7): A_online's own time (every call into the policy) on PS jobs at
  each of ``runtime_jobs`` on the servers of the default capacity's cluster.
* **f** (Fig. 4): hetero at other F (lambda = 2 T H R F + 1) beside the default 10, at the
  default capacity.
* **servers** (Figs. 3 and 6, :mod:`.servers`): hetero on the default capacity's GPUs in
  servers of one size, .16xlarge (fewest) or .8xlarge (most), beside both sizes.
* **types** and **caps** (Figs. 9 and 10, :mod:`.held`): hetero with every PS job held to
  one worker type, or to at most a few workers, at the default capacity, beside hetero
  free to choose.
* **maxweight** (Fig. 8): one A_maxweight call against Jain et al.'s greedy on a batch of
  each size, both taking the jobs in the same order (:mod:`.batch`).

Eight seeds by default. Runs are spread over the machine's cores.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from mlsched.engine.builder import Failure
from mlsched.experiments.base import (
    Check,
    ProgressFactory,
    check_no_failures,
    mean_summary,
    register_experiment,
)
from mlsched.experiments.costs import cluster_check
from mlsched.experiments.hetero.batch import BatchItem, run_batch
from mlsched.experiments.hetero.batch import F as BATCH_F
from mlsched.experiments.hetero.checks import (
    PREEMPTION_AS_DESCRIBED,
    at,
    check_claim,
    check_completed,
    check_f,
    check_lowest,
    check_maxweight,
    check_preemption,
    check_runtime,
    check_weight_sweeps,
    points,
    reductions,
    runtime_table,
)
from mlsched.experiments.hetero.common import (
    ARCHS,
    CLAIM_ARCHS,
    COSTS,
    HETEROS,
    PREEMPTING_AS_DESCRIBED,
    PRIMARY,
    SCALE_SETTINGS,
    SCHEMES,
    HeteroScale,
    Item,
    is_free_run,
    run_item,
)
from mlsched.experiments.hetero.held import check_caps, check_types, held_items, held_means
from mlsched.experiments.hetero.plots import plots
from mlsched.experiments.hetero.servers import check_servers, server_items, server_means
from mlsched.experiments.pool import Runner
from mlsched.scheduler.hetero.policy import DEFAULT_ALPHA, DEFAULT_F

__all__ = ["SCALE_SETTINGS", "HeteroScale", "run_hetero"]


def _items(s: HeteroScale, seeds: int) -> list[Item]:
    cells = [(arch, c) for arch in CLAIM_ARCHS for c in s.capacities]
    cells += [(arch, s.default_capacity) for arch in ARCHS if arch not in CLAIM_ARCHS]
    # A_online's PS runs first (the slowest): they then share the cores with faster ones.
    items = [
        Item("schemes", arch, c, seed, name, policy, tuple(options.items()), s)
        for name, (policy, options) in SCHEMES.items()
        for arch, c in cells
        for seed in range(seeds)
    ]
    items += _variants(s, seeds, "alpha", s.alphas, DEFAULT_ALPHA)
    # Fig. 7: A_online's own time at each job count on the default capacity's servers.
    items += [
        Item("runtime", "ps", s.default_capacity, seed, f"{PRIMARY}-jobs{n}", PRIMARY,
             (), s, jobs=n)
        for n in s.runtime_jobs
        for seed in range(seeds)
    ]  # fmt: skip
    # Fig. 4: A_online at other F (lambda = 2 T H R F + 1), at the default capacity.
    items += _variants(s, seeds, "f", s.fs, DEFAULT_F)
    # Figs. 9-10: each job held to one worker type, or to a few workers.
    items += held_items(s, seeds)
    # Figs. 3 and 6: the same capacity on servers of one size (H fewer or more).
    items += server_items(s, seeds)
    return items


@register_experiment(
    "hetero",
    "spec 002 Figs. 2/5/8: hetero (A_online) vs FIFO/DRF/2D-LAS/AntMan on weighted "
    "completion time, PS and ring jobs at 0.2-0.5 of the ideal demand, A_maxweight vs Jain "
    "et al.'s greedy, alpha 1 vs 4",
    default_seeds=8,
    costs=COSTS,
)
def run_hetero(
    *, scale: str, seeds: int, out_dir: Path, progress: ProgressFactory
) -> dict[str, Any]:
    s = SCALE_SETTINGS[scale]
    items = _items(s, seeds)
    batch_items = [BatchItem(seed, n, s) for n in s.batch_jobs for seed in range(seeds)]
    # Figs. 11-12: the smallest batch at other F, and on the other capacities' clusters.
    small = min(s.batch_jobs)
    batch_items += [
        BatchItem(seed, small, s, "sweep", f=f) for f in s.batch_fs for seed in range(seeds)
    ]
    batch_items += [
        BatchItem(seed, small, s, "sweep", capacity=c)
        for c in s.capacities
        if c != s.default_capacity
        for seed in range(seeds)
    ]
    records: list[dict[str, Any]] = []
    failures: list[Failure] = []
    n_cluster = sum(i.part == "schemes" and i.arch in CLAIM_ARCHS for i in items)
    total = len(items) + n_cluster + len(batch_items)
    with progress(total, f"hetero ({scale})") as advance, Runner() as r:
        for outcome in r.map(run_item, items, advance):
            if isinstance(outcome, Failure):
                failures.append(outcome)
            else:
                records.append(outcome)
        # The claims again charging a cluster's restart cost: a run that restarted nothing
        # is the same run under any restart cost, so only the others run again.
        again, same = _cluster_items(items, records)
        records += same
        for outcome in r.map(run_item, again, advance):
            if isinstance(outcome, Failure):
                failures.append(outcome)
            else:
                records.append(outcome)
        every_batch = r.map(run_batch, batch_items, advance)
    batches = [b for b in every_batch if b["part"] == "fig8"]
    weight_sweep = [b for b in every_batch if b["part"] == "sweep"]

    schemes = [r for r in records if r["part"] == "schemes"]
    default = {arch: at(schemes, arch, s.default_capacity) for arch in ARCHS}
    # The summary: PS jobs at the default capacity (Fig. 2); every point in ``parts``.
    summary = {
        name: _summary([r for r in default["ps"] if r["scheme"] == name]) for name in SCHEMES
    }
    parts = {
        f"{arch}@{capacity:g}": {
            "arch": arch,
            "capacity": capacity,
            "servers": sorted({r["servers"] for r in at(schemes, arch, capacity)}),
            "schemes": {
                name: _summary([r for r in at(schemes, arch, capacity) if r["scheme"] == name])
                for name in SCHEMES
            },
            "reductions": {
                scheme: {
                    metric: reductions(at(schemes, arch, capacity), metric, scheme)
                    for metric in ("weighted_completion_time", "weighted_from_arrival")
                }
                for scheme in HETEROS
            },
        }
        for arch, capacity in points(schemes)
    }
    alpha = _variant_means(records, s, "alpha", s.alphas, DEFAULT_ALPHA)
    by_f = _variant_means(records, s, "f", s.fs, DEFAULT_F)
    charged = [r for r in records if r["part"] == "cluster"]
    by_type = held_means(records, s, "types")
    by_cap = held_means(records, s, "caps")
    by_h = server_means(records, s)
    checks: list[Check] = [
        *check_lowest(schemes),
        *check_claim(schemes),
        check_preemption(schemes),
        check_preemption(schemes, PREEMPTING_AS_DESCRIBED, PREEMPTION_AS_DESCRIBED),
        # The paper's A_online with a cluster's restart cost (the paper's: 0.1 slot).
        *(
            dataclasses.replace(c, name=cluster_check(c.name))
            for c in (*check_lowest(charged), *check_claim(charged), check_preemption(charged))
            if " [" not in c.name
        ),
        check_maxweight(batches),
        check_weight_sweeps(batches, weight_sweep, BATCH_F, min(s.batch_jobs)),
        check_f(by_f),
        check_servers(by_h),
        check_types(by_type),
        check_caps(by_cap),
        check_runtime([r for r in records if r["part"] == "runtime"]),
        check_completed(records, s.run_factor * s.horizon),
        check_no_failures(failures),
    ]
    paths = plots(out_dir, s, schemes, batches)
    return {
        "summary": summary,
        "checks": [c.to_dict() for c in checks],
        "schemes": {n: {"policy": p, "options": o} for n, (p, o) in SCHEMES.items()},
        "parts": parts,
        "alpha": alpha,
        "f": by_f,
        "types": by_type,
        "caps": by_cap,
        "servers": by_h,
        "runtime": runtime_table([r for r in records if r["part"] == "runtime"]),
        "default_point": {
            "jobs": s.jobs,
            "horizon": s.horizon,
            "arch": "ps",
            "capacity": s.default_capacity,
        },
        "settings": dataclasses.asdict(s),
        "runs": records,
        "batches": batches,
        "weight_sweep": weight_sweep,
        "failures": [f.to_dict() for f in failures],
        "plots": [p.name for p in paths],
    }


def _variants(
    s: HeteroScale, seeds: int, part: str, values: tuple[float, ...], default: float
) -> list[Item]:
    """A_online with the option ``part`` (``alpha``, ``f``) at each of ``values`` but the
    default, PS and ring jobs, at the default capacity."""
    return [
        Item(part, arch, s.default_capacity, seed, f"{PRIMARY}-{part}{v:g}", PRIMARY,
             ((part, v),), s)
        for arch in CLAIM_ARCHS
        for v in values
        if v != default
        for seed in range(seeds)
    ]  # fmt: skip


def _variant_means(
    records: list[dict[str, Any]],
    s: HeteroScale,
    part: str,
    values: tuple[float, ...],
    default: float,
) -> dict[str, dict[str, float | None]]:
    """Arch -> value -> A_online's mean sum w c over seeds at the default capacity, with
    the option ``part`` at that value (the default: the schemes part's run)."""
    return {
        arch: {
            f"{v:g}": _mean(
                [
                    r["weighted_completion_time"]
                    for r in records
                    if (
                        r["arch"] == arch
                        and r["capacity"] == s.default_capacity
                        and r["scheme"] == f"{PRIMARY}-{part}{v:g}"
                    )
                    or (v == default and is_free_run(r, s, arch))
                ]
            )
            for v in sorted({*values, default})
        }
        for arch in CLAIM_ARCHS
    }


def _cluster_items(
    items: list[Item], records: list[dict[str, Any]]
) -> tuple[list[Item], list[dict[str, Any]]]:
    """The claim points' runs under a cluster's restart cost: (items to run, records
    copied from runs that restarted no job, identical under any restart cost)."""
    done = {
        (r["arch"], r["capacity"], r["seed"], r["scheme"]): r
        for r in records
        if r["part"] == "schemes"
    }
    again: list[Item] = []
    same: list[dict[str, Any]] = []
    for item in items:
        if item.part != "schemes" or item.arch not in CLAIM_ARCHS:
            continue
        paper = done.get((item.arch, item.capacity, item.seed, item.name))
        if paper is not None and paper["restarts"] == 0:
            same.append({**paper, "part": "cluster", "cost": "cluster"})
        else:
            again.append(dataclasses.replace(item, part="cluster", cost="cluster"))
    return again, same


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return mean_summary([r["summary"] for r in rows]) | {
        "weighted_from_arrival": _mean([r["weighted_from_arrival"] for r in rows]),
        "unfinished": int(sum(r["unfinished"] for r in rows)),
    }


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None
