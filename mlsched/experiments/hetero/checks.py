"""The hetero experiment's claims, each checked on the seeds' runs with numbers in its
detail. A claim of Figs. 2 and 5 holds where it holds for PS jobs and for ring jobs at
every cluster capacity; the mixed part is shown beside, not decided."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mlsched.experiments.base import Check, per_algorithm
from mlsched.experiments.hetero.common import (
    ADDITIONS,
    BASELINES,
    CLAIM_ARCHS,
    CLAIMED_REDUCTION,
    PREEMPTING,
    PRIMARY,
    VARIANT,
)

__all__ = [
    "by_seed",
    "check_claim",
    "check_completed",
    "check_lowest",
    "check_maxweight",
    "check_preemption",
    "points",
    "reductions",
]

Records = Sequence[dict[str, Any]]


def points(records: Records) -> list[tuple[str, float]]:
    """The (architecture part, capacity) points of the schemes part, in order."""
    return sorted({(r["arch"], float(r["capacity"])) for r in records})


def at(records: Records, arch: str, capacity: float) -> list[dict[str, Any]]:
    return [r for r in records if r["arch"] == arch and float(r["capacity"]) == capacity]


def by_seed(records: Records, scheme: str, metric: str) -> dict[int, float]:
    return {r["seed"]: float(r[metric]) for r in records if r["scheme"] == scheme}


def reductions(records: Records, metric: str, scheme: str = PRIMARY) -> dict[str, dict[str, Any]]:
    """Per baseline: ``scheme``'s relative reduction of ``metric`` (1 - scheme /
    baseline), mean and spread over the seeds both ran, and the seeds where it is lower
    (``records``: one point's runs)."""
    mine = by_seed(records, scheme, metric)
    out: dict[str, dict[str, Any]] = {}
    for name in BASELINES:
        theirs = by_seed(records, name, metric)
        seeds = sorted(set(mine) & set(theirs))
        if not seeds:
            continue
        cut = np.array([1.0 - mine[k] / theirs[k] if theirs[k] > 0 else 0.0 for k in seeds])
        out[name] = {
            "mean": float(cut.mean()),
            "min": float(cut.min()),
            "max": float(cut.max()),
            "wins": int(sum(mine[k] < theirs[k] for k in seeds)),
            "seeds": len(seeds),
        }
    return out


def _describe(cuts: dict[str, dict[str, Any]]) -> str:
    return ", ".join(
        f"{name} {c['mean']:+.0%} ({c['min']:+.0%}..{c['max']:+.0%}, lower on "
        f"{c['wins']}/{c['seeds']})"
        for name, c in cuts.items()
    )


def _per_point(
    records: Records, scheme: str, holds: Any, metrics: Sequence[str]
) -> tuple[bool, str]:
    """Whether ``holds(cuts per metric)`` at every claim point (PS and ring, each
    capacity); the detail lists every point, the mix included."""
    ok = True
    parts: list[str] = []
    decided = 0
    for arch, capacity in points(records):
        rows = at(records, arch, capacity)
        cuts = {m: reductions(rows, m, scheme) for m in metrics}
        held = all(bool(c) for c in cuts.values()) and holds(cuts)
        if arch in CLAIM_ARCHS:
            ok = ok and held
            decided += 1
        shown = "; ".join(_describe(c) for c in cuts.values())
        note = "" if arch in CLAIM_ARCHS else ", shown only"
        parts.append(f"{arch} at {capacity:g} ({'holds' if held else 'fails'}{note}): {shown}")
    return ok and decided > 0, f"{scheme}'s reduction vs " + " | ".join(parts)


def check_lowest(records: Records) -> list[Check]:
    """Figs. 2 and 5, the ordering: A_online's mean total weighted completion time is
    lower than every baseline's, for PS and ring jobs at every capacity."""
    results = {
        scheme: _per_point(
            records,
            scheme,
            lambda cuts: all(c["mean"] > 0 for c in cuts["weighted_completion_time"].values()),
            ("weighted_completion_time",),
        )
        for scheme in (PRIMARY, VARIANT)
    }
    return per_algorithm(
        "hetero has the lowest total weighted completion time (mean over seeds)",
        " || ".join(detail for _, detail in results.values()),
        [scheme for scheme, (ok, _) in results.items() if ok],
        PRIMARY,
        ADDITIONS,
    )


def check_claim(records: Records) -> list[Check]:
    """Figs. 2 and 5, the size: at least 30 % lower than every baseline on both measures
    (sum w c and sum w (c - a)), for PS and ring jobs at every capacity."""
    metrics = ("weighted_completion_time", "weighted_from_arrival")
    results = {
        scheme: _per_point(
            records,
            scheme,
            lambda cuts: all(
                c["mean"] >= CLAIMED_REDUCTION for m in metrics for c in cuts[m].values()
            ),
            metrics,
        )
        for scheme in (PRIMARY, VARIANT)
    }
    return per_algorithm(
        f"hetero is >= {CLAIMED_REDUCTION:.0%} lower than every baseline (the paper's claim)",
        "sum w c, then sum w (c - a): " + " || ".join(detail for _, detail in results.values()),
        [scheme for scheme, (ok, _) in results.items() if ok],
        PRIMARY,
        ADDITIONS,
    )


def check_preemption(records: Records) -> Check:
    """Figs. 2 and 5: "AntMan and Tiresias are much worse than the rest because of frequent
    preemption": at every claim point the two preempting baselines (2D-LAS, the AntMan-
    style one) have higher mean total weighted completion times than FIFO and DRF."""
    ok = True
    parts: list[str] = []
    for arch, capacity in points(records):
        rows = at(records, arch, capacity)
        mean = {
            name: float(np.mean(list(v.values())))
            for name in BASELINES
            if (v := by_seed(rows, name, "weighted_completion_time"))
        }
        preempting = [n for n in PREEMPTING if n in mean]
        others = [n for n in BASELINES if n not in PREEMPTING and n in mean]
        held = bool(preempting and others) and min(mean[n] for n in preempting) > max(
            mean[n] for n in others
        )
        if arch in CLAIM_ARCHS:
            ok = ok and held
        parts.append(
            f"{arch} at {capacity:g} ({'holds' if held else 'fails'}): "
            + ", ".join(f"{n} {v:,.0f}" for n, v in mean.items())
        )
    return Check(
        "AntMan and 2D-LAS have the highest weighted completion times of the baselines",
        ok and bool(parts),
        "mean sum w c over seeds: " + " | ".join(parts),
    )


def check_completed(records: Records, bound_slots: int) -> Check:
    """Every run ended with every job done, within the bound (far past the horizon): a
    weighted completion time counts actual completions, not a charge for the unfinished."""
    open_runs = [r for r in records if r["unfinished"]]
    left = sum(int(r["unfinished"]) for r in records)
    longest = max((int(r["slots"]) for r in records), default=0)
    detail = f"{len(records)} runs, bound {bound_slots} slots, longest run {longest} slots"
    if open_runs:
        worst = max(open_runs, key=lambda r: r["unfinished"])
        detail += (
            f"; {left} jobs unfinished in {len(open_runs)} runs (e.g. {worst['scheme']}, "
            f"{worst['arch']} at {worst['capacity']:g}, seed {worst['seed']}: "
            f"{worst['unfinished']})"
        )
    return Check("every job completed within the run's bound", not open_runs, detail)


def check_maxweight(batches: Sequence[dict[str, Any]]) -> Check:
    """Fig. 8: A_maxweight schedules more weight than Jain et al.'s greedy, at each batch
    size (mean over seeds), both taking the jobs in the same order (the greedy's value
    density); A_maxweight in arrival order (the policy's) shown beside."""
    sizes = sorted({b["jobs"] for b in batches})
    parts = []
    ok = bool(sizes)
    for n in sizes:
        rows = [b for b in batches if b["jobs"] == n]
        mw = float(np.mean([b["maxweight"] for b in rows]))
        arrival = float(np.mean([b["maxweight_arrival"] for b in rows]))
        greedy = float(np.mean([b["greedy"] for b in rows]))
        wins = sum(b["maxweight"] > b["greedy"] for b in rows)
        ties = sum(b["maxweight"] == b["greedy"] for b in rows)
        ok = ok and mw > greedy
        parts.append(
            f"{n} jobs: {mw:,.0f} vs {greedy:,.0f} ({mw / greedy:.2f}x; more on {wins}, "
            f"equal on {ties} of {len(rows)} seeds; in arrival order {arrival:,.0f})"
            if greedy > 0
            else f"{n} jobs: {mw:,.0f} vs 0"
        )
    return Check(
        "A_maxweight schedules more weight than Jain et al.'s greedy (Fig. 8)",
        ok,
        "; ".join(parts),
    )
