"""Claims (i) and (ii) of spec 004 §5: profit at the horizon and DPS's regret over time.

(i) DPS earns more than DPS-simple, about twice Random (required: at least
:data:`WIDE_MARGIN` x) and at least the TOP stand-in: means over seeds of the final profit,
with the seeds on which each ordering holds in the detail.

(ii) Regret(t) = BFP's cumulative profit - DPS's (Fig. 2, signed, A20), the mean over
seeds: it must rise during exploration (positive when exploration ends: the hump), come
back to zero or below afterwards (the crossing) and end at most :data:`NEAR_ZERO` of BFP's
final profit above zero ("≤ ~0").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mlsched.experiments.base import Check
from mlsched.experiments.dps.common import BENCHMARK, PRIMARY

__all__ = ["NEAR_ZERO", "WIDE_MARGIN", "check_profit_order", "check_regret", "regret_curves"]

#: "DPS > Random by a wide margin (≈ 2x)": the paper's 238 %, required at least this.
WIDE_MARGIN = 1.5
#: "ends ≤ ~0": the final regret may exceed zero by this share of BFP's final profit.
NEAR_ZERO = 0.05


def finals(records: Sequence[dict[str, Any]], scheme: str) -> dict[int, float]:
    """Seed -> final profit of ``scheme``."""
    return {r["seed"]: float(r["profit"]) for r in records if r["scheme"] == scheme}


def _order(
    records: Sequence[dict[str, Any]], other: str, factor: float, strict: bool, primary: str
) -> tuple[bool, str]:
    ours, theirs = finals(records, primary), finals(records, other)
    seeds = sorted(set(ours) & set(theirs))
    if not seeds:
        return False, f"no runs of {primary} and {other} on the same seeds"
    mine = float(np.mean([ours[s] for s in seeds]))
    base = float(np.mean([theirs[s] for s in seeds]))

    def beats(a: float, b: float) -> bool:
        return a > factor * b if strict else a >= factor * b

    wins = sum(beats(ours[s], theirs[s]) for s in seeds)
    ratio = mine / base if base > 0 else float("inf")
    return beats(mine, base), (
        f"{primary} {mine:,.1f} vs {other} {base:,.1f} (ratio {ratio:.2f}); holds on "
        f"{wins}/{len(seeds)} seeds"
    )


def check_profit_order(
    records: Sequence[dict[str, Any]], why: dict[str, str] | None = None, primary: str = PRIMARY
) -> list[Check]:
    """The three orderings of (i) for ``primary``; ``why`` adds the diagnosis' texts
    (``simple``, ``random``) to the details of the first two."""
    why = why or {}
    simple, d1 = _order(records, "dps-simple", 1.0, True, primary)
    rand, d2 = _order(records, "random-price", WIDE_MARGIN, False, primary)
    top, d3 = _order(records, "top", 1.0, False, primary)
    return [
        Check("(i) DPS earns more than DPS-simple", simple, d1 + why.get("simple", "")),
        Check(f"(i) DPS earns at least {WIDE_MARGIN:g}x Random", rand, d2 + why.get("random", "")),
        Check("(i) DPS earns at least the TOP stand-in", top, d3),
    ]


def regret_curves(records: Sequence[dict[str, Any]], scheme: str = PRIMARY) -> np.ndarray:
    """Seeds x slots: BFP's cumulative profit minus ``scheme``'s, on the seeds both ran."""
    bench = {r["seed"]: r["curve"] for r in records if r["scheme"] == BENCHMARK}
    ours = {r["seed"]: r["curve"] for r in records if r["scheme"] == scheme}
    seeds = sorted(set(bench) & set(ours))
    if not seeds:
        return np.zeros((0, 0))
    return np.stack([np.asarray(bench[s]) - np.asarray(ours[s]) for s in seeds])


def regret_facts(records: Sequence[dict[str, Any]], scheme: str = PRIMARY) -> dict[str, Any]:
    """The mean regret curve's landmarks: where exploration ended, the regret there, the
    peak, the first slot after the peak at or below zero, the final regret and BFP's, and
    ``scheme``'s final profit over BFP's (the paper's headline: 125 %)."""
    curves = regret_curves(records, scheme)
    if not curves.size:
        return {}
    mean = curves.mean(axis=0)
    ends = [
        r["explore_end"] for r in records if r["scheme"] == scheme and r["explore_end"] is not None
    ]
    explore_end = round(float(np.mean(ends))) if ends else 0
    peak = int(np.argmax(mean))
    after = np.flatnonzero(mean[peak:] <= 0)
    bfp = float(np.mean(list(finals(records, BENCHMARK).values())))
    return {
        "explore_end_slot": explore_end,
        "regret_at_explore_end": float(mean[min(explore_end, len(mean) - 1)]),
        "peak_slot": peak,
        "peak_regret": float(mean[peak]),
        "zero_crossing_slot": int(peak + after[0]) if len(after) else None,
        "final_regret": float(mean[-1]),
        "final_regret_by_seed": [float(c[-1]) for c in curves],
        "bfp_final_profit": bfp,
        "over_bfp": 1.0 - float(mean[-1]) / bfp if bfp > 0 else None,
    }


def check_regret(facts: dict[str, Any]) -> Check:
    name = "(ii) DPS's regret vs BFP: exploration hump, a zero crossing, ends <= ~0"
    if not facts:
        return Check(name, False, "no runs of both dps and bfp")
    hump = facts["regret_at_explore_end"] > 0
    crossing = facts["zero_crossing_slot"] is not None
    near = facts["final_regret"] <= NEAR_ZERO * facts["bfp_final_profit"]
    by_seed = facts["final_regret_by_seed"]
    return Check(
        name,
        hump and crossing and near,
        f"regret {facts['regret_at_explore_end']:,.1f} when exploration ends (slot "
        f"{facts['explore_end_slot']}; hump {'yes' if hump else 'no'}); peak "
        f"{facts['peak_regret']:,.1f} at slot {facts['peak_slot']}; zero crossing "
        f"{'at slot ' + str(facts['zero_crossing_slot']) if crossing else 'none'}; final "
        f"{facts['final_regret']:,.1f} = {facts['final_regret'] / facts['bfp_final_profit']:.1%} "
        f"of BFP's {facts['bfp_final_profit']:,.1f} (allowed {NEAR_ZERO:.0%}); final regret > 0 "
        f"on {sum(v > 0 for v in by_seed)}/{len(by_seed)} seeds; final profit "
        + ("-" if facts.get("over_bfp") is None else f"{facts['over_bfp']:.0%}")
        + " of BFP's (the paper: 125 %)",
    )
