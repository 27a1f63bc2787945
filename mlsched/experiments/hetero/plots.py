"""The hetero experiment's figures as PNGs (numbered as the paper's)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mlsched.experiments.hetero.common import SCHEMES, HeteroScale
from mlsched.experiments.plots import plot_bars, plot_lines

__all__ = ["plots"]


def _where(s: HeteroScale) -> str:
    return f"{s.jobs} jobs, {s.servers} servers"


def plots(
    out_dir: Path,
    s: HeteroScale,
    records: Sequence[dict[str, Any]],
    batches: Sequence[dict[str, Any]],
    sweep: dict[int, list[float]],
) -> list[Path]:
    paths: list[Path] = []
    schemes = [r for r in records if r["part"] == "schemes"]
    for metric, label, name in (
        ("weighted_completion_time", "sum of w c (slots)", "fig2_weighted_completion.png"),
        ("weighted_from_arrival", "sum of w (c - a) (slots)", "weighted_flow.png"),
    ):
        values = {
            scheme: (float(np.mean(v)), float(np.std(v)))
            for scheme in SCHEMES
            if (v := [r[metric] for r in schemes if r["scheme"] == scheme])
        }
        if values:
            paths.append(
                plot_bars(
                    out_dir / name,
                    values,
                    ylabel=f"{label}, mean over seeds",
                    title=f"Figs. 2/5: weighted completion ({_where(s)})",
                )
            )
    sizes = sorted({b["jobs"] for b in batches})
    if sizes:
        series = {
            label: (
                [float(np.mean([b[key] for b in batches if b["jobs"] == n])) for n in sizes],
                [float(np.std([b[key] for b in batches if b["jobs"] == n])) for n in sizes],
            )
            for key, label in (("maxweight", "A_maxweight"), ("greedy", "Jain et al. greedy"))
        }
        paths.append(
            plot_lines(
                out_dir / "fig8_maxweight_vs_greedy.png",
                sizes,
                series,
                xlabel=f"jobs in the batch (window {s.batch_tau - 1} slots, {s.servers} servers)",
                ylabel="total weight scheduled",
                title="Fig. 8: A_maxweight vs Jain et al.'s greedy",
            )
        )
    if sweep:
        alphas = sorted(sweep)
        paths.append(
            plot_lines(
                out_dir / "alpha_sweep.png",
                alphas,
                {
                    "hetero": (
                        [float(np.mean(sweep[a])) for a in alphas],
                        [float(np.std(sweep[a])) for a in alphas],
                    )
                },
                xlabel=f"alpha ({_where(s)})",
                ylabel="sum of w c (slots), mean over seeds",
                title="Sensitivity to alpha",
            )
        )
    return paths
