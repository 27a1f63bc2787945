"""``mlsched experiment gadget`` (spec 003 §5, Q1-Q4): its outputs and checks at smoke scale
via the CLI, GADGET's ordering at the smoke point over eight seeds, and (``make
reproduce``) the default scale."""

from __future__ import annotations

import dataclasses
import json
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from mlsched.cli import main
from mlsched.core.allocation import Allocation, Placement
from mlsched.engine.builder import SimulationConfig, simulate
from mlsched.engine.simulator import DEFAULT_RESTART_S
from mlsched.engine.summary import summarize
from mlsched.experiments import run_experiment
from mlsched.experiments.costs import cluster_check
from mlsched.experiments.gadget.checks import at_least, check_embedding, check_gap
from mlsched.experiments.gadget.common import (
    BASELINES,
    PAPER,
    SCALE_SETTINGS,
    SCHEMES,
    workload,
)
from mlsched.experiments.gadget.replay import Replay
from tests.claims_helpers import assert_claims_checked

_PLOTS = {
    "fig4_utility_vs_jobs.png",
    "fig4_utility_vs_jobs_cluster_restarts.png",
    "fig4_paper_size_iterations.png",
    "fig4_paper_size_worker_slots.png",
    "fig5_embedded_vs_node_scale.png",
    "fig6_embedded_vs_link_scale.png",
    "fig7_ratio_vs_optimum.png",
}


