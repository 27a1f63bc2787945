"""Claim (iii) of spec 004 §5 (Fig. 7): PA's jobs run shorter than DPS-RS's.

Both schemes price with DPS; they differ in placement. Jobs accepted differ between them,
so they are compared over the first n completed jobs of each seed, n the smaller of the
two counts: PA's total runtime must be lower (mean over seeds); the detail adds the mean
runtime per completed job and the seeds on which PA is lower.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mlsched.experiments.base import Check

__all__ = ["check_runtime", "runtime_curves"]

PA, RS = "dps", "rs"


def _paired(records: Sequence[dict[str, Any]]) -> list[tuple[list[int], list[int]]]:
    pa = {r["seed"]: r["runtimes"] for r in records if r["scheme"] == PA}
    rs = {r["seed"]: r["runtimes"] for r in records if r["scheme"] == RS}
    return [(pa[s], rs[s]) for s in sorted(set(pa) & set(rs))]


def runtime_curves(records: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """Mean over seeds of the total runtime (slots) of the first n completed jobs, for n
    up to the fewest any seed and scheme completed (Fig. 7's right panel)."""
    pairs = _paired(records)
    n = min((min(len(a), len(b)) for a, b in pairs), default=0)
    if n == 0:
        return {PA: [], RS: []}
    return {
        PA: np.mean([np.cumsum(a[:n]) for a, _ in pairs], axis=0).tolist(),
        RS: np.mean([np.cumsum(b[:n]) for _, b in pairs], axis=0).tolist(),
    }


def check_runtime(records: Sequence[dict[str, Any]]) -> Check:
    name = "(iii) PA's total runtime is below DPS-RS's"
    pairs = [(a, b) for a, b in _paired(records) if min(len(a), len(b)) > 0]
    if not pairs:
        return Check(name, False, "no seed where both dps and rs completed jobs")
    totals = [(sum(a[: min(len(a), len(b))]), sum(b[: min(len(a), len(b))])) for a, b in pairs]
    pa_total = float(np.mean([t[0] for t in totals]))
    rs_total = float(np.mean([t[1] for t in totals]))
    wins = sum(t[0] < t[1] for t in totals)
    pa_mean = float(np.mean([np.mean(a) for a, _ in pairs]))
    rs_mean = float(np.mean([np.mean(b) for _, b in pairs]))
    return Check(
        name,
        pa_total < rs_total,
        f"first n completed jobs: PA {pa_total:,.0f} slots vs RS {rs_total:,.0f} (lower on "
        f"{wins}/{len(totals)} seeds); per completed job {pa_mean:.1f} vs {rs_mean:.1f} slots",
    )
