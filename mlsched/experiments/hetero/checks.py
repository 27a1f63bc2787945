"""The hetero experiment's claims, each checked on the seeds' runs with numbers in its
detail. A claim of Figs. 2 and 5 holds where it holds for PS jobs and for ring jobs at
every cluster capacity; the mixed part is shown beside, not decided."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
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
    "PREEMPTION_AS_DESCRIBED",
    "PREEMPTION_CLAIM",
    "by_seed",
    "check_claim",
    "check_completed",
    "check_f",
    "check_lowest",
    "check_maxweight",
    "check_preemption",
    "check_runtime",
    "check_weight_sweeps",
    "points",
    "reductions",
    "runtime_table",
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


#: The paper's baselines that do not preempt: "the rest" of the preemption claim.
NON_PREEMPTING = ("fifo", "drf")
PREEMPTION_CLAIM = "AntMan and Tiresias have the highest weighted completion times of the baselines"
PREEMPTION_AS_DESCRIBED = (
    "AntMan and 2D-LAS (Tiresias as the paper's §7 describes it: remaining work x "
    "resources) have the highest weighted completion times of the baselines"
)


def check_preemption(
    records: Records,
    preempting: Sequence[str] = PREEMPTING,
    name: str = PREEMPTION_CLAIM,
) -> Check:
    """Figs. 2 and 5: "AntMan and Tiresias are much worse than the rest because of frequent
    preemption": at every claim point both ``preempting`` baselines have higher mean total
    weighted completion times than FIFO and DRF, with the mean restarts per run beside."""
    ok = True
    parts: list[str] = []
    shown = [*NON_PREEMPTING, *preempting]
    for arch, capacity in points(records):
        rows = at(records, arch, capacity)
        mean = {
            n: float(np.mean(list(v.values())))
            for n in shown
            if (v := by_seed(rows, n, "weighted_completion_time"))
        }
        restarts = {
            n: float(np.mean(list(v.values())))
            for n in shown
            if (v := by_seed(rows, n, "restarts"))
        }
        mine = [n for n in preempting if n in mean]
        others = [n for n in NON_PREEMPTING if n in mean]
        held = len(mine) == len(preempting) and bool(others)
        held = held and min(mean[n] for n in mine) > max(mean[n] for n in others)
        if arch in CLAIM_ARCHS:
            ok = ok and held
        parts.append(
            f"{arch} at {capacity:g} ({'holds' if held else 'fails'}): "
            + ", ".join(
                f"{n} {v:,.0f} ({restarts.get(n, 0):.0f} restarts)" for n, v in mean.items()
            )
        )
    return Check(
        name,
        ok and bool(parts),
        "mean sum w c over seeds (mean restarts per run): " + " | ".join(parts),
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
    """Fig. 8: A_maxweight schedules more weight than Jain et al.'s greedy (each job on its
    fixed configuration), at each batch size (mean over seeds), both taking the jobs in the
    same order (the greedy's value density); A_maxweight in arrival order (the policy's)
    and the greedy free to choose configurations shown beside."""
    sizes = sorted({b["jobs"] for b in batches})
    parts = []
    ok = bool(sizes)
    for n in sizes:
        rows = [b for b in batches if b["jobs"] == n]
        mw = float(np.mean([b["maxweight"] for b in rows]))
        arrival = float(np.mean([b["maxweight_arrival"] for b in rows]))
        greedy = float(np.mean([b["greedy"] for b in rows]))
        free = float(np.mean([b.get("greedy_free", b["greedy"]) for b in rows]))
        offered = float(np.mean([b["offered_weight"] for b in rows]))
        wins = sum(b["maxweight"] > b["greedy"] for b in rows)
        ties = sum(b["maxweight"] == b["greedy"] for b in rows)
        ok = ok and mw > greedy
        parts.append(
            f"{n} jobs (weight offered {offered:,.0f}): {mw:,.0f} vs {greedy:,.0f} "
            f"({mw / greedy:.2f}x; more on {wins}, equal on {ties} of {len(rows)} seeds; "
            f"in arrival order {arrival:,.0f}; the greedy free to choose types and counts "
            f"{free:,.0f})"
            if greedy > 0
            else f"{n} jobs: {mw:,.0f} vs 0"
        )
    return Check(
        "A_maxweight schedules more weight than Jain et al.'s greedy (Fig. 8)",
        ok,
        "; ".join(parts),
    )


FIGS_11_12 = "A_maxweight's total weight grows as F shrinks, falls with H, grows with the jobs"


def _weights(rows: Sequence[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    """(value of ``key``, mean scheduled weight over seeds), ascending in the value."""
    values = sorted({float(r[key]) for r in rows})
    return [(v, float(np.mean([r["maxweight"] for r in rows if r[key] == v]))) for v in values]


def check_weight_sweeps(
    fig8: Sequence[dict[str, Any]], sweep: Sequence[dict[str, Any]], f: float, jobs: int
) -> Check:
    """Figs. 11-12 on one batch size (``jobs``): A_maxweight's mean scheduled weight falls
    as F grows (the F sweep at the default capacity) and as H grows (the clusters of the
    experiment's capacities: more servers), and grows with the batch size (Fig. 8's)."""
    at = [b for b in fig8 if b["jobs"] == jobs]
    cap = at[0]["capacity"] if at else None
    by_f = _weights([*at, *(b for b in sweep if b["capacity"] == cap)], "f") if at else []
    # H: the clusters holding more of the demand have more servers (on every seed); the
    # servers differ between seeds, so the points are the capacities, H shown beside.
    on_h = [*at, *(b for b in sweep if b["f"] == f)] if at else []
    by_h = _weights(on_h, "capacity")
    servers = {
        c: float(np.mean([b["servers"] for b in on_h if b["capacity"] == c])) for c, _ in by_h
    }
    by_jobs = _weights(fig8, "jobs")

    def falls(pairs: list[tuple[float, float]]) -> bool:
        return len(pairs) > 1 and all(b[1] < a[1] for a, b in pairwise(pairs))

    parts = {
        "F": (falls(by_f), by_f),
        "H": (falls(by_h), by_h),
        "jobs": (len(by_jobs) > 1 and falls(by_jobs[::-1]), by_jobs),
    }

    def point(key: str, v: float) -> str:
        return f"{servers[v]:.0f} servers (capacity {v:g})" if key == "H" else f"{v:g}"

    detail = "; ".join(
        f"by {k} ({'as claimed' if ok else 'not'}): "
        + ", ".join(f"{point(k, v)} {w:,.0f}" for v, w in pairs)
        for k, (ok, pairs) in parts.items()
    )
    return Check(
        FIGS_11_12,
        all(ok for ok, _ in parts.values()),
        f"mean weight scheduled over seeds, {jobs}-job batches for F and H; {detail}",
    )


def check_f(by_f: dict[str, dict[str, float | None]]) -> Check:
    """Fig. 4: a larger F gives a larger objective (sum w c) for A_online, PS and ring
    jobs alike: the mean over seeds strictly increasing in F at the default capacity."""
    ok = bool(by_f)
    parts = []
    for arch, means in by_f.items():
        pairs = sorted((float(f), v) for f, v in means.items())
        grows = len(pairs) > 1 and all(
            a[1] is not None and b[1] is not None and b[1] > a[1] for a, b in pairwise(pairs)
        )
        ok = ok and grows
        parts.append(
            f"{arch} ({'grows' if grows else 'does not grow'}): "
            + ", ".join(f"F={f:g} {'-' if v is None else f'{v:,.0f}'}" for f, v in pairs)
        )
    return Check(
        "a larger F gives a larger objective for A_online (Fig. 4)",
        ok,
        "mean sum w c over seeds at the default capacity; " + "; ".join(parts),
    )


#: Fig. 7's bound on A_online's running time, seconds.
RUNTIME_BOUND_S = 120.0


def runtime_table(records: Records) -> list[dict[str, Any]]:
    """Per job count: A_online's policy seconds per run, mean and largest over seeds."""
    counts = sorted({int(r["jobs"]) for r in records})
    out = []
    for n in counts:
        times = [float(r["policy_seconds"]) for r in records if r["jobs"] == n]
        out.append({"jobs": n, "mean_s": float(np.mean(times)), "max_s": float(np.max(times))})
    return out


def check_runtime(records: Records) -> Check:
    """Fig. 7: A_online's running time grows with the number of jobs (the mean over seeds,
    strictly, from each count to the next) and stays below 2 minutes (every run)."""
    rows = runtime_table(records)
    grows = len(rows) > 1 and all(b["mean_s"] > a["mean_s"] for a, b in pairwise(rows))
    below = bool(rows) and all(r["max_s"] < RUNTIME_BOUND_S for r in rows)
    return Check(
        "A_online's running time grows with the jobs but stays below 2 minutes (Fig. 7)",
        grows and below,
        "PS jobs on the default capacity's servers, seconds in the policy per run (this "
        "machine, beside the experiment's other runs): "
        + "; ".join(
            f"{r['jobs']} jobs mean {r['mean_s']:.2f} (max {r['max_s']:.2f})" for r in rows
        ),
    )
