"""Claim (iv) of spec 004 §5 (Figs. 5 and 6): DPS's final regret over δ and θ is U-shaped.

Final regret = BFP's final profit - the variant's, mean over seeds. U-shaped: the smallest
regret lies strictly inside the sweep, and the default (Theorem 2's δ, θ = 0.11) has less
regret than both ends. The sweeps stay out of ``summary``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mlsched.experiments.base import Check
from mlsched.experiments.dps.common import BENCHMARK
from mlsched.experiments.dps.profit import finals

__all__ = ["check_u_shape", "sweep_regrets"]


def sweep_regrets(
    records: Sequence[dict[str, Any]], names: Sequence[str]
) -> tuple[list[float | None], list[float | None]]:
    """Mean and standard deviation over seeds of each named run's final regret (scheme or
    variant), on the seeds BFP ran."""
    bench = finals(records, BENCHMARK)
    means: list[float | None] = []
    stds: list[float | None] = []
    for name in names:
        mine = finals(records, name)
        regrets = [bench[s] - mine[s] for s in sorted(set(mine) & set(bench))]
        means.append(float(np.mean(regrets)) if regrets else None)
        stds.append(float(np.std(regrets)) if regrets else None)
    return means, stds


def check_u_shape(
    label: str, values: Sequence[float], regrets: Sequence[float | None], default: float
) -> Check:
    name = f"(iv) final regret is U-shaped in {label} around the default"
    shown = ", ".join(
        f"{v:g}: {'-' if r is None else f'{r:,.1f}'}" for v, r in zip(values, regrets, strict=True)
    )
    if any(r is None for r in regrets) or len(values) < 3 or default not in values:
        return Check(name, False, f"missing runs: {shown}")
    r = [float(x) for x in regrets if x is not None]
    low = int(np.argmin(r))
    mid = r[list(values).index(default)]
    interior = 0 < low < len(r) - 1
    below = mid < r[0] and mid < r[-1]
    return Check(
        name,
        interior and below,
        f"{label} -> regret {shown}; minimum at {values[low]:g}"
        f"{'' if interior else ' (an end)'}; default {default:g} "
        f"{'below' if below else 'not below'} both ends",
    )