def test_smoke_scale_via_the_cli_writes_results_checks_and_plots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is tested is the checking, not the claims (one seed is too few): the summary
    has exactly the four schemes at the default point, each verdict follows the numbers
    recorded beside it, the sweeps and the MILP comparison stay out of the summary, PNGs at
    the top of ``--out``."""
    monkeypatch.setenv("MLSCHED_WORKERS", "1")
    argv = ["experiment", "gadget", "--scale", "smoke", "--seeds", "1", "--no-strict"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["experiment"] == "gadget" and results["scale"] == "smoke"
    assert_claims_checked(results)
    assert set(results["summary"]) == set(SCHEMES)
    smoke = SCALE_SETTINGS["smoke"]
    utility = {n: results["summary"][n]["total_utility"] for n in SCHEMES}
    assert all(v > 0 for v in utility.values())
    sweep = results["utility_sweep"]
    assert sweep["jobs"] == list(smoke.jobs)
    at_default = sweep["jobs"].index(smoke.default_jobs)
    for n in SCHEMES:
        assert sweep[n]["mean"][at_default] == pytest.approx(utility[n])
    checks = {c["name"]: c for c in results["checks"]}
    assert len(checks) == 17 and all(c["detail"] for c in results["checks"])
    # Each claim decided for the paper's GADGET under its own (free) restarts; Q1 again
    # with a cluster's restart cost, rows of their own on runs of their own.
    assert results["restart_cost"]["restart_s"] == 0.0
    assert results["cluster_restart_cost"]["restart_s"] == DEFAULT_RESTART_S
    assert results["cluster_restart_cost"]["slot_share"] == DEFAULT_RESTART_S / 60.0
    cluster = [n for n in checks if n.endswith(" {a cluster's restart cost}")]
    assert len(cluster) == 4 and all(n.split(" {")[0] in checks for n in cluster)
    q1 = "Q1: gadget's total utility is at least each baseline's at every job count (mean)"
    charged = results["cluster_sweep"]["iterations"]
    for name, data in ((q1, sweep), (cluster_check(q1), charged)):
        assert checks[name]["passed"] == all(
            at_least(data[PAPER]["mean"][i], data[b]["mean"][i])
            for i in range(len(data["jobs"]))
            for b in BASELINES
        )
    assert results["restarts"]["utility"][PAPER] > 0  # it re-plans, and pays only there
    # Q1 under both readings of the budget (A3), each on its own runs.
    literal = results["utility_sweep_worker_slots"]
    assert literal["budget_mode"] == "worker_slots" and literal["jobs"] == list(smoke.jobs)
    assert checks[f"{q1}, worker-slot budgets (A3 literal)"]["passed"] == all(
        at_least(literal[PAPER]["mean"][i], literal[b]["mean"][i])
        for i in range(len(literal["jobs"]))
        for b in BASELINES
    )
    assert results["loads_worker_slots"][str(smoke.default_jobs)]["offered"] > 10
    # Q1 again at the paper's size (the smoke scale's stand-in for 50 servers, 200 slots).
    assert smoke.paper_point is not None
    servers, horizon, paper_counts = smoke.paper_point
    paper = results["paper_point"]
    assert (paper["servers"], paper["horizon"]) == (servers, horizon)
    literal_paper = paper["worker_slots"]
    assert literal_paper["jobs"] == sorted(paper_counts)
    name = f"{q1}, worker-slot budgets (A3 literal), at the paper's size"
    assert checks[name]["passed"] == all(
        at_least(literal_paper[PAPER]["mean"][i], literal_paper[b]["mean"][i])
        for i in range(len(paper_counts))
        for b in BASELINES
    )
    node = results["embedding"][PAPER]["node_scale"]
    assert node["scales"] == list(smoke.node_scales)
    ratios = node["embedded_ratio"]["mean"]
    assert all(0 <= r <= 1 for r in ratios)
    rises = all(b >= a - 0.01 for a, b in pairwise(ratios)) and ratios[-1] - ratios[0] > 0.01
    assert checks["Q2: gadget's embedded ratio rises with node (GPU) capacity"]["passed"] == rises
    stats = results["ratio"]["stats"]
    assert stats["instances"] + stats["skipped"] == len(results["ratio"]["rows"]) >= 1
    assert stats["strict"]["violating"] == 0 and stats["strict"]["max"] <= 1 + 1e-4
    for scheme in (PAPER,):
        assert results["replay"][scheme]["problems"] == 0
        assert results["replay"][scheme]["placements"] > 0
    assert all(c["passed"] for n, c in checks.items() if n.startswith("Q4"))
    assert results["default_point"]["jobs"] == smoke.default_jobs
    assert results["default_point"]["servable"] > 0
    assert sorted(p.name for p in tmp_path.glob("*.png")) == sorted(results["plots"])
    assert set(results["plots"]) == _PLOTS


def test_at_the_smoke_point_no_gpu_a_job_could_use_is_left_idle() -> None:
    """Every positive gain counts (the LP in tiers of gain magnitude), so at the smoke
    point (40 jobs on 6 servers over 20 slots: mean servable load 1.40 over seeds 0-7,
    ``common.loads``, so GPUs are contended) a backfill of the idle GPUs by least attained
    service (``idle_fill``) finds nothing to add: the paper's GADGET and the filled one
    score the same on each of seeds 0-7, and every allocation replays clean.

    A plausible bug that fails it: a floor under the gains (the policy once dropped gains
    below 1e-7, so most jobs at zero progress never started and the fill earned 2-3x
    more), or gains that underflow to 0.0 far below a sigmoid's rise."""
    smoke = SCALE_SETTINGS["smoke"]
    utility: dict[bool, list[float]] = {True: [], False: []}
    for seed in range(8):
        w = workload(seed, smoke.default_jobs, smoke.servers, smoke.horizon)
        for fill in (True, False):
            replay = Replay(w.cluster, {j.job_id: j for j in w.jobs})
            out = simulate(
                w,
                SimulationConfig("gadget", seed=seed, policy_options={"idle_fill": fill}),
                on_allocate=lambda _p, _v, a, replay=replay: replay.check(a),
            )
            utility[fill].append(summarize(out).total_utility)
            assert replay.report()["problems"] == 0, replay.report()
    assert utility[True] == pytest.approx(utility[False], rel=1e-12), utility


@pytest.mark.reproduction
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_default_scale_holds_q1_to_q4(tmp_path: Path) -> None:
    """``mlsched experiment gadget`` as documented (default scale, eight seeds, both budget
    readings, restarts free as the paper assumes, Q1 again with a cluster's). Required, for
    the paper's GADGET (every positive gain counted): Q1 and its widening lead with
    iteration budgets, Q1 at the paper's size, and under both readings there, Q2 in node
    capacity, Q3 (LP-RS-MDE >= 0.6 of the slot optimum on the mean in both modes, never
    below 1/(3 Gamma) in paper mode), Q4 (no violation in the independent replay), the
    widening lead with a cluster's restart cost, and no failed run. Reported, not required
    (docs/reproduction.md has the figures and causes): Q1 with worker-slot budgets at the
    default size (LAS leads from 100 jobs), the widening lead at the paper's size (a zero
    gap: the cluster is nearly idle, GADGET and DRF score alike), Q2 in link capacity
    (links do not bind here), and Q1 with a cluster's restart cost (re-planning every slot,
    GADGET pays about 740 half-slot restarts a run and trails at 50 and 100 jobs)."""
    results = run_experiment("gadget", out_dir=tmp_path, scale="default")
    assert_claims_checked(results)
    q1 = "Q1: gadget's total utility is at least each baseline's at every job count (mean)"
    q1b = "Q1: gadget's relative gap over the best baseline is non-decreasing in the job count"
    literal, paper = ", worker-slot budgets (A3 literal)", ", at the paper's size"
    required = {
        q1,
        q1b,
        q1 + paper,
        q1 + literal + paper,
        q1b + literal + paper,
        "Q2: gadget's embedded ratio rises with node (GPU) capacity",
        "Q3: LP-RS-MDE reaches >= 0.6 of the slot optimum on small instances, never below "
        "1/(3 Gamma) in paper mode",
        "Q4: no capacity violation and valid rings in every gadget run (independent replay)",
        cluster_check(q1b),
        "every run finished without error",
    }
    checks = {c["name"]: c for c in results["checks"]}
    assert required <= set(checks)
    assert [(n, checks[n]["detail"]) for n in sorted(required) if not checks[n]["passed"]] == []
    assert set(results["summary"]) == set(SCHEMES)


