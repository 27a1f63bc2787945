"""Experiment ``hetero``: spec 002's evaluation (§5) on the ``hetero-paper`` workload.

Each seed is one job set; every scheme of a seed runs the same jobs on the same servers.

* **schemes** (Figs. 2 and 5, PS and ring jobs in one workload): total weighted completion
  time sum w c of ``hetero`` (A_online) and of FIFO, DRF, 2D-LAS (``las2d``) and the
  AntMan-style baseline; also sum w (c - a). Two checks: the ordering (hetero lowest on the
  mean), and the paper's size (>= 30 % lower than every baseline), each with every seed's
  reduction in its detail. ``hetero`` as the paper has it decides them;
  ``hetero-compact`` (the spec's compacted offsets) runs beside and is reported.
* **maxweight** (Fig. 8): one A_maxweight call against Jain et al.'s greedy on a batch of
  each size (:mod:`.batch`); the measure is the weight scheduled.
* **alpha** (sensitivity, outside ``summary``): hetero's sum w c at each alpha.

Eight seeds by default: at three, whether hetero beats DRF or the AntMan-style baseline on
the mean turned on one seed. Runs are spread over the machine's cores.
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
from mlsched.experiments.hetero.batch import BatchItem, run_batch
from mlsched.experiments.hetero.checks import (
    check_claim,
    check_lowest,
    check_maxweight,
    check_preemption,
    reductions,
)
from mlsched.experiments.hetero.common import (
    PRIMARY,
    RESTART,
    SCALE_SETTINGS,
    SCHEMES,
    VARIANT,
    HeteroScale,
    Item,
    run_item,
)
from mlsched.experiments.hetero.plots import plots
from mlsched.experiments.pool import Runner
from mlsched.scheduler.hetero.policy import DEFAULT_ALPHA

__all__ = ["SCALE_SETTINGS", "HeteroScale", "run_hetero"]


def _items(s: HeteroScale, seeds: int) -> list[Item]:
    items = [
        Item("schemes", seed, name, policy, tuple(options.items()), s)
        for seed in range(seeds)
        for name, (policy, options) in SCHEMES.items()
    ]
    # The default alpha's runs are the schemes part's hetero runs.
    items += [
        Item("alpha", seed, f"{PRIMARY}-alpha{a}", PRIMARY, (("alpha", a),), s)
        for seed in range(seeds)
        for a in s.alphas
        if a != DEFAULT_ALPHA
    ]
    return items


@register_experiment(
    "hetero",
    "spec 002 Figs. 2/5/8: hetero (A_online) vs FIFO/DRF/2D-LAS/AntMan on weighted "
    "completion time, A_maxweight vs Jain et al.'s greedy, sensitivity to alpha",
    default_seeds=8,
    restart=RESTART,
)
def run_hetero(
    *, scale: str, seeds: int, out_dir: Path, progress: ProgressFactory
) -> dict[str, Any]:
    s = SCALE_SETTINGS[scale]
    items = _items(s, seeds)
    batch_items = [BatchItem(seed, n, s) for n in s.batch_jobs for seed in range(seeds)]
    records: list[dict[str, Any]] = []
    failures: list[Failure] = []
    total = len(items) + len(batch_items)
    with progress(total, f"hetero ({scale})") as advance, Runner() as runner:
        # The batch comparisons first: the longest simulations then start last and share
        # the cores with nothing slower.
        batches = runner.map(run_batch, batch_items, advance)
        for outcome in runner.map(run_item, items, advance):
            if isinstance(outcome, Failure):
                failures.append(outcome)
            else:
                records.append(outcome)

    schemes = [r for r in records if r["part"] == "schemes"]
    summary = {
        name: mean_summary([r["summary"] for r in schemes if r["scheme"] == name])
        | {
            "weighted_from_arrival": _mean(
                [r["weighted_from_arrival"] for r in schemes if r["scheme"] == name]
            )
        }
        for name in SCHEMES
    }
    sweep: dict[int, list[float]] = {}
    for r in records:
        if r["part"] == "alpha" or (r["part"] == "schemes" and r["scheme"] == PRIMARY):
            alpha = int(r["options"].get("alpha", DEFAULT_ALPHA))
            sweep.setdefault(alpha, []).append(float(r["weighted_completion_time"]))
    checks: list[Check] = [
        *check_lowest(schemes),
        *check_claim(schemes),
        check_preemption(schemes),
        check_maxweight(batches),
        check_no_failures(failures),
    ]
    paths = plots(out_dir, s, records, batches, sweep)
    return {
        "summary": summary,
        "checks": [c.to_dict() for c in checks],
        "schemes": {n: {"policy": p, "options": o} for n, (p, o) in SCHEMES.items()},
        # Per hetero scheme and measure: its reduction against each baseline.
        "reductions": {
            scheme: {
                metric: reductions(schemes, metric, scheme)
                for metric in ("weighted_completion_time", "weighted_from_arrival")
            }
            for scheme in (PRIMARY, VARIANT)
        },
        "alpha_sweep": {
            str(a): {"mean": _mean(v), "runs": len(v)} for a, v in sorted(sweep.items())
        },
        "default_point": {"jobs": s.jobs, "servers": s.servers, "horizon": s.horizon},
        "settings": dataclasses.asdict(s),
        "runs": records,
        "batches": batches,
        "failures": [f.to_dict() for f in failures],
        "plots": [p.name for p in paths],
    }


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None
