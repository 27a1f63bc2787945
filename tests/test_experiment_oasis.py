"""The ``oasis`` experiment (spec 001 Figs. 3-8): its verdicts follow its numbers (smoke
scale), H1's ordering over eight seeds at a point chosen from the paper's load, and the
default scale, where every claim must hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mlsched.core.job import JobSpec
from mlsched.core.utility import Utility
from mlsched.engine.builder import Failure
from mlsched.experiments import run_experiment
from mlsched.experiments.costs import cluster_check
from mlsched.experiments.oasis import (
    BASELINES,
    OASIS_VARIANTS,
    SCALE_SETTINGS,
    _schemes,
    job_class,
)
from mlsched.experiments.oasis.utility import _h1_one
from mlsched.experiments.pool import Runner
from tests.claims_helpers import assert_claims_checked


def test_smoke_scale_writes_results_checks_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "oasis"
    results = run_experiment("oasis", out_dir=out, scale="smoke", seeds=1)
    assert_claims_checked(results)
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk["experiment"] == "oasis" and on_disk["scale"] == "smoke"
    for scheme in ("oasis", "oasis-nofloor", "fifo", "drf", "rrh", "dorm"):
        assert "total_utility" in on_disk["summary"][scheme], scheme
    names = [c["name"] for c in on_disk["checks"]]
    for h in ("H1", "H2", "H3", "H4", "H5"):
        assert any(n.startswith(h) for n in names), h
    assert on_disk["failures"] == []
    # Each verdict is the one the recorded numbers give (smoke scale is too small for the
    # claims to hold, so what is checked here is the checking).
    assert_verdicts_follow_the_numbers(on_disk)
    rows = on_disk["h3"]["rows"]
    assert rows and all(r["opt_status"] in ("optimal", "time_limit") for r in rows)
    # The offline optimum bounds what OASiS earns on the same instance when it is proven.
    for r in rows:
        if r["opt_status"] == "optimal":
            assert r["opt_utility"] >= r["oasis_utility"] - 1e-6
    assert set(on_disk["h4"]["utility"]) == set(OASIS_VARIANTS)
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert set(on_disk["h5"]["schemes"]) == set(on_disk["summary"])
    assert all(len(v["utility"]) == 2 for v in on_disk["h5"]["schemes"].values())
    assert set(results["plots"]) == set(pngs) and len(pngs) == 7
    assert all((out / p).read_bytes().startswith(b"\x89PNG") for p in pngs)


def _check(results: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    return [c for c in results["checks"] if c["name"].startswith(prefix)]


def assert_verdicts_follow_the_numbers(results: dict[str, Any]) -> None:
    """Recompute H1 and H3 from the runs results.json records (not from the experiment's
    own summaries): a check that printed PASS on numbers that say FAIL, a sweep that is
    not the mean of its runs, or a lost run fails here."""
    sweep = results["h1"]["sweep"]
    points = sweep["values"]
    util = sweep["metrics"]["total_utility"]
    runs = results["h1"]["runs"]
    for name in results["schemes"]:
        for i, n in enumerate(points):
            values = [r["total_utility"] for r in runs if (r["scheme"], r["jobs"]) == (name, n)]
            assert len(values) == results["seeds"], (name, n)
            assert util[name]["mean"][i] == pytest.approx(float(np.mean(values)))
    baselines = [n for n in results["schemes"] if n not in OASIS_VARIANTS]
    # Each hypothesis is decided for the paper's OASiS (no floor); the floor (ours) is a row
    # of its own, decided on its own figures.
    floor = " [OASiS + utility floor + level plans (ours)]"

    def rows(prefix: str, ours: bool) -> list[dict[str, Any]]:
        return [
            c
            for c in _check(results, prefix)
            if c["name"].endswith(floor) is ours and not c["name"].endswith("}")
        ]

    for scheme, ours in (("oasis-nofloor", False), ("oasis", True)):
        margins = [
            util[scheme]["mean"][i] - max(util[b]["mean"][i] for b in baselines)
            for i in range(len(points))
        ]
        (every, grows) = rows("H1", ours)
        assert every["passed"] is all(m >= 0 for m in margins), (every, margins)
        assert grows["passed"] is (len(points) > 1 and margins[-1] > max(0.0, margins[0]))
        (h3,) = rows("H3", ours)
        ratios = [r[f"{scheme}_ratio"] for r in results["h3"]["rows"]]
        assert h3["passed"] is bool(1.0 - 1e-6 <= float(np.median(ratios)) <= 1.5), (h3, ratios)
    # H1 again on runs of their own charging a cluster's restart cost (the paper's: free).
    assert results["restart_cost"]["restart_s"] == 0.0
    assert results["cluster_restart_cost"]["restart_s"] > 0
    charged = results["cluster"]["h1"]["sweep"]["metrics"]["total_utility"]
    margins = [
        charged["oasis-nofloor"]["mean"][i] - max(charged[b]["mean"][i] for b in baselines)
        for i in range(len(points))
    ]
    (every,) = [
        c
        for c in _check(results, "H1: OASiS has the highest")
        if c["name"].endswith("{a cluster's restart cost}")
    ]
    assert every["passed"] is all(m >= 0 for m in margins), (every, margins)
    for check in results["checks"]:
        assert isinstance(check["passed"], bool) and check["detail"], check


def test_job_class_follows_the_decay() -> None:
    def spec(decay: float) -> JobSpec:
        return JobSpec("j", utility=Utility.sigmoid(10.0, decay, 5.0))

    assert job_class(spec(0.0)) == "insensitive"
    assert job_class(spec(0.5)) == "sensitive"
    assert job_class(spec(5.0)) == "critical"
    assert job_class(JobSpec("j", utility=Utility.constant(1.0))) == "other"


# The default scale, as a user runs it ---------------------------------------------------------
@pytest.fixture(scope="module")
def default_scale(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("oasis-default")
    run_experiment("oasis", out_dir=out, scale="default")
    return dict(json.loads((out / "results.json").read_text()))


@pytest.mark.reproduction
@pytest.mark.slow
@pytest.mark.timeout(1800)  # the shared default-scale run: minutes on 2 cores
def test_the_default_scale_holds_its_claims(default_scale: dict[str, Any]) -> None:
    """``mlsched experiment oasis`` as documented (default scale, its six seeds, restarts
    free as the paper assumes, H1 again with a cluster's): no failed run, each verdict
    follows its numbers, and every check holds but those reported below
    (docs/reproduction.md gives each claim's verdict, figures and cause).

    Reported, not required: H1 for the paper's OASiS (no utility floor: -21 / -132 / +22
    against the best baseline, prices near zero, spec A7) and H1b (it holds with free
    restarts, -21 to +22, and fails with a cluster's restart cost, -40 to -11: it turns on
    the cost); H2 for the paper's OASiS (on the completed jobs Dorm and DRF are closer to
    their targets) and H2 over every job for both (a job OASiS leaves unfinished is late by
    the most); H4 for both (the U/L factor's effect is inside the spread between seeds at
    this scale: it has held and failed in turn as unrelated plan rules changed,
    docs/algorithms/oasis.md); H5 for the paper's OASiS (its testbed lead is not the
    smaller); H1 with a cluster's restart cost."""
    floor = " [OASiS + utility floor + level plans (ours)]"
    h1 = "H1: OASiS has the highest total utility at every job count"
    h1b = "H1: OASiS leads at the most jobs and its lead grows with the number of jobs"
    h2 = (
        "H2: OASiS's completion time minus target is closest to 0 with the smallest spread, "
        "in both classes"
    )
    h2_all = (
        "H2 over every job (ours): completion minus target closest to 0 with the smallest "
        "spread, a job not completed charged the run's end"
    )
    h4 = (
        "H4: under-estimating U/L gives more utility than over-estimating it when resources "
        "are scarce"
    )
    h5 = "H5: on the testbed setting OASiS leads as in the simulation, by a smaller margin"
    informational = {h1, h1b, h2, h2_all, h2_all + floor, h4, h4 + floor, h5}
    informational |= {cluster_check(h1), cluster_check(h1b)}
    assert informational <= {c["name"] for c in default_scale["checks"]}
    assert_claims_checked(default_scale)
    failed = [
        (c["name"], c["detail"])
        for c in default_scale["checks"]
        if not c["passed"] and c["name"] not in informational
    ]
    assert failed == []
    assert_verdicts_follow_the_numbers(default_scale)


