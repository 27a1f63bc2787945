"""``mlsched experiment hetero`` (spec 002 §5): its outputs and checks at smoke scale, an
ordering that holds at the smoke point over eight seeds, and (``make reproduce``) the
default scale."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mlsched.engine.simulator import DEFAULT_RESTART_S
from mlsched.experiments import run_experiment
from mlsched.experiments.hetero.checks import check_completed
from mlsched.experiments.hetero.common import (
    BASELINES,
    PRIMARY,
    SCALE_SETTINGS,
    SCHEMES,
    VARIANT,
    Item,
    held,
    ideal_gpus,
    run_item,
    servers_for,
    worker_cap,
    workload,
)
from mlsched.experiments.hetero.held import check_caps, check_types
from mlsched.experiments.hetero.servers import check_servers
from mlsched.experiments.pool import Runner
from mlsched.scheduler.baselines.common import fixed_counts
from mlsched.scheduler.placement import can_ever_run
from tests.claims_helpers import assert_claims_checked

LOWEST = "hetero has the lowest total weighted completion time (mean over seeds)"
COMPACT = "[A_online + compacted offsets (ours)]"


def test_smoke_scale_writes_results_checks_and_plots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is tested is the checking, not the claims (one seed is too few): the summary
    (PS jobs at the default capacity) has every scheme, each verdict follows the figures of
    its points, every run ends with every job done, PNGs at the top."""
    monkeypatch.setenv("MLSCHED_WORKERS", "1")
    results = run_experiment("hetero", out_dir=tmp_path, scale="smoke", seeds=1)
    assert_claims_checked(results)
    assert json.loads((tmp_path / "results.json").read_text())["experiment"] == "hetero"
    assert set(results["summary"]) == set(SCHEMES)
    # The verdicts charge AMB-15's 0.1 slot per restart, to every scheme alike; the claims
    # again with a cluster's restart cost, on runs of their own where a run restarted.
    assert results["restart_cost"]["slot_share"] == pytest.approx(0.1)
    assert results["cluster_restart_cost"]["restart_s"] == DEFAULT_RESTART_S
    checks = {c["name"]: c for c in results["checks"]}
    assert len(checks) == 18 and all(c["detail"] for c in checks.values())
    assert sum(n.endswith("{a cluster's restart cost}") for n in checks) == 3
    paper = {(r["arch"], r["scheme"]): r for r in results["runs"] if r["part"] == "schemes"}
    charged = [r for r in results["runs"] if r["part"] == "cluster"]
    assert len(charged) == sum(arch != "mix" for arch, _ in paper)
    again = []
    for r in charged:
        twin = paper[r["arch"], r["scheme"]]
        if twin["restarts"] == 0:  # copied: the same run under any restart cost
            assert r["weighted_completion_time"] == twin["weighted_completion_time"]
        else:  # run again: every restart (a re-layout or a resume) now costs 30 s, not 360
            assert r["restart_s"] % DEFAULT_RESTART_S == 0 and twin["restart_s"] % 360 == 0
            again.append(r["restart_s"] != twin["restart_s"])
    assert again and any(again)  # the preempting baselines restart, and pay another cost
    # PS and ring parts at the smoke capacity, the mix beside.
    assert set(results["parts"]) == {"ps@0.35", "ring@0.35", "mix@0.35"}
    for scheme, name in ((PRIMARY, LOWEST), (VARIANT, f"{LOWEST} {COMPACT}")):
        lowest = all(
            part["schemes"][scheme]["weighted_completion_time"]
            < part["schemes"][b]["weighted_completion_time"]
            for part in results["parts"].values()
            if part["arch"] != "mix"
            for b in BASELINES
        )
        assert checks[name]["passed"] == lowest, (name, checks[name]["detail"])
    ps = results["parts"]["ps@0.35"]["schemes"]
    # sum w (c - a) is sum w c less the same sum w a for every scheme.
    arrival = {n: ps[n]["weighted_completion_time"] - ps[n]["weighted_from_arrival"] for n in ps}
    assert max(arrival.values()) == pytest.approx(min(arrival.values()))
    # Runs complete: every job of every run done, so the objective counts completions.
    assert checks["every job completed within the run's bound"]["passed"]
    assert all(r["unfinished"] == 0 and r["completed"] == r["jobs"] for r in results["runs"])
    (batch,) = results["batches"]
    fig8 = "A_maxweight schedules more weight than Jain et al.'s greedy (Fig. 8)"
    assert checks[fig8]["passed"] == (batch["maxweight"] > batch["greedy"])
    assert 0 < batch["maxweight"] <= batch["offered_weight"]
    assert 0 < batch["greedy"] <= batch["offered_weight"]
    # Figs. 11-12: the same batch at F = 2.5 beside the default F = 10; its check follows.
    (other,) = results["weight_sweep"]
    assert (other["f"], other["jobs"], other["servers"]) == (2.5, batch["jobs"], batch["servers"])
    figs = checks[
        "A_maxweight's total weight grows as F shrinks, falls with H, grows with the jobs"
    ]
    assert ("by F (as claimed)" in figs["detail"]) == (other["maxweight"] > batch["maxweight"])
    assert not figs["passed"]  # one capacity and one batch size: H and the jobs are not swept
    # Fig. 4: A_online at F = 2.5 beside the default 10, PS and ring; its check follows.
    assert set(results["f"]) == {"ps", "ring"} and set(results["f"]["ps"]) == {"2.5", "10"}
    assert results["f"]["ps"]["10"] == pytest.approx(ps[PRIMARY]["weighted_completion_time"])
    grows = all(v["10"] > v["2.5"] for v in results["f"].values())
    assert checks["a larger F gives a larger objective for A_online (Fig. 4)"]["passed"] == grows
    # Fig. 7: A_online's own seconds at 3 and 6 PS jobs on the same servers.
    runtime = results["runtime"]
    assert [r["jobs"] for r in runtime] == [3, 6] and all(r["mean_s"] > 0 for r in runtime)
    fig7 = checks["A_online's running time grows with the jobs but stays below 2 minutes (Fig. 7)"]
    assert fig7["passed"] == (runtime[1]["mean_s"] > runtime[0]["mean_s"])
    # Figs. 9-10: A_online held to each forced type and cap, the free run its schemes run.
    types, caps = results["types"], results["caps"]
    assert list(types) == ["v100x4", "k80x1", "free"] and list(caps) == ["4", "free"]
    free = ps[PRIMARY]["weighted_completion_time"]
    assert types["free"]["mean"] == caps["free"]["mean"] == pytest.approx(free)
    forced = [types[t]["mean"] for t in ("v100x4", "k80x1")]
    fig9 = checks[
        "forced onto one worker type, the objective varies strongly between types; "
        "A_online, free to choose, is best (Fig. 9)"
    ]
    assert fig9["passed"] == (max(forced) >= 1.3 * min(forced) and free < min(forced))
    fig10 = checks["the weighted completion time decreases as the worker count grows (Fig. 10)"]
    assert not fig10["passed"]  # one cap beside D_j: too few points to call a trend
    # Figs. 3 and 6: the same capacity on .16xlarge, both sizes, .8xlarge: H grows.
    for arch, rows in results["servers"].items():
        assert [r["sizes"] for r in rows] == ["16x", "mixed", "8x"]
        assert rows[0]["servers"] < rows[1]["servers"] < rows[2]["servers"]
        assert rows[1]["mean"] == pytest.approx(
            results["parts"][f"{arch}@0.35"]["schemes"][PRIMARY]["weighted_completion_time"]
        )
    grows = all(r[0]["mean"] < r[1]["mean"] < r[2]["mean"] for r in results["servers"].values())
    h = "the objective grows with H at roughly constant total capacity (Figs. 3, 6)"
    assert checks[h]["passed"] == grows
    # alpha = 1 and alpha = 4 apart, for PS and ring jobs.
    assert set(results["alpha"]) == {"ps", "ring"} and set(results["alpha"]["ps"]) == {"1", "4"}
    assert results["alpha"]["ps"]["4"] == pytest.approx(ps[PRIMARY]["weighted_completion_time"])
    assert sorted(p.name for p in tmp_path.glob("*.png")) == sorted(results["plots"])
    assert "fig2_weighted_completion_ps.png" in results["plots"]


