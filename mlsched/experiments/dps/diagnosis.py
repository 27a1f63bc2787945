"""Why the profit checks come out as they do: facts measured on every run, kept beside the
checks (``results.json["diagnosis"]``, outside ``summary``).

Three facts decide spec 004's claims (docs/algorithms/dps.md, "Why the paper's claims do
not hold in spec 004's model"):

* **Which bound set DPS's prices.** Exploration teaches the runtimes, and runtimes reach the
  index only through its capacity bound (``p C μ^U``). If that bound is almost never the
  smaller one on the arm DPS picks, exploration changes no price: it only gives jobs away,
  and DPS cannot beat DPS-simple.
* **The ceiling of the margin over Random.** BFP is the best fixed price in hindsight; its
  profit over Random's shows how close to BFP DPS must come to earn
  :data:`~mlsched.experiments.dps.profit.WIDE_MARGIN` x Random.
* **Prices per role.** The worker and the PS bandit price one user budget separately (A3):
  the mean unit price each scheme offered, per role, beside BFP's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = ["ROLES", "diagnose", "explain", "offer_facts"]

ROLES = ("worker", "ps")


def offer_facts(decisions: Iterable[Any]) -> dict[str, Any]:
    """One run's offers (a posted-price policy's ``decisions``): how many were priced, at
    zero or with no offer; for DPS's own (``exploit``) offers, on how many each role's
    capacity bound was the smaller; the mean unit price offered per role."""
    priced: dict[str, list[float]] = {r: [] for r in ROLES}
    thresholds: dict[str, list[float]] = {r: [] for r in ROLES}
    capacity = {r: 0 for r in ROLES}
    exploited = {r: 0 for r in ROLES}  # DPS's own offers with a price for the role
    counts = {"priced": 0, "zero_price": 0, "zero_price_accepted": 0, "exploit": 0}
    for d in decisions:
        if d.phase == "explore":
            counts["zero_price"] += 1
            counts["zero_price_accepted"] += bool(d.accepted)
            continue
        if d.phase not in ("exploit", "priced"):
            continue
        counts["priced"] += 1
        counts["exploit"] += d.phase == "exploit"
        for role in ROLES:
            if role == "ps" and not d.n_ps:
                continue
            priced[role].append(float(getattr(d, f"{role}_price")))
            exploited[role] += d.phase == "exploit"
            capacity[role] += getattr(d, f"{role}_term") == "capacity"
            threshold = getattr(d, f"{role}_threshold", None)
            if d.phase == "exploit" and threshold is not None:
                thresholds[role].append(float(threshold))
    return {
        **counts,
        "capacity_bound": capacity,
        "exploit_by_role": exploited,
        "mean_price": {r: float(np.mean(v)) if v else None for r, v in priced.items()},
        # The median over DPS's own offers of the jobs per type from which the capacity
        # bound would have set the price.
        "threshold": {r: float(np.median(v)) if v else None for r, v in thresholds.items()},
    }


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def diagnose(
    records: Sequence[dict[str, Any]], primary: str = "dps", benchmark: str = "bfp"
) -> dict[str, Any]:
    """The three facts over the schemes' runs (means over seeds): ``primary`` is DPS,
    ``benchmark`` BFP."""
    by_scheme: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("offers") is not None:
            by_scheme.setdefault(r["scheme"], []).append(r)
    out: dict[str, Any] = {}
    dps = by_scheme.get(primary, [])
    if dps:
        shares = {}
        for role in ROLES:
            offers = sum(r["offers"]["exploit_by_role"][role] for r in dps)
            bound = sum(r["offers"]["capacity_bound"][role] for r in dps)
            shares[role] = bound / offers if offers else 0.0
        out["capacity_bound_share"] = shares
        out["capacity_threshold"] = {
            role: _mean([r["offers"].get("threshold", {}).get(role) for r in dps]) for role in ROLES
        }
        out["expected_per_type"] = _mean([r.get("expected_per_type") for r in dps])
        out["zero_price_jobs"] = float(np.mean([r["offers"]["zero_price_accepted"] for r in dps]))
    profits = {n: float(np.mean([r["profit"] for r in rs])) for n, rs in by_scheme.items()}
    if profits.get(benchmark) and profits.get("random-price"):
        out["bfp_over_random"] = profits[benchmark] / profits["random-price"]
    if profits.get(benchmark) and primary in profits:
        # The paper's headline: DPS's final profit over BFP's (125 %).
        out["dps_over_bfp"] = profits[primary] / profits[benchmark]
    out["mean_price"] = {
        name: {role: _mean([r["offers"]["mean_price"][role] for r in rs]) for role in ROLES}
        for name, rs in sorted(by_scheme.items())
    }
    return out


def _threshold_text(facts: dict[str, Any]) -> str:
    limit = facts.get("capacity_threshold") or {}
    n = facts.get("expected_per_type")
    shown = [f"{role} {v:,.0f}" for role in ROLES if (v := limit.get(role)) is not None]
    if not shown:
        return ""
    return (
        f" (it would be from about {' and '.join(shown)} jobs per type, the median over "
        f"DPS's offers" + (f", against {n:,.0f} expected" if n is not None else "") + ")"
    )


def explain(facts: dict[str, Any]) -> dict[str, str]:
    """Short texts the profit checks append to their detail (empty where a fact is missing)."""
    out: dict[str, str] = {}
    share = facts.get("capacity_bound_share")
    if share:
        out["simple"] = (
            f"; the capacity bound, the only way learnt runtimes reach a price, was the smaller "
            f"on {share['worker']:.1%} of DPS's worker and {share['ps']:.1%} of its PS prices"
            + _threshold_text(facts)
            + f"; exploration gave {facts['zero_price_jobs']:.0f} jobs per run away at price 0"
        )
    ratio = facts.get("bfp_over_random")
    if ratio:
        out["random"] = f"; the best fixed price in hindsight (BFP) earns {ratio:.2f}x Random"
    return out
