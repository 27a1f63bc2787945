"""Figs. 3-6 of the oasis experiment as PNGs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mlsched.experiments.oasis.common import _CLASSES, OASIS_VARIANTS, OasisScale
from mlsched.experiments.plots import plot_bars, plot_lines


def _series(per: dict[str, Any]) -> dict[str, tuple[list[float], list[float]]]:
    return {
        name: (
            [np.nan if v is None else v for v in data["mean"]],
            [0.0 if v is None else v for v in data["std"]],
        )
        for name, data in per.items()
    }


def _plots(
    out_dir: Path,
    s: OasisScale,
    points: Sequence[int],
    sweep: dict[str, Any],
    h2: dict[str, Any],
    h3: dict[str, Any],
    h4: dict[str, Any],
    h5: dict[str, Any],
) -> list[Path]:
    where = f"{s.servers}+{s.servers} servers, T={s.horizon}"
    paths = [
        plot_lines(
            out_dir / "fig3_utility_vs_jobs.png",
            points,
            _series(sweep["metrics"]["total_utility"]),
            xlabel="number of jobs",
            ylabel="total utility",
            title=f"Fig. 3: total utility vs number of jobs ({where})",
        )
    ]
    bars = {
        f"{name}/{cls}": (
            float(np.nan if st[cls]["mean"] is None else st[cls]["mean"]),
            float(0.0 if st[cls]["std"] is None else st[cls]["std"]),
        )
        for name, st in h2.items()
        for cls in _CLASSES
    }
    paths.append(
        plot_bars(
            out_dir / "fig4_completion_minus_target.png",
            bars,
            ylabel="completion - target (slots)",
            title=f"Fig. 4: completed jobs, {s.h2_jobs} jobs, T={s.h2_horizon}",
        )
    )
    ratio_series: dict[str, tuple[list[float], list[float]]] = {}
    for name in OASIS_VARIANTS:
        for lo, hi in s.h3_priorities:
            means: list[float] = []
            stds: list[float] = []
            for total in s.h3_servers:
                vals = [
                    r[f"{name}_ratio"]
                    for r in h3["rows"]
                    if r["servers"] == total
                    and r["priority"] == [lo, hi]
                    and math.isfinite(r.get(f"{name}_ratio", math.inf))
                ]
                means.append(float(np.mean(vals)) if vals else np.nan)
                stds.append(float(np.std(vals)) if vals else 0.0)
            ratio_series[f"{name} g1 [{lo:g},{hi:g}]"] = (means, stds)
    paths.append(
        plot_lines(
            out_dir / "fig5_performance_ratio.png",
            list(s.h3_servers),
            ratio_series,
            xlabel="total servers",
            ylabel="OPT / OASiS utility",
            title="Fig. 5: performance ratio (10 jobs, T=10)",
        )
    )
    for name, per in h4["utility"].items():
        paths.append(
            plot_lines(
                out_dir / f"fig6_ul_sensitivity_{name}.png",
                points,
                _series({f"U/L x{k}": v for k, v in per.items()}),
                xlabel="number of jobs",
                ylabel="total utility",
                title=f"Fig. 6: {name} with U/L misestimated ({where})",
            )
        )
    tb = h5["schemes"]
    where5 = f"oasis-testbed, {h5['seeds']} seeds"
    paths.append(
        plot_bars(
            out_dir / "fig7_testbed_utility.png",
            {n: (v["utility_mean"], v["utility_std"]) for n, v in tb.items()},
            ylabel="total utility",
            title=f"Fig. 7: total utility, testbed setting ({where5})",
        )
    )
    paths.append(
        plot_bars(
            out_dir / "fig8_testbed_completion_minus_target.png",
            {
                n: (
                    float(np.nan if v["delta_mean"] is None else v["delta_mean"]),
                    float(0.0 if v["delta_std"] is None else v["delta_std"]),
                )
                for n, v in tb.items()
            },
            ylabel="completion - target (slots)",
            title=f"Fig. 8: completed jobs, testbed setting ({where5})",
        )
    )
    return paths
