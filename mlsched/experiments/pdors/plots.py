"""The pdors experiment's figures as PNGs (numbered as the paper's)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mlsched.experiments.pdors.checks import (
    machine_sweep,
    mix_gains,
    ratio_rows,
    rounding_ratios,
    utility_sweep,
)
from mlsched.experiments.pdors.common import PdorsScale
from mlsched.experiments.plots import plot_bars, plot_lines


def _nan(v: float | None) -> float:
    return float("nan") if v is None else float(v)


def plots(
    out_dir: Path,
    s: PdorsScale,
    records: Sequence[dict[str, Any]],
    ratio: dict[str, Any],
    names: Sequence[str],
) -> list[Path]:
    def part(name: str) -> list[dict[str, Any]]:
        return [r for r in records if r["part"] == name]

    paths: list[Path] = []
    sweep = utility_sweep(part("utility"), names)
    if sweep["values"]:
        series = {
            n: ([_nan(v) for v in d["mean"]], [_nan(v) if v is not None else 0.0 for v in d["std"]])
            for n, d in sweep["total_utility"].items()
        }
        paths.append(
            plot_lines(
                out_dir / "fig7_utility_vs_jobs.png",
                sweep["values"],
                series,
                xlabel="number of jobs",
                ylabel="total utility",
                title=f"Figs. 7-8: total utility, H={s.servers}, T={s.horizon}",
            )
        )
    machines = part("machines") + [
        r for r in part("utility") if r["jobs"] == s.default_jobs and r["servers"] == s.servers
    ]
    if part("machines"):
        shown = [n for n in names if n in {r["scheme"] for r in part("machines")}]
        by_h = machine_sweep(machines, shown)
        series = {
            n: ([_nan(v) for v in d["mean"]], [_nan(v) if v is not None else 0.0 for v in d["std"]])
            for n, d in by_h["total_utility"].items()
        }
        paths.append(
            plot_lines(
                out_dir / "fig6_utility_vs_machines.png",
                by_h["values"],
                series,
                xlabel="number of machines H",
                ylabel="total utility",
                title=f"Fig. 6: total utility, {s.default_jobs} jobs, T={s.horizon}",
            )
        )
    median = part("median")
    if median:
        bars = {}
        for n in names:
            vals = [r["median_training_slots_feasible"] for r in median if r["scheme"] == n]
            bars[n] = (float(np.nanmean(vals)), float(np.nanstd(vals))) if vals else (0.0, 0.0)
        jobs, servers, horizon = s.median_point
        paths.append(
            plot_bars(
                out_dir / "fig9_median_training_time.png",
                bars,
                ylabel="median training time (slots)",
                title=f"Fig. 9: {jobs} jobs, H={servers}, T={horizon} (unfinished = T; "
                "jobs that can finish alone)",
            )
        )
    rows = ratio_rows(ratio)
    if rows:
        hs = list(rows)
        paths.append(
            plot_lines(
                out_dir / "fig10_ratio_vs_machines.png",
                hs,
                {
                    "OPT / PD-ORS": ([_nan(rows[h]["ratio"]) for h in hs], [0.0] * len(hs)),
                    "OPT bound / PD-ORS": (
                        [_nan(rows[h]["ratio_bound"]) for h in hs],
                        [0.0] * len(hs),
                    ),
                },
                xlabel="machines H",
                ylabel="empirical ratio",
                title=f"Fig. 10: {ratio.get('jobs')} jobs, T={ratio.get('horizon')}",
            )
        )
    ratios = rounding_ratios(part("rounding"), s.gains)
    if any(v is not None for v in ratios.values()):
        jobs, servers, horizon = s.rounding_point
        paths.append(
            plot_lines(
                out_dir / "fig11_rounding_ratio.png",
                list(s.gains),
                {"exact / rounded": ([_nan(v) for v in ratios.values()], [0.0] * len(ratios))},
                xlabel="G_delta",
                ylabel="rounding ratio",
                title=f"Fig. 11: {jobs} jobs, H={servers}, T={horizon}",
            )
        )
    gains = mix_gains(part("mix"))
    if any(v is not None for v in gains.values()):
        jobs, servers, horizon = s.mix_point
        paths.append(
            plot_bars(
                out_dir / "fig14_gain_by_mix.png",
                {k: (100.0 * _nan(v), 0.0) for k, v in gains.items()},
                ylabel="utility gain over OASiS (%)",
                title=f"Figs. 14-17: {jobs} jobs, H={servers}, T={horizon}",
            )
        )
    return paths