@pytest.mark.parametrize("capacity", [0.2, 0.35, 0.5])
def test_the_cluster_holds_the_stated_share_of_the_ideal_demand(capacity: float) -> None:
    """§5's resource shortage: the cluster's GPUs are the stated share of every job's ideal
    bundle (min(D_j, 30) v100x4 workers), one server more would overshoot it, and the
    baselines' ideal counts can run on the empty cluster."""
    w = workload(0, 10, 150, "ps", capacity, 64)
    gpus = float(w.cluster.capacity[:, w.cluster.resource_names.index("gpu")].sum())
    demand = ideal_gpus(w)
    assert capacity * demand <= gpus < capacity * demand + 16  # the largest server: 16 GPUs
    assert servers_for(capacity, demand) == len(w.cluster.servers)
    cap = worker_cap(w)
    assert all(can_ever_run(j, w.cluster, min(j.worker_cap, cap)) for j in w.jobs)
    assert w.horizon_slots == 64 * 150


def test_at_the_smoke_point_compacted_offsets_beat_the_paper_s_windows() -> None:
    """Our compacted offsets against A_online as the paper has it, ring jobs at the smoke
    point (6 jobs, T = 150, capacity 0.35; ring jobs because their rounds cost a tenth of
    the PS jobs', under the same window rule), seeds 0-7: a compacted window starts right
    after the committed jobs, never later than the paper's alpha tau_i, so the same rounds
    finish no later; the paper's windows of 256-512 slots, which these jobs' durations
    need, start at 1024-2048. Required: lower on the mean and on at least 7 of 8 seeds. A
    plausible bug that fails it: compaction that still waits for alpha tau_i, or that
    overlaps committed jobs and so postpones them."""
    scale = SCALE_SETTINGS["smoke"]
    names = (PRIMARY, VARIANT)
    items = [
        Item("schemes", "ring", 0.35, seed, n, SCHEMES[n][0], tuple(SCHEMES[n][1].items()), scale)
        for n in names
        for seed in range(8)
    ]
    with Runner() as runner:
        runs = runner.map(run_item, items, lambda n: None)
    wct = {n: np.zeros(8) for n in names}
    for item, run in zip(items, runs, strict=True):
        assert isinstance(run, dict) and run["unfinished"] == 0, run
        wct[item.name][item.seed] = run["weighted_completion_time"]
    paper, ours = wct[PRIMARY], wct[VARIANT]
    assert ours.mean() < paper.mean() and (ours < paper).sum() >= 7, (ours, paper)


