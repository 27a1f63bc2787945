"""A measured cause for the profit claims (Figs. 2-3): DPS and BFP again on a market that
changes mid-run, the valuations of the second half's jobs times each of the scale's
``value_shifts``.

The paper's DPS ends 25 % above BFP, the best fixed prices in hindsight. On stationary
arrivals (spec 004's model) a fixed price is what a learner converges to at best, so DPS
cannot beat it; where the market shifts, no fixed price fits both halves and an adaptive
one could. If DPS trails BFP by as much or more there, stationarity is not why it trails.
A table for the cause, not a check: the paper makes no claim on shifted markets.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from mlsched.experiments.dps.common import (
    BENCHMARK,
    PRIMARY,
    DpsScale,
    Item,
    benchmark_items,
)

__all__ = ["shift_items", "shift_table"]


def shift_items(s: DpsScale, seeds: int) -> list[Item]:
    """BFP and DPS at each shift."""
    return [
        item
        for v in s.value_shifts
        for item in benchmark_items("shift", dataclasses.replace(s, value_shift=v), seeds)
    ]


def shift_table(records: Sequence[dict[str, Any]], s: DpsScale) -> list[dict[str, Any]]:
    """Per shift (1: the schemes part's runs): DPS's and BFP's mean profit, DPS's over
    BFP's, and on how many seeds DPS earned at least BFP's."""
    rows = []
    for v in sorted({1.0, *s.value_shifts}):
        part = "schemes" if v == 1.0 else "shift"
        runs = [r for r in records if r["part"] == part and r.get("value_shift", 1.0) == v]
        by = {
            n: {r["seed"]: float(r["profit"]) for r in runs if r["scheme"] == n}
            for n in (PRIMARY, BENCHMARK)
        }
        seeds = sorted(set(by[PRIMARY]) & set(by[BENCHMARK]))
        if not seeds:
            continue
        dps = float(np.mean([by[PRIMARY][k] for k in seeds]))
        bfp = float(np.mean([by[BENCHMARK][k] for k in seeds]))
        rows.append(
            {
                "value_shift": v,
                "seeds": len(seeds),
                "dps_profit": dps,
                "bfp_profit": bfp,
                "dps_over_bfp": dps / bfp if bfp > 0 else None,
                "dps_at_least_bfp": sum(by[PRIMARY][k] >= by[BENCHMARK][k] for k in seeds),
            }
        )
    return rows
