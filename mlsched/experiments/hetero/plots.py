"""The hetero experiment's figures as PNGs (numbered as the paper's)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mlsched.experiments.hetero.checks import at
from mlsched.experiments.hetero.common import SCHEMES, HeteroScale
from mlsched.experiments.plots import plot_lines

__all__ = ["plots"]


def plots(
    out_dir: Path,
    s: HeteroScale,
    schemes: Sequence[dict[str, Any]],
    batches: Sequence[dict[str, Any]],
) -> list[Path]:
    paths: list[Path] = []
    for arch, name, fig in (
        ("ps", "fig2_weighted_completion_ps.png", "Fig. 2: PS jobs"),
        ("ring", "fig5_weighted_completion_ring.png", "Fig. 5: ring-all-reduce jobs"),
    ):
        caps = sorted({float(r["capacity"]) for r in schemes if r["arch"] == arch})
        if not caps:
            continue
        series = {}
        for scheme in SCHEMES:
            rows = [[r["weighted_completion_time"] for r in at(schemes, arch, c)
                     if r["scheme"] == scheme] for c in caps]  # fmt: skip
            if all(rows):
                series[scheme] = (
                    [float(np.mean(v)) for v in rows],
                    [float(np.std(v)) for v in rows],
                )
        paths.append(
            plot_lines(
                out_dir / name,
                caps,
                series,
                xlabel="cluster capacity / the jobs' ideal demand",
                ylabel="sum of w c (slots), mean over seeds",
                title=f"{fig}, {s.jobs} jobs, T = {s.horizon}",
            )
        )
    sizes = sorted({b["jobs"] for b in batches})
    if sizes:
        series = {
            label: (
                [float(np.mean([b[key] for b in batches if b["jobs"] == n])) for n in sizes],
                [float(np.std([b[key] for b in batches if b["jobs"] == n])) for n in sizes],
            )
            for key, label in (
                ("maxweight", "A_maxweight (density order)"),
                ("maxweight_arrival", "A_maxweight (arrival order)"),
                ("greedy", "Jain et al. greedy (density order)"),
            )
        }
        paths.append(
            plot_lines(
                out_dir / "fig8_maxweight_vs_greedy.png",
                sizes,
                series,
                xlabel=f"jobs in the batch (window {s.batch_tau - 1} slots)",
                ylabel="total weight scheduled",
                title="Fig. 8: A_maxweight vs Jain et al.'s greedy",
            )
        )
    return paths
