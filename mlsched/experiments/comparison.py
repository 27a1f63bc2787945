"""Several policies on the same jobs (``mlsched simulate --policy a,b,c``): what is written.

``comparison.json`` holds the workload, the seed and every run's summary in the order run;
``jct_cdf.png`` the completion-time CDF of each policy's completed jobs and
``utilization.png`` each policy's mean utilisation over the run's resources, slot by slot.
Each run's own ``summary.json`` and ``jobs.csv`` go to a folder named after its policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mlsched.engine.engine import RunResult
from mlsched.engine.summary import Summary, jct_s
from mlsched.experiments.plots import plot_cdf, plot_lines
from mlsched.experiments.report import write_json

__all__ = ["write_comparison"]


def write_comparison(
    out_dir: str | Path,
    runs: Sequence[tuple[Summary, RunResult]],
    *,
    workload: Any,
    seed: int,
    policy_options: Mapping[str, Mapping[str, Any]],
) -> list[Path]:
    """``comparison.json`` and the two plots for ``runs`` (summary, result) of one workload."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = {
        "workload": workload.name,
        "seed": seed,
        "jobs": len(workload.jobs),
        "slot_seconds": workload.slot_seconds,
        "horizon_slots": workload.horizon_slots,
        "time_unit": "s",
        "policies": [s.policy for s, _ in runs],
        "policy_options": {k: dict(v) for k, v in policy_options.items()},
        "summaries": {s.policy: s.to_dict() for s, _ in runs},
    }
    paths = [write_json(data, out / "comparison.json")]
    hours = {
        s.policy: [
            t / 3600.0
            for t in (jct_s(r, res.slot_seconds) for r in res.records.values())
            if t is not None
        ]
        for s, res in runs
    }
    paths.append(
        plot_cdf(
            out / "jct_cdf.png",
            hours,
            xlabel="job completion time (hours)",
            title=f"{workload.name}: completion times, seed {seed}",
        )
    )
    longest = max((res.slots for _, res in runs), default=0)
    x = list(range(longest))
    series: dict[str, tuple[list[float], list[float]]] = {}
    for s, res in runs:
        mean = np.full(longest, np.nan)
        if res.utilization.size:
            mean[: len(res.utilization)] = np.nanmean(np.asarray(res.utilization), axis=1)
        series[s.policy] = (mean.tolist(), [0.0] * longest)
    paths.append(
        plot_lines(
            out / "utilization.png",
            x,
            series,
            xlabel="slot",
            ylabel="mean utilisation over resources",
            title=f"{workload.name}: utilisation per slot, seed {seed}",
        )
    )
    return paths
