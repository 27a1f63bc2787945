"""Fig. 4 (M3): DPS's regret against BFP for other total numbers of jobs N.

The same servers, types and horizon with N scaled by each of the scale's ``job_ratios``
(spec 004 A27: {0.1, 0.5, 1, 5, 10} x N "if cheap"; the default scale stops at 2 x, a BFP
search at 5 x costs about 25 s a seed). The claim has two parts, both on the mean regret
curve over the seeds: early on (at a tenth of the horizon) the regret is smaller for
fewer jobs, and later (over the second half of the horizon) larger N makes it fall
faster. Regret is absolute (BFP's cumulative profit minus DPS's), as the paper plots it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from mlsched.experiments.base import Check
from mlsched.experiments.dps.common import PRIMARY, DpsScale, Item, benchmark_items
from mlsched.experiments.dps.profit import regret_curves

__all__ = ["check_jobs", "jobs_items", "jobs_sweep"]

NAME = "(v) early on the regret is smaller for fewer jobs; later more jobs make it fall faster"


def _count(s: DpsScale, ratio: float) -> int:
    return max(1, round(s.jobs * ratio))


def jobs_items(s: DpsScale, seeds: int) -> list[Item]:
    """BFP and DPS at every N but the scale's own (its runs are the schemes part's)."""
    return [
        item
        for ratio in sorted(s.job_ratios, reverse=True)  # the longest first
        if ratio != 1.0
        for item in benchmark_items("jobs", dataclasses.replace(s, jobs=_count(s, ratio)), seeds)
    ]


def jobs_sweep(records: Sequence[dict[str, Any]], s: DpsScale) -> dict[str, Any]:
    """Per N: the mean regret at a tenth of the horizon, its fall over the second half
    (regret at T/2 minus at T), and the final regret."""
    rows: list[dict[str, Any]] = []
    for ratio in sorted(s.job_ratios):
        n = _count(s, ratio)
        runs = [
            r
            for r in records
            if (r["part"] == "jobs" and r["jobs"] == n) or (ratio == 1.0 and r["part"] == "schemes")
        ]
        curves = regret_curves(runs, PRIMARY)
        if not curves.size:
            continue
        mean = curves.mean(axis=0)
        early, half = len(mean) // 10, len(mean) // 2
        rows.append(
            {
                "ratio": ratio,
                "jobs": n,
                "seeds": len(curves),
                "early_regret": float(mean[early]),
                "late_fall": float(mean[half] - mean[-1]),
                "final_regret": float(mean[-1]),
            }
        )
    return {"early_slot": s.horizon // 10, "half_slot": s.horizon // 2, "rows": rows}


def check_jobs(sweep: dict[str, Any]) -> Check:
    rows = sweep["rows"]
    if len(rows) < 2:
        return Check(NAME, False, "fewer than two job counts with runs of DPS and BFP")
    early = all(a["early_regret"] < b["early_regret"] for a, b in pairwise(rows))
    late = all(a["late_fall"] < b["late_fall"] for a, b in pairwise(rows))
    table = "; ".join(
        f"N={r['jobs']}: regret {r['early_regret']:,.1f} at slot {sweep['early_slot']}, "
        f"falls {r['late_fall']:,.1f} from slot {sweep['half_slot']} to the end "
        f"(final {r['final_regret']:,.1f})"
        for r in rows
    )
    why = (
        "both hold"
        if early and late
        else ", ".join(
            w
            for w, ok in (
                ("early regret not increasing in N", early),
                ("late fall not increasing in N", late),
            )
            if not ok
        )
    )
    return Check(NAME, early and late, f"mean over seeds; {table} ({why})")
