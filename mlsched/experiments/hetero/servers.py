"""Figs. 3 and 6 of spec 002: A_online's objective as the number of servers H grows at
about constant total capacity (PS jobs, Fig. 3; ring jobs, Fig. 6).

The default capacity's GPUs (0.35 of the jobs' ideal demand) on servers of one size:
.16xlarge alone (fewest servers), both sizes (the schemes part's cluster), .8xlarge alone
(most; twice the servers of .16xlarge for the same GPUs and vCPUs). ``hetero-paper``'s
``sizes`` option; on .8xlarge servers alone (10 Gbit/s) the PS types above 10 Gbit/s do
not exist, which the table says beside the figures. The claim: the mean sum w c over seeds
strictly grows from each H to the next, for PS and ring jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from mlsched.experiments.base import Check
from mlsched.experiments.hetero.common import CLAIM_ARCHS, PRIMARY, HeteroScale, Item, is_free_run

__all__ = ["SIZES_BY_H", "check_servers", "server_items", "server_means"]

Records = Sequence[dict[str, Any]]

#: Server sizes from the fewest servers to the most at the same capacity.
SIZES_BY_H = ("16x", "mixed", "8x")


def server_items(s: HeteroScale, seeds: int) -> list[Item]:
    """A_online on the default capacity's GPUs in servers of each size but ``mixed`` (the
    schemes part's run), PS and ring jobs."""
    return [
        Item("servers", arch, s.default_capacity, seed, f"{PRIMARY}-{sizes}", PRIMARY, (), s,
             sizes=sizes)
        for arch in CLAIM_ARCHS
        for sizes in SIZES_BY_H
        if sizes != "mixed"
        for seed in range(seeds)
    ]  # fmt: skip


def server_means(records: Records, s: HeteroScale) -> dict[str, list[dict[str, Any]]]:
    """Arch -> per size, in :data:`SIZES_BY_H` order: the servers (H, mean over seeds) and
    A_online's mean sum w c at the default capacity."""
    out: dict[str, list[dict[str, Any]]] = {}
    for arch in CLAIM_ARCHS:
        rows = []
        for sizes in SIZES_BY_H:
            runs = [
                r
                for r in records
                if (
                    r["part"] == "servers"
                    and r["arch"] == arch
                    and r["capacity"] == s.default_capacity
                    and r["scheme"] == f"{PRIMARY}-{sizes}"
                )
                or (sizes == "mixed" and is_free_run(r, s, arch))
            ]
            rows.append(
                {
                    "sizes": sizes,
                    "servers": float(np.mean([r["servers"] for r in runs])) if runs else None,
                    "mean": float(np.mean([r["weighted_completion_time"] for r in runs]))
                    if runs
                    else None,
                    "seeds": len(runs),
                }
            )
        out[arch] = rows
    return out


def _num(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def check_servers(means: dict[str, list[dict[str, Any]]]) -> Check:
    """Figs. 3 and 6: the mean strictly grows with H, PS and ring jobs alike."""
    ok = bool(means)
    parts = []
    for arch, rows in means.items():
        grows = len(rows) > 2 and all(
            a["mean"] is not None and b["mean"] is not None and b["mean"] > a["mean"]
            for a, b in pairwise(rows)
        )
        ok = ok and grows
        parts.append(
            f"{arch} ({'grows' if grows else 'does not grow'}): "
            + ", ".join(f"{r['sizes']} H={_num(r['servers'], '.1f')} {_num(r['mean'], ',.0f')}"
                        for r in rows)
        )  # fmt: skip
    return Check(
        "the objective grows with H at roughly constant total capacity (Figs. 3, 6)",
        ok,
        "mean sum w c over seeds on the default capacity's GPUs, by server size (H the mean "
        "servers; .8xlarge alone holds no PS type above 10 Gbit/s); " + "; ".join(parts),
    )
