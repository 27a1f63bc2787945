"""Figs. 9 and 10 of spec 002: A_online with every PS job held to one worker type (Fig. 9,
"all jobs forced onto a single worker type") or to at most a few workers (Fig. 10, the
worker count), at the default capacity, beside A_online free to choose (the schemes
part's run of the same seed: the same jobs on the same servers).

Fig. 9's claim has two halves: the objective varies strongly between the forced types,
read as the worst type's mean sum w c at least :data:`STRONGLY` times the best's (the
paper's own yardstick for a large difference, its 30 %); and A_online free to choose is
best, its mean below every forced type's. Fig. 10's: the mean falls at each larger cap,
A_online's own cap (each job's D_j) last.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from mlsched.experiments.base import Check
from mlsched.experiments.hetero.common import PRIMARY, HeteroScale, Item, is_free_run

__all__ = ["STRONGLY", "check_caps", "check_types", "held_items", "held_means"]

Records = Sequence[dict[str, Any]]

#: "Varies strongly": the worst forced type's mean over the best's, at least this.
STRONGLY = 1.3
#: The free run's label in both tables: A_online's own choice of type, and D_j as its cap.
FREE = "free"


def held_items(s: HeteroScale, seeds: int) -> list[Item]:
    """A_online on the PS part at the default capacity, each job held to each of the
    scale's forced types (part ``types``) and worker caps (part ``caps``)."""
    holds: list[tuple[str, tuple[str, Any]]] = [
        ("types", ("worker_type", t)) for t in s.forced_types
    ]
    holds += [("caps", ("worker_cap", n)) for n in s.worker_caps]
    return [
        Item(part, "ps", s.default_capacity, seed, f"{PRIMARY}-{hold[1]}", PRIMARY, (), s,
             hold=hold)
        for part, hold in holds
        for seed in range(seeds)
    ]  # fmt: skip


def held_means(records: Records, s: HeteroScale, part: str) -> dict[str, dict[str, Any]]:
    """Hold (a type, a cap, or ``free``) -> mean sum w c over seeds and the per-seed
    values, for ``part`` (``types`` or ``caps``), the free run from the schemes part."""
    free = [r for r in records if is_free_run(r, s, "ps")]
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r["part"] == part:
            groups.setdefault(str(r["hold"][1]), []).append(r)
    if part == "caps":
        groups = dict(sorted(groups.items(), key=lambda kv: int(kv[0])))
    groups[FREE] = free
    return {
        hold: {
            "mean": float(np.mean([r["weighted_completion_time"] for r in rows])) if rows else None,
            "by_seed": {
                int(r["seed"]): float(r["weighted_completion_time"])
                for r in sorted(rows, key=lambda r: r["seed"])
            },
        }
        for hold, rows in groups.items()
    }


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def check_types(means: dict[str, dict[str, Any]]) -> Check:
    """Fig. 9 (the module docstring): the forced types' means spread by STRONGLY or more,
    and A_online free to choose below every one of them."""
    forced = {t: m["mean"] for t, m in means.items() if t != FREE}
    free = means.get(FREE, {}).get("mean")
    known = [v for v in forced.values() if v is not None]
    spread = max(known) / min(known) if len(known) > 1 and min(known) > 0 else None
    strong = spread is not None and spread >= STRONGLY and len(known) == len(forced)
    best = free is not None and bool(known) and all(free < v for v in known)
    free_seeds = means.get(FREE, {}).get("by_seed", {})
    at_most = {
        t: sum(
            1
            for seed, v in m["by_seed"].items()
            if seed in free_seeds and v is not None and free_seeds[seed] <= v
        )
        for t, m in means.items()
        if t != FREE
    }
    seeds = len(free_seeds)
    return Check(
        "forced onto one worker type, the objective varies strongly between types; "
        "A_online, free to choose, is best (Fig. 9)",
        strong and best,
        "mean sum w c over seeds, PS jobs at the default capacity: "
        + ", ".join(f"{t} {_fmt(v)} (free at or below it on {at_most[t]} of {seeds})"
                    for t, v in forced.items())
        + f"; free {_fmt(free)}; worst over best type "
        + ("-" if spread is None else f"{spread:.2f}x")
        + f" ({'strong' if strong else 'not strong'}: at least {STRONGLY:g}x); "
        + ("free is best" if best else "free is not best"),
    )  # fmt: skip


def check_caps(means: dict[str, dict[str, Any]]) -> Check:
    """Fig. 10: the mean sum w c strictly lower at each larger worker cap, A_online's own
    (D_j) last."""
    pairs = [(cap, m["mean"]) for cap, m in means.items()]
    falls = len(pairs) > 2 and all(
        a[1] is not None and b[1] is not None and b[1] < a[1] for a, b in pairwise(pairs)
    )
    return Check(
        "the weighted completion time decreases as the worker count grows (Fig. 10)",
        falls,
        "mean sum w c over seeds, PS jobs at the default capacity, by each job's worker cap "
        f"({'falls' if falls else 'does not fall'} at every step): "
        + ", ".join(f"{'D_j' if c == FREE else c} {_fmt(v)}" for c, v in pairs),
    )
