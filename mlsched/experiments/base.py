"""The experiment framework: named comparisons that write ``results.json`` and plots.

An experiment is a function ``run(scale=, seeds=, out_dir=, progress=) -> dict`` registered
under a name with :func:`register_experiment`. It returns at least ``summary`` (policy ->
metric -> mean over seeds at its default point) and ``checks`` (the qualitative claims it
tests on its own data, each ``{name, passed, detail}``); :func:`run_experiment` adds
``experiment``, ``seeds``, ``scale`` and ``wall_seconds`` and writes ``results.json``.

Scales: ``smoke`` (seconds; tests and CI), ``default`` (about a minute on a laptop) and
``paper`` (the spec's full size). To add an experiment, decorate its function in a module
of this package and name that module in :data:`BUILTIN`.
"""

from __future__ import annotations

import importlib
import json
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mlsched.core.errors import SpecError
from mlsched.engine.summary import Summary
from mlsched.experiments.costs import CLUSTER, Costs
from mlsched.experiments.progress import ProgressFactory, no_progress
from mlsched.experiments.report import to_json

__all__ = [
    "BUILTIN",
    "SCALES",
    "Check",
    "Experiment",
    "ExperimentFn",
    "ProgressFactory",
    "addition_check",
    "check_no_failures",
    "decided_per_algorithm",
    "experiments",
    "get_experiment",
    "mean_summary",
    "no_progress",
    "per_algorithm",
    "register_experiment",
    "run_experiment",
]

log = logging.getLogger(__name__)

#: Experiment sizes, smallest first.
SCALES: tuple[str, ...] = ("smoke", "default", "paper")