@pytest.mark.reproduction
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_default_scale_completes_every_run(tmp_path: Path) -> None:
    """``mlsched experiment hetero`` as documented (default scale, eight seeds, 0.1 slot
    per restart as AMB-15 says, the claims again with a cluster's cost). Required: no failed
    run, every job of every run completed within the bound, every claim's check present,
    Fig. 8 (A_maxweight above the fixed-configuration greedy: 1.11x and 1.20x at 20 and 40
    jobs, on 7 and 8 of 8 seeds), Fig. 7 (A_online's seconds grow with the jobs, under 2
    minutes), Fig. 9 (held to one worker type: the worst type 2.34x the best, A_online free
    to choose below every one) and Fig. 10 (the objective falls at every larger worker cap,
    1 / 2 / 4 / 8 / D_j). Reported, not required (measured, docs/algorithms/hetero.md): the ordering,
    the >= 30 % claim and the preemption claim, which A_online and the baselines do not
    meet at the paper's capacities and T, Figs. 3 and 6 (H changes nothing until the
    servers lose PS types) and Figs. 4 and 11-12 (F changes nothing here)."""
    results = run_experiment("hetero", out_dir=tmp_path, scale="default")
    assert_claims_checked(results)
    checks = {c["name"]: c for c in results["checks"]}
    for name in (
        "A_maxweight schedules more weight than Jain et al.'s greedy (Fig. 8)",
        "A_online's running time grows with the jobs but stays below 2 minutes (Fig. 7)",
        "forced onto one worker type, the objective varies strongly between types; "
        "A_online, free to choose, is best (Fig. 9)",
        "the weighted completion time decreases as the worker count grows (Fig. 10)",
    ):
        assert checks[name]["passed"], checks[name]["detail"]
    assert checks["every run finished without error"]["passed"]
    assert checks["every job completed within the run's bound"]["passed"], checks[
        "every job completed within the run's bound"
    ]["detail"]
    assert set(results["summary"]) == set(SCHEMES)
    assert len(results["parts"]) == 2 * 3 + 1


def test_ideal_counts_are_the_cap_and_a_drawn_count_is_not() -> None:
    """AMB-13: the fixed-count baselines run min(D_j, bound) workers, none drawn (the drawn
    rule stays the default of spec 001's FIFO); a bad rule is refused by name."""
    w = workload(0, 10, 150, "ps", 0.35, 64)
    drawn_differs = False
    for job in w.jobs:
        ideal, ps = fixed_counts(job, 3, max_workers=12, ps_rule="needed", worker_rule="ideal")
        assert ideal == min(12, job.worker_cap) and ps == job.ps_needed(ideal)
        drawn_differs |= fixed_counts(job, 3, max_workers=12)[0] != ideal
    assert drawn_differs
    with pytest.raises(ValueError, match="worker_rule"):
        fixed_counts(w.jobs[0], 0, worker_rule="most")