def test_the_replay_finds_overloaded_servers_and_links_and_broken_rings() -> None:
    """Q4 is not vacuous: the replay flags a server over its GPUs, a link over its Gbit/s
    and a ring that skips one of its servers, and passes a valid ring."""
    w = workload(0, 10, 6, 10)
    jobs = {j.job_id: j for j in w.jobs}
    ids = list(jobs)
    gpus = w.cluster.capacity[:, w.cluster.resource_names.index("gpu")]
    small, big, other = (int(s) for s in np.argsort(gpus)[[0, -1, -2]])
    replay = Replay(w.cluster, jobs)
    replay.check(Allocation(0, {ids[0]: Placement(((big, 1), (other, 1)), ring=(big, other))}))
    assert replay.report()["problems"] == 0 and replay.report()["multi_server"] == 1
    crowd = {j: Placement(((small, 1),)) for j in ids[: int(gpus[small]) + 1]}
    replay.check(Allocation(1, crowd))
    replay.check(Allocation(2, {ids[0]: Placement(((big, 1), (other, 1)), ring=(big,))}))
    report = replay.report()
    assert report["problems"] == 2, report
    assert "gpu" in report["examples"][0] and "ring" in report["examples"][1]
    heavy = Replay(w.cluster, {ids[0]: dataclasses.replace(jobs[ids[0]], hop_gbps=1e6)})
    heavy.check(Allocation(3, {ids[0]: Placement(((big, 1), (other, 1)), ring=(big, other))}))
    assert heavy.report()["problems"] >= 1 and "link" in heavy.report()["examples"][0]


def _sweep(ratios: list[float], axis: str = "link_scale") -> list[dict[str, object]]:
    other = "node_scale" if axis == "link_scale" else "link_scale"
    return [
        {"part": "capacity", "scheme": PAPER, "jobs": 50, "seed": seed, axis: scale, other: 1.0,
         "embedded_ratio": ratio, "allocated_ratio": ratio, "total_utility": 100.0}
        for scale, ratio in zip((0.25, 0.5, 1.0, 2.0), ratios, strict=True)
        for seed in range(2)
    ]  # fmt: skip


def test_q2_wants_a_rise_and_a_flat_sweep_fails_saying_so() -> None:
    """The paper's Figs. 5/6 rise with capacity: a flat sweep is not a reproduction."""
    flat = check_embedding(_sweep([0.118] * 4), "link_scale", 50, 2)
    assert not flat.passed and "flat: no rise" in flat.detail
    assert check_embedding(_sweep([0.05, 0.07, 0.12, 0.16]), "link_scale", 50, 2).passed
    falling = check_embedding(_sweep([0.05, 0.12, 0.08, 0.16]), "link_scale", 50, 2)
    assert not falling.passed  # a fall of 0.04 between neighbours


def test_q1_s_widening_gap_must_be_a_lead() -> None:
    """A deficit that shrinks (or stays) is not the paper's widening lead: Q1's gap check
    fails it; a lead that grows passes."""

    def rows(mine: tuple[float, float]) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for jobs, (g, b) in zip((50, 100), ((mine[0], 100.0), (mine[1], 100.0)), strict=True):
            for seed in range(2):
                out += [
                    {"part": "utility", "scheme": s, "jobs": jobs, "seed": seed,
                     "budget_mode": "iterations", "total_utility": v}
                    for s, v in ((PAPER, g), *((name, b) for name in BASELINES))
                ]  # fmt: skip
        return out

    assert not check_gap(rows((40.0, 45.0)), [50, 100]).passed  # -60 % -> -55 %
    assert check_gap(rows((101.0, 110.0)), [50, 100]).passed  # +1 % -> +10 %
