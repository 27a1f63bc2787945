"""The gadget experiment's figures as PNGs (numbered as the paper's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mlsched.experiments.gadget.checks import RATIO_FLOOR, embedding_sweep, utility_sweep
from mlsched.experiments.gadget.common import PAPER, SCHEMES, GadgetScale
from mlsched.experiments.gadget.ratio import bound
from mlsched.experiments.plots import plot_lines

__all__ = ["plots"]


def _nan(values: Sequence[float | None]) -> list[float]:
    return [float("nan") if v is None else float(v) for v in values]


def _histogram(
    path: Path, samples: Mapping[str, Sequence[float]], lines: Mapping[str, float], title: str
) -> Path:
    """Overlaid histograms of the per-instance ratios, with vertical reference lines."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.2), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    values = [v for vs in samples.values() for v in vs]
    top = max([1.0, *values])
    bins = [i * top / 24 for i in range(25)]
    for name, vs in samples.items():
        ax.hist(list(vs), bins=bins, alpha=0.5, label=f"{name} ({len(vs)})")
    for name, x in lines.items():
        ax.axvline(x, linestyle="--", linewidth=1, color="black")
        ax.annotate(name, (x, 0.95), xycoords=("data", "axes fraction"), rotation=90, va="top")
    ax.set_xlabel("LP-RS-MDE value / MILP optimum, per instance")
    ax.set_ylabel("instances")
    ax.set_title(title)
    ax.legend()
    ax.grid(True, alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def plots(
    out_dir: Path,
    s: GadgetScale,
    records: Sequence[dict[str, Any]],
    ratio: dict[str, Any],
    seeds: int,
) -> list[Path]:
    """Figs. 4-7 (``seeds``: how many the capacity sweeps ran on)."""
    paths: list[Path] = []
    where = f"{s.servers} servers, T={s.horizon}"
    sweep = utility_sweep(records, s.jobs)
    paths.append(
        plot_lines(
            out_dir / "fig4_utility_vs_jobs.png",
            list(s.jobs),
            {n: (_nan(sweep[n]["mean"]), _nan(sweep[n]["std"])) for n in SCHEMES},
            xlabel="number of jobs",
            ylabel="total utility (mean over seeds)",
            title=f"Fig. 4: total utility, {where}",
        )
    )
    cluster = utility_sweep(records, s.jobs, part="cluster")
    paths.append(
        plot_lines(
            out_dir / "fig4_utility_vs_jobs_cluster_restarts.png",
            list(s.jobs),
            {n: (_nan(cluster[n]["mean"]), _nan(cluster[n]["std"])) for n in SCHEMES},
            xlabel="number of jobs",
            ylabel="total utility (mean over seeds)",
            title=f"Fig. 4 with a cluster's restart cost, {where}",
        )
    )
    if s.paper_point is not None:
        servers, horizon, counts = s.paper_point
        for mode, tag in (
            ("iterations", "iteration budgets"),
            ("worker_slots", "worker-slot budgets"),
        ):
            paper = utility_sweep(records, sorted(counts), mode, "paper")
            paths.append(
                plot_lines(
                    out_dir / f"fig4_paper_size_{mode}.png",
                    sorted(counts),
                    {n: (_nan(paper[n]["mean"]), _nan(paper[n]["std"])) for n in SCHEMES},
                    xlabel="number of jobs",
                    ylabel="total utility (mean over seeds)",
                    title=f"Fig. 4 at the paper's size: {servers} servers, T={horizon}, {tag}",
                )
            )
    for axis, name, label in (
        ("node_scale", "fig5_embedded_vs_node_scale.png", "Fig. 5: node (GPU) capacity"),
        ("link_scale", "fig6_embedded_vs_link_scale.png", "Fig. 6: link capacity"),
    ):
        paper = embedding_sweep(records, axis, s.default_jobs, seeds, PAPER)
        if not paper["scales"]:
            continue
        paths.append(
            plot_lines(
                out_dir / name,
                paper["scales"],
                {
                    "embedded (LP-RS-MDE), GADGET": (
                        _nan(paper["embedded_ratio"]["mean"]),
                        _nan(paper["embedded_ratio"]["std"]),
                    ),
                    "allocated, GADGET": (
                        _nan(paper["allocated_ratio"]["mean"]),
                        _nan(paper["allocated_ratio"]["std"]),
                    ),
                },
                xlabel=f"{axis.replace('_', ' ')} (x the generated capacity)",
                ylabel="jobs placed / active jobs, per slot",
                title=f"{label}, {s.default_jobs} jobs, {where}",
            )
        )
    rows = [r for r in ratio.get("rows", []) if r["paper_ratio"] is not None]
    if rows:
        gamma = max(int(r["gamma"]) for r in rows)
        paths.append(
            _histogram(
                out_dir / "fig7_ratio_vs_optimum.png",
                {mode: [r[f"{mode}_ratio"] for r in rows] for mode in ("paper", "strict")},
                {f"{RATIO_FLOOR}": RATIO_FLOOR, f"1/(3x{gamma})": bound(gamma)},
                f"Fig. 7: {ratio.get('jobs')} jobs on <= {max(s.ratio_servers)} servers",
            )
        )
    return paths
