"""The dps experiment's figures as PNGs (numbered as the paper's)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mlsched.experiments.dps.common import PRIMARY, SCHEMES, DpsScale
from mlsched.experiments.dps.profit import regret_curves
from mlsched.experiments.dps.runtime import runtime_curves
from mlsched.experiments.plots import plot_bars, plot_curves, plot_lines

__all__ = ["plots"]


def _where(s: DpsScale) -> str:
    return f"{s.jobs} jobs, {s.servers} servers, T = {s.horizon}"


def plots(
    out_dir: Path,
    s: DpsScale,
    records: Sequence[dict[str, Any]],
    sweeps: dict[str, dict[str, list[Any]]],
) -> list[Path]:
    paths: list[Path] = []
    slots = np.arange(s.horizon)
    profit = {
        name: np.mean([r["curve"] for r in records if r["scheme"] == name], axis=0)
        for name in SCHEMES
        if any(r["scheme"] == name for r in records)
    }
    if profit:
        paths.append(
            plot_curves(
                out_dir / "fig3_profit_over_time.png",
                slots,
                profit,
                xlabel=f"slot ({_where(s)})",
                ylabel="cumulative profit (mean over seeds)",
                title="Fig. 3: profit over time",
            )
        )
    series: dict[str, np.ndarray] = {}
    bands: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in (PRIMARY, "dps-simple"):
        curves = regret_curves(records, name)
        if curves.size:
            series[name] = curves.mean(axis=0)
            bands[name] = (curves.min(axis=0), curves.max(axis=0))
    if series:
        paths.append(
            plot_curves(
                out_dir / "fig2_regret_over_time.png",
                slots,
                series,
                bands=bands,
                zero_line=True,
                xlabel=f"slot ({_where(s)})",
                ylabel="BFP's profit - scheme's",
                title="Fig. 2: regret vs BFP (mean; band: seed range)",
            )
        )
    runtime = runtime_curves(records)
    if runtime["dps"]:
        n = np.arange(1, len(runtime["dps"]) + 1)
        paths.append(
            plot_curves(
                out_dir / "fig7_runtime_pa_vs_rs.png",
                n,
                {"PA (dps)": runtime["dps"], "RS (rs)": runtime["rs"]},
                xlabel=f"completed jobs ({_where(s)})",
                ylabel="total runtime (slots, mean over seeds)",
                title="Fig. 7: runtime of completed jobs, PA vs RS",
            )
        )
    for key, fig, label in (("delta", "fig5", "δ / Theorem 2's δ"), ("theta", "fig6", "θ")):
        sweep = sweeps.get(key)
        if not sweep or all(v is None for v in sweep["regret"]):
            continue
        means = [np.nan if v is None else v for v in sweep["regret"]]
        stds = [0.0 if v is None else v for v in sweep["std"]]
        paths.append(
            plot_lines(
                out_dir / f"{fig}_regret_vs_{key}.png",
                sweep["values"],
                {"dps": (means, stds)},
                xlabel=f"{label} ({_where(s)})",
                ylabel="final regret vs BFP (mean, std)",
                title=f"{fig.replace('fig', 'Fig. ')}: final regret over {label}",
            )
        )
    prices = _prices(records)
    if prices:
        paths.append(
            plot_bars(
                out_dir / "prices_by_role.png",
                prices,
                ylabel="mean unit price offered (std over seeds)",
                title=f"Unit prices per role (W: worker, P: PS; {_where(s)})",
            )
        )
    return paths


def _prices(records: Sequence[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """(mean, std) over seeds of each scheme's mean priced offer per role: DPS's two
    bandits against BFP's joint prices (docs/algorithms/dps.md)."""
    out: dict[str, tuple[float, float]] = {}
    for name in SCHEMES:
        for role, tag in (("worker", "W"), ("ps", "P")):
            seen = [
                r["offers"]["mean_price"][role]
                for r in records
                if r["scheme"] == name and r.get("offers") is not None
            ]
            kept = [v for v in seen if v is not None]
            if kept:
                out[f"{name} {tag}"] = (float(np.mean(kept)), float(np.std(kept)))
    return out