def test_a_run_left_unfinished_fails_the_completion_check() -> None:
    runs = [
        {"scheme": "fifo", "arch": "ps", "capacity": 0.2, "seed": 1, "unfinished": 0, "slots": 900},
        {"scheme": "drf", "arch": "ring", "capacity": 0.5, "seed": 4, "unfinished": 2, "slots": 9600},
    ]  # fmt: skip
    check = check_completed(runs, 9600)
    assert not check.passed and "2 jobs unfinished in 1 runs (e.g. drf, ring at 0.5" in check.detail
    assert check_completed(runs[:1], 9600).passed


def _held(means: dict[str, float]) -> dict[str, dict[str, Any]]:
    return {k: {"mean": v, "by_seed": {0: v}} for k, v in means.items()}


def test_fig9_wants_a_strong_spread_and_the_free_choice_best() -> None:
    assert check_types(_held({"a": 100.0, "b": 140.0, "free": 90.0})).passed
    assert not check_types(_held({"a": 100.0, "b": 120.0, "free": 90.0})).passed  # 1.2x
    assert not check_types(_held({"a": 100.0, "b": 140.0, "free": 100.0})).passed  # a tie
    assert not check_types(_held({"a": 100.0, "b": None, "free": 90.0})).passed  # type: ignore[dict-item]


def test_fig10_wants_a_fall_at_every_larger_cap() -> None:
    assert check_caps(_held({"1": 300.0, "2": 200.0, "free": 100.0})).passed
    assert not check_caps(_held({"1": 300.0, "2": 300.0, "free": 100.0})).passed
    assert not check_caps(_held({"1": 300.0, "2": 100.0, "free": 200.0})).passed


def test_servers_of_one_size_hold_about_the_same_gpus_and_only_the_types_they_can() -> None:
    s = SCALE_SETTINGS["smoke"]
    demand = ideal_gpus(workload(0, s.jobs, s.horizon, "ps", 1.0, s.run_factor))
    gpus = {}
    for sizes in ("16x", "mixed", "8x"):
        w = workload(0, s.jobs, s.horizon, "ps", 0.35, s.run_factor, sizes)
        gpus[sizes] = sum(srv.capacity["gpu"] for srv in w.cluster.servers)
        assert gpus[sizes] >= 0.35 * demand
        held_ps = set(w.cluster.types.ps) if w.cluster.types else set()
        assert all(set(j.ps_types) <= held_ps for j in w.jobs)
    assert max(gpus.values()) <= 1.25 * min(gpus.values())
    eight = workload(0, s.jobs, s.horizon, "ps", 0.35, s.run_factor, "8x")
    assert "ps10" not in eight.jobs[0].ps_types and "ps6" in eight.jobs[0].ps_types
    assert eight.jobs[0].ps == eight.jobs[0].ps_types["ps6"]  # the largest it holds


def test_fig3_6_want_growth_at_every_larger_h() -> None:
    rows = [{"sizes": z, "servers": h, "mean": m} for z, h, m in
            (("16x", 30.0, 1.0), ("mixed", 40.0, 2.0), ("8x", 60.0, 3.0))]  # fmt: skip
    assert check_servers({"ps": rows, "ring": rows}).passed
    flat = [dict(r, mean=1.0) for r in rows]
    assert not check_servers({"ps": rows, "ring": flat}).passed


def test_a_held_workload_keeps_one_type_or_a_few_workers() -> None:
    s = SCALE_SETTINGS["smoke"]
    w = workload(0, s.jobs, s.horizon, "ps", s.default_capacity, s.run_factor)
    one = held(w, "worker_type", "k80x1")
    assert all(list(j.worker_types) == ["k80x1"] for j in one.jobs)
    assert all(j.compute_s == j.compute_s_by_type["k80x1"] for j in one.jobs)
    few = held(w, "worker_cap", 2)
    assert [j.worker_cap for j in few.jobs] == [min(2, j.worker_cap) for j in w.jobs]
    with pytest.raises(ValueError, match="hold"):
        held(w, "gpu", 1)