#: H1's point: the default scale's most jobs, 60 on 20 + 20 servers over 100 slots. That is
#: about the load of the paper's Fig. 3 at its rightmost point (400 jobs on 50 worker
#: servers over 300 slots: 0.027 arrivals per worker server and slot; here 0.030), where the
#: paper shows OASiS's lead largest. At 15 jobs almost every job finishes under any fair
#: scheme and the margin is inside the spread between seeds: no ordering is asserted there.
H1_JOBS = 60
#: Seeds 0-5 come from the experiment's own runs; these two more make eight.
H1_EXTRA_SEEDS = (6, 7)


@pytest.mark.reproduction
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_h1_oasis_with_our_floor_earns_more_than_every_baseline_over_eight_seeds(
    default_scale: dict[str, Any],
) -> None:
    """OASiS as shipped, with our utility floor (the paper's OASiS trails at this point:
    docs/reproduction.md). Every scheme on the same jobs per seed; the claim is about the
    mean over seeds (the spread between seeds is larger than the margins), so totals over
    eight seeds are compared; the per-seed wins are shown with them."""
    settings = SCALE_SETTINGS["default"]
    assert H1_JOBS in settings.jobs
    totals: dict[str, list[float]] = {}
    for run in default_scale["h1"]["runs"]:
        if run["jobs"] == H1_JOBS:
            totals.setdefault(run["scheme"], []).append(run["total_utility"])
    schemes = [(n, p, o) for n, p, o in _schemes() if n == "oasis" or n in BASELINES]
    items = [
        (H1_JOBS, seed, name, policy, options, settings.horizon, settings.servers, "paper")
        for seed in H1_EXTRA_SEEDS
        for name, policy, options in schemes
    ]
    with Runner() as runner:
        outcomes = runner.map(_h1_one, items, lambda done: None)
    for item, outcome in zip(items, outcomes, strict=True):
        assert not isinstance(outcome, Failure), outcome
        totals[item[2]].append(outcome.total_utility)
    assert len(totals["oasis"]) == 8
    for baseline in BASELINES:
        assert len(totals[baseline]) == 8
        wins = sum(o > b for o, b in zip(totals["oasis"], totals[baseline], strict=True))
        shown = {n: round(sum(v)) for n, v in totals.items()}
        assert sum(totals["oasis"]) > sum(totals[baseline]), (baseline, wins, shown)
