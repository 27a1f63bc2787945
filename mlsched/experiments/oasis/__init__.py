"""Experiment ``oasis``: spec 001's Figs. 3-6 and its headline results H1-H4 (§5.3, §5.5).

Four parts, all on the ``oasis-paper`` workload, each seed a different workload:

* **H1 (Fig. 3)**: total utility vs number of jobs for OASiS and the paper's baselines
  (FIFO, DRF, RRH, Dorm), every scheme on the same jobs.
* **H2 (Fig. 4)**: actual minus target completion duration (``completion - arrival -
  gamma3``, in slots) of the completed time-sensitive and time-critical jobs, per scheme,
  on a workload of those two classes only (half each); jobs not completed are counted
  separately. A job's class is read off its sigmoid's decay gamma2 (0: insensitive,
  [0.01, 1]: sensitive, [4, 6]: critical; ``workloads/oasis.py``).
* **H3 (Fig. 5)**: the performance ratio OPT / OASiS on 10-job instances with T = 10 and
  a few servers (the total split between the pools, the worker pool taking the odd one),
  for several ranges of the priority gamma1 (the workload's gamma1 in [1, 100] mapped
  linearly onto the range, which raises the spread of utilities and so U/L). OPT is the
  MILP of :mod:`mlsched.scheduler.offline` under a time limit; its status and gap are
  recorded, and a ratio from an unproven optimum is a lower estimate.
* **H4 (Fig. 6)**: OASiS's total utility vs number of jobs when its U is scaled by
  ``ul_ratio_scale`` (U/L under- or over-estimated, L kept; spec A24).
* **H5 (Figs. 7-8)**: the paper's testbed setting (§5.4: 12 ResNet/VGG jobs on 7 worker +
  2 PS hosts, 10 slots of 20 min; workload ``oasis-testbed``) simulated with every scheme.
* **H6 (text)**: OASiS's decision time per arriving job at T = 100 on 80 servers
  (:mod:`.timing`).

OASiS runs twice: ``oasis`` as shipped (``utility_floor=1.0``) and ``oasis-nofloor`` with
the paper's price constants as written. Without the floor the time-critical sigmoids make
L astronomically small (spec A7), prices stay near zero and admission is almost greedy; the
floor bounds f from below in U and L only (jobs are still scored by their true utility),
which makes the prices bite. A hypothesis holds when it holds for ``oasis``; the detail of
each check says whether it holds for ``oasis-nofloor`` too.

Six seeds by default: at the fewest jobs the schemes are close (most jobs finish under any
of them) and three seeds leave the order to chance. The runs are independent and spread
over the machine's cores (:mod:`mlsched.experiments.pool`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from mlsched.engine.builder import Failure
from mlsched.experiments.base import (
    ProgressFactory,
    check_no_failures,
    mean_summary,
    register_experiment,
)
from mlsched.experiments.costs import cluster_check
from mlsched.experiments.oasis.common import (
    BASELINES,
    COSTS,
    OASIS_VARIANTS,
    SCALE_SETTINGS,
    OasisScale,
    _schemes,
    job_class,
)
from mlsched.experiments.oasis.plots import _plots
from mlsched.experiments.oasis.ratio import _check_h3, _h3
from mlsched.experiments.oasis.targets import _check_h2, _h2, _h2_stats
from mlsched.experiments.oasis.testbed import _check_h5, _h5
from mlsched.experiments.oasis.timing import _check_h6, _h6
from mlsched.experiments.oasis.utility import (
    _check_h1,
    _check_h4,
    _h1,
    _h4,
    _h4_sweep,
    _sweep,
)
from mlsched.experiments.pool import Runner

__all__ = [
    "BASELINES",
    "OASIS_VARIANTS",
    "SCALE_SETTINGS",
    "OasisScale",
    "job_class",
    "run_oasis",
]


@register_experiment(
    "oasis",
    "spec 001 Figs. 3-8: OASiS vs FIFO/DRF/RRH/Dorm, completion vs target, OPT ratio, U/L, "
    "testbed setting",
    default_seeds=6,
    costs=COSTS,
)
def run_oasis(
    *, scale: str, seeds: int, out_dir: Path, progress: ProgressFactory
) -> dict[str, Any]:
    s = SCALE_SETTINGS[scale]
    schemes = _schemes()
    points = sorted(set(s.jobs) | {s.default_jobs})
    n_h3 = len(s.h3_servers) * len(s.h3_priorities) * seeds
    total = (
        len(points) * seeds * len(schemes)  # H1
        + seeds * len(schemes)  # H2
        + n_h3  # H3
        + len(points) * seeds * len(s.ul_scales) * len(OASIS_VARIANTS)  # H4
        + s.testbed_seeds * len(schemes)  # H5
        + len(points) * seeds * len(schemes)  # H1 with a cluster's restarts
        + min(seeds, s.h6_seeds) * len(OASIS_VARIANTS)  # H6
    )
    failures: list[Failure] = []
    with progress(total, f"oasis ({scale})") as advance, Runner() as runner:
        h1, runs = _h1(s, points, seeds, schemes, runner, advance, failures)
        h2 = _h2(s, seeds, schemes, runner, advance, failures)
        h3 = _h3(s, seeds, runner, advance, failures)
        h4 = _h4(s, points, seeds, runner, advance, failures)
        h5 = _h5(s, schemes, runner, advance, failures)
        h6 = _h6(s, seeds, runner, advance, failures)
        h1c, runs_c = _h1(s, points, seeds, schemes, runner, advance, failures, "cluster")

    names = [n for n, _, _ in schemes]
    summary = {
        n: mean_summary(h1.get((n, s.default_jobs), [])) for n in names if (n, s.default_jobs) in h1
    }
    sweep = _sweep(names, points, h1)
    h2_out = _h2_stats(h2, names)
    sweep_c = _sweep(names, points, h1c)
    h4_sweep = _h4_sweep(points, h4, s.ul_scales)
    plots = _plots(out_dir, s, points, sweep, h2_out, h3, h4_sweep, h5)
    checks = [
        *_check_h1(names, points, sweep),
        *_check_h2(names, h2_out),
        *_check_h3(h3),
        *_check_h4(points, h4_sweep),
        *_check_h5(h5, sweep),
        *_check_h6(h6, s.h6_point),
        # H1 for the paper's OASiS with a cluster's restart cost, rows apart (not H2: its
        # runs are Dorm's MILPs again for a claim on completion times).
        *(
            dataclasses.replace(c, name=cluster_check(c.name))
            for c in _check_h1(names, points, sweep_c)
            if " [" not in c.name
        ),
        check_no_failures(failures),
    ]
    return {
        "summary": summary,
        "checks": [c.to_dict() for c in checks],
        "schemes": {n: {"policy": p, "options": o} for n, p, o in schemes},
        "default_point": {"jobs": s.default_jobs},
        "settings": dataclasses.asdict(s),
        "h1": {"sweep": sweep, "runs": runs},
        "h2": h2_out,
        # H1 again, charging a cluster's restart cost.
        "cluster": {"h1": {"sweep": sweep_c, "runs": runs_c}},
        "h3": h3,
        "h4": h4_sweep,
        "h5": h5,
        "h6": {
            "point": dict(zip(("jobs", "horizon", "servers"), s.h6_point, strict=True)),
            "runs": h6,
        },
        "failures": [f.to_dict() for f in failures],
        "plots": [p.name for p in plots],
    }
