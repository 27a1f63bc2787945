"""PNG plots for experiments, drawn with matplotlib's Agg canvas.

Figures are built on :class:`matplotlib.figure.Figure` with an Agg canvas rather than
through ``pyplot``, so plotting needs no display, keeps no global figure state and never
switches the process-wide backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # matplotlib takes a third of a second to import: on first plot
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_bars", "plot_cdf", "plot_curves", "plot_lines", "plot_scatter"]


def _figure() -> tuple[Figure, Axes]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.2), dpi=110)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def _finish(
    fig: Figure, ax: Axes, path: str | Path, *, xlabel: str, ylabel: str, title: str, legend: bool
) -> Path:
    """Labels, title, grid and (for named series) a legend; then the PNG."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if legend:
        ax.legend()
    return _save(fig, Path(path))


def plot_lines(
    path: str | Path,
    x: Sequence[float],
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
) -> Path:
    """One line per series with error bars: ``series[name] = (means, stds)`` over ``x``
    (NaN means a missing point)."""
    fig, ax = _figure()
    for name, (mean, std) in series.items():
        ax.errorbar(x, mean, yerr=std, marker="o", capsize=3, label=name)
    return _finish(fig, ax, path, xlabel=xlabel, ylabel=ylabel, title=title, legend=bool(series))


Values = Sequence[float] | np.ndarray


def plot_curves(
    path: str | Path,
    x: Values,
    series: Mapping[str, Values],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    bands: Mapping[str, tuple[Values, Values]] | None = None,
    zero_line: bool = False,
) -> Path:
    """One line per series over ``x`` (time series: no markers), with an optional shaded
    band ``(low, high)`` per series and a line at y = 0."""
    fig, ax = _figure()
    for name, values in series.items():
        (line,) = ax.plot(x, values, label=name)
        if bands and name in bands:
            low, high = bands[name]
            ax.fill_between(x, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
    if zero_line:
        ax.axhline(0.0, color="black", linewidth=0.8)
    return _finish(fig, ax, path, xlabel=xlabel, ylabel=ylabel, title=title, legend=bool(series))


def plot_cdf(
    path: str | Path,
    samples: Mapping[str, Sequence[float]],
    *,
    xlabel: str,
    title: str,
    styles: Mapping[str, tuple[str, str]] | None = None,
) -> Path:
    """Empirical CDF per series; an empty series is listed in the legend as "(none)".
    ``styles[name] = (color, linestyle)`` pairs series that belong together."""
    fig, ax = _figure()
    for name, values in samples.items():
        color, line = (styles or {}).get(name, (None, "-"))
        data = np.sort(np.asarray(values, dtype=float))
        if data.size == 0:
            ax.plot([], [], label=f"{name} (none)", color=color, linestyle=line)
            continue
        y = np.arange(1, data.size + 1) / data.size
        ax.step(data, y, where="post", label=name, color=color, linestyle=line)
    ax.set_ylim(0, 1.02)
    ylabel = "fraction of completed jobs"
    return _finish(fig, ax, path, xlabel=xlabel, ylabel=ylabel, title=title, legend=bool(samples))


def plot_bars(
    path: str | Path, values: Mapping[str, tuple[float, float]], *, ylabel: str, title: str
) -> Path:
    """One bar per name with its error bar: ``values[name] = (mean, std)``."""
    fig, ax = _figure()
    names = list(values)
    means = [values[n][0] for n in names]
    stds = [values[n][1] for n in names]
    ax.bar(range(len(names)), means, yerr=stds, capsize=4)
    ax.set_xticks(range(len(names)))
    # Many names need steeper labels, anchored at their bar, or they run into each other.
    crowded = len(names) > 6
    ax.set_xticklabels(names, rotation=45 if crowded else 20, ha="right" if crowded else "center")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    return _save(fig, Path(path))


def plot_scatter(
    path: str | Path,
    points: Mapping[str, Sequence[tuple[float, float]]],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    band: float = 0.0,
) -> Path:
    """One marker series per name of (x, y) points, with the diagonal y = x and, for
    ``band`` > 0, the region within ``band`` of it (relative) shaded."""
    fig, ax = _figure()
    values = [v for pts in points.values() for xy in pts for v in xy]
    top = max(values, default=1.0) * 1.08
    line = np.array([0.0, top])
    ax.plot(line, line, color="black", linewidth=0.8, label="simulated = measured")
    if band > 0:
        ax.fill_between(line, line * (1 - band), line * (1 + band), color="grey", alpha=0.2,
                        linewidth=0, label=f"within {band:.0%}")  # fmt: skip
    for name, pts in points.items():
        ax.scatter([x for x, _ in pts], [y for _, y in pts], label=name, s=28)
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    return _finish(fig, ax, path, xlabel=xlabel, ylabel=ylabel, title=title, legend=True)