class ExperimentFn(Protocol):
    def __call__(
        self, *, scale: str, seeds: int, out_dir: Path, progress: ProgressFactory
    ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Check:
    """A qualitative claim evaluated on an experiment's data; it may fail."""

    name: str
    passed: bool
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": bool(self.passed), "detail": self.detail}


#: An experiment that tests no paper's claim charges a cluster's restart cost (its slot
#: an hour, as the paper workloads' but GADGET's and DPS's).
DEFAULT_COSTS = Costs(CLUSTER, None, 3600.0)


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    run: ExperimentFn
    default_seeds: int = 3
    costs: Costs = DEFAULT_COSTS


#: The built-in experiments' modules (in :mod:`mlsched.experiments`), imported when the
#: registry is first read.
BUILTIN = ("baselines", "dps", "gadget", "hetero", "oasis", "pdors")

_REGISTRY: dict[str, Experiment] = {}


def register_experiment(
    name: str,
    description: str,
    *,
    default_seeds: int = 3,
    costs: Costs = DEFAULT_COSTS,
) -> Callable[[ExperimentFn], ExperimentFn]:
    """Decorator: register ``run`` as experiment ``name``; a name binds only once.
    ``costs``: what its simulations charge for a restart, the paper's and a cluster's
    (:mod:`mlsched.experiments.costs`; ``results.json`` says)."""
    if not name or not description:
        raise ValueError("an experiment needs a name and a one-line description")

    def deco(fn: ExperimentFn) -> ExperimentFn:
        old = _REGISTRY.get(name)
        if old is not None and old.run is not fn:
            raise ValueError(f"experiment name {name!r} is already registered")
        _REGISTRY[name] = Experiment(name, description, fn, default_seeds, costs)
        return fn

    return deco


def _load_builtin() -> None:
    for module in BUILTIN:  # importing a module registers its experiments
        importlib.import_module(f"mlsched.experiments.{module}")


def experiments() -> dict[str, str]:
    """Name -> one-line description of every registered experiment."""
    _load_builtin()
    return {n: _REGISTRY[n].description for n in sorted(_REGISTRY)}


def get_experiment(name: str) -> Experiment:
    _load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise SpecError(
            "experiment", name, f"one of {', '.join(sorted(_REGISTRY)) or '(none registered)'}"
        ) from None


def run_experiment(
    name: str,
    *,
    out_dir: str | Path,
    scale: str = "default",
    seeds: int | None = None,
    progress: ProgressFactory = no_progress,
) -> dict[str, Any]:
    """Run experiment ``name`` and write ``out_dir/results.json``; returns the results."""
    experiment = get_experiment(name)
    if scale not in SCALES:
        raise SpecError("scale", scale, f"one of {', '.join(SCALES)}")
    n_seeds = experiment.default_seeds if seeds is None else seeds
    if not isinstance(n_seeds, int) or n_seeds < 1:
        raise SpecError("seeds", seeds, "an integer >= 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    body = experiment.run(scale=scale, seeds=n_seeds, out_dir=out, progress=progress)
    wall = time.perf_counter() - start
    results = {
        "experiment": name,
        "description": experiment.description,
        "seeds": n_seeds,
        "scale": scale,
        "wall_seconds": wall,
        **experiment.costs.to_dict(),
        "summary": {},
        "checks": [],
        **body,
    }
    results["wall_seconds"] = wall
    path = out / "results.json"
    path.write_text(json.dumps(to_json(results), indent=2) + "\n", encoding="utf-8")
    failed = [c["name"] for c in results["checks"] if not c.get("passed")]
    log.info(
        "[experiment] %s (%s, %d seeds) took %.1fs; %d/%d checks passed; wrote %s",
        name,
        scale,
        n_seeds,
        wall,
        len(results["checks"]) - len(failed),
        len(results["checks"]),
        path,
    )
    return results


def mean_summary(summaries: Sequence[Summary | Mapping[str, Any]]) -> dict[str, Any]:
    """Metric -> mean over runs (seeds) of every numeric field (of :class:`Summary` or its
    ``to_dict``); ``utilization`` per resource. Metrics with no data in any run are None."""
    if not summaries:
        return {}
    out: dict[str, Any] = {"runs": len(summaries)}
    rows = [dict(s) if isinstance(s, Mapping) else s.to_dict() for s in summaries]
    for key, first in rows[0].items():
        if key in ("policy",):
            continue
        if isinstance(first, dict):
            names = sorted({n for r in rows for n in r[key]})
            out[key] = {n: float(np.mean([r[key].get(n, 0.0) for r in rows])) for n in names}
        elif isinstance(first, bool):
            out[key] = any(r[key] for r in rows)
        else:
            values = [float(r[key]) for r in rows if r[key] is not None]
            out[key] = float(np.mean(values)) if values else None
    return out


def addition_check(name: str, label: str) -> str:
    """The name of check ``name`` decided for one of our additions (``label``, e.g.
    "OASiS + utility floor + level plans (ours)"): a row of its own, never the paper's claim."""
    return f"{name} [{label}]"


def per_algorithm(
    name: str,
    detail: str,
    held: Collection[str],
    paper: str,
    additions: Mapping[str, str],
) -> list[Check]:
    """One claim's checks: ``name`` passes only where it holds for ``paper`` (the scheme
    that runs the paper's algorithm as the paper defines it); each scheme of
    ``additions`` (scheme -> label naming our addition) gets its own row,
    :func:`addition_check`. ``held``: the schemes for which the claim holds."""
    checks = [Check(name, paper in held, detail)]
    checks += [
        Check(addition_check(name, label), scheme in held, detail)
        for scheme, label in additions.items()
    ]
    return checks


def decided_per_algorithm(
    check: Callable[[str], Check], paper: str, additions: Mapping[str, str]
) -> list[Check]:
    """:func:`per_algorithm` of ``check(scheme)`` run for ``paper`` and each addition: the
    paper's detail, with an addition's own figures added where they differ."""
    results = {scheme: check(scheme) for scheme in (paper, *additions)}
    first = results[paper]
    detail = first.detail + "".join(
        f" | {scheme}: {c.detail}"
        for scheme, c in results.items()
        if scheme != paper and c.detail != first.detail
    )
    held = [scheme for scheme, c in results.items() if c.passed]
    return per_algorithm(first.name, detail, held, paper, additions)


def check_no_failures(failures: Sequence[Any]) -> Check:
    """A check that every run of an experiment finished (``failures``: the runs' Failure
    records, each with ``policy`` and ``error``)."""
    if not failures:
        return Check("every run finished without error", True, "no failures")
    names = sorted({f.policy for f in failures})
    return Check(
        "every run finished without error",
        False,
        f"{len(failures)} failed runs ({', '.join(names)}): {failures[0].error}",
    )
