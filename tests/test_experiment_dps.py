"""``mlsched experiment dps`` (spec 004 §5): its outputs and checks at smoke scale, the
orderings that hold at the smoke point over eight seeds, and (``make reproduce``) the
default scale."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from mlsched.experiments import run_experiment
from mlsched.experiments.dps.common import SCALE_SETTINGS, SCHEMES, Item, run_item, workload
from mlsched.experiments.dps.diagnosis import diagnose, offer_facts
from mlsched.experiments.dps.profit import WIDE_MARGIN
from mlsched.scheduler.dps.posted import Offer
from tests.claims_helpers import assert_claims_checked


def test_smoke_scale_writes_results_checks_and_plots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is tested is the checking, not the claims (one seed is too few): the summary
    has every scheme with its profit, each verdict follows the numbers beside it, the
    sweeps stay out of the summary and the PNGs lie at the top of --out."""
    monkeypatch.setenv("MLSCHED_WORKERS", "1")
    results = run_experiment("dps", out_dir=tmp_path, scale="smoke", seeds=1)
    assert_claims_checked(results)
    assert json.loads((tmp_path / "results.json").read_text())["experiment"] == "dps"
    assert set(results["summary"]) == set(SCHEMES)
    for row in results["summary"].values():
        assert row["profit"] == row["revenue"] and row["quotes"] > 0
    assert all(not k.startswith(("delta", "theta")) for k in results["summary"])
    checks = {c["name"]: c for c in results["checks"]}
    assert len(checks) == 14 and all(c["detail"] for c in checks.values())
    # Fig. 4: the N sweep, its detail from the regret curves at each N (here 0.5 N and N).
    rows = results["jobs_sweep"]["rows"]
    assert [r["jobs"] for r in rows] == [150, 300] and all(r["seeds"] == 1 for r in rows)
    fig4 = checks["(v) early on the regret is smaller for fewer jobs; later more jobs make it "
                  "fall faster"]  # fmt: skip
    assert fig4["passed"] == (
        rows[0]["early_regret"] < rows[1]["early_regret"]
        and rows[0]["late_fall"] < rows[1]["late_fall"]
    )
    # Placement is non-preemptive: no run restarts, so one restart cost stands for both.
    assert checks["no run restarts a job (placement is non-preemptive, so restart costs "
                  "change nothing)"]["passed"]  # fmt: skip
    assert results["cluster_restart_cost"] is None
    # The paper's radii (eq. 13, in units) for DPS and its variants; spec A10's normalised
    # radii (ours) a row of their own for (i) and (ii).
    assert results["schemes"]["dps"]["options"] == {"radius_scale": "literal"}
    assert results["schemes"]["dps-simple"]["options"] == {"radius_scale": "literal"}
    ours = [n for n in checks if n.endswith("[DPS + normalised radii (spec A10, ours)]")]
    assert len(ours) == 4
    profit = {n: results["summary"][n]["profit"] for n in SCHEMES}
    assert checks["(i) DPS earns more than DPS-simple"]["passed"] == (
        profit["dps"] > profit["dps-simple"]
    )
    assert checks["(i) DPS earns more than DPS-simple [DPS + normalised radii (spec A10, ours)]"][
        "passed"
    ] == (profit["dps-normalized"] > profit["dps-simple"])
    assert checks[f"(i) DPS earns at least {WIDE_MARGIN:g}x Random"]["passed"] == (
        profit["dps"] >= WIDE_MARGIN * profit["random-price"]
    )
    regret = results["regret"]
    assert regret["final_regret"] == pytest.approx(profit["bfp"] - profit["dps"])
    assert checks["(ii) DPS's regret vs BFP: exploration hump, a zero crossing, ends <= ~0"][
        "passed"
    ] == (
        regret["regret_at_explore_end"] > 0
        and regret["zero_crossing_slot"] is not None
        and regret["final_regret"] <= 0.05 * profit["bfp"]
    )
    delta = results["sweeps"]["delta"]
    assert delta["values"] == list(SCALE_SETTINGS["smoke"].delta_scales)
    assert delta["regret"][delta["values"].index(1.0)] == pytest.approx(regret["final_regret"])
    bfp = results["bfp"][0]
    assert bfp["engine_profit"] == pytest.approx(bfp["replay_profit"])  # the replay is exact here
    assert sorted(p.name for p in tmp_path.glob("*.png")) == sorted(results["plots"])
    assert {"fig2_regret_over_time.png", "fig3_profit_over_time.png"} <= set(results["plots"])
    # The shifted market: DPS and BFP again with the second half's values x 4, beside the
    # stationary runs (the schemes part's); the table's ratio is the profits'.
    shifted = {r["value_shift"]: r for r in results["value_shift"]}
    assert set(shifted) == {1.0, 4.0}
    assert shifted[1.0]["dps_profit"] == pytest.approx(profit["dps"])
    assert shifted[4.0]["dps_over_bfp"] == pytest.approx(
        shifted[4.0]["dps_profit"] / shifted[4.0]["bfp_profit"]
    )
    assert shifted[4.0]["bfp_profit"] != pytest.approx(profit["bfp"])  # another market
    why = results["diagnosis"]
    assert set(why["mean_price"]) == set(SCHEMES)
    assert why["bfp_over_random"] == pytest.approx(profit["bfp"] / profit["random-price"])
    assert 0.0 <= why["capacity_bound_share"]["worker"] <= 1.0
    assert why["dps_over_bfp"] == pytest.approx(profit["dps"] / profit["bfp"])
    assert why["capacity_threshold"]["worker"] is None or why["capacity_threshold"]["worker"] > 0
    assert (
        f"{why['bfp_over_random']:.2f}x Random"
        in (checks[f"(i) DPS earns at least {WIDE_MARGIN:g}x Random"]["detail"])
    )


def test_a_value_shift_scales_only_the_second_half_s_valuations() -> None:
    s = SCALE_SETTINGS["smoke"]
    base = workload(s, 0)
    shifted = workload(dataclasses.replace(s, value_shift=4.0), 0)
    for a, b in zip(base.jobs, shifted.jobs, strict=True):
        assert (a.job_id, a.arrival_slot) == (b.job_id, b.arrival_slot)
        late = a.arrival_slot >= s.horizon // 2
        assert b.valuation == pytest.approx(a.valuation * (4.0 if late else 1.0))


def test_the_offer_facts_count_each_phase_and_role_once() -> None:
    """Zero-price offers are counted apart and priced nothing; a job without PSs adds no PS
    price; arrivals with no offer are left out; the capacity bound is counted per role."""
    offers = [
        Offer("a", 0, "explore", n_workers=2, n_ps=1, accepted=True),
        Offer("b", 1, "full", n_workers=2, n_ps=1, worker_price=0.9),
        Offer(
            "c",
            2,
            "exploit",
            n_workers=2,
            n_ps=1,
            worker_price=0.6,
            ps_price=0.2,
            worker_term="demand",
            ps_term="capacity",
            accepted=False,
        ),
        Offer(
            "d",
            3,
            "exploit",
            n_workers=1,
            n_ps=0,
            worker_price=0.4,
            worker_term="capacity",
            accepted=True,
        ),
        Offer("e", 4, "priced", n_workers=1, n_ps=1, worker_price=0.2, ps_price=0.6),
    ]
    facts = offer_facts(offers)
    assert (facts["priced"], facts["exploit"], facts["zero_price"]) == (3, 2, 1)
    assert facts["zero_price_accepted"] == 1
    assert facts["capacity_bound"] == {"worker": 1, "ps": 1}
    assert facts["exploit_by_role"] == {"worker": 2, "ps": 1}  # d has no PS
    assert facts["mean_price"] == {"worker": pytest.approx(0.4), "ps": pytest.approx(0.4)}
    record = {"scheme": "dps", "seed": 0, "profit": 1.0, "offers": facts}
    why = diagnose([record])
    assert why["capacity_bound_share"] == {"worker": 0.5, "ps": 1.0}
    assert "bfp_over_random" not in why  # no BFP or Random run to compare


def test_a_runs_offer_facts_match_its_quotes() -> None:
    """On a real run every quote the engine put to a user is one priced or zero-price
    offer, and DPS's exploration admits exactly the zero-price quotes it made."""
    scale = SCALE_SETTINGS["smoke"]
    run = run_item(Item("schemes", 0, "dps", "dps", (), scale))
    assert isinstance(run, dict)
    facts = run["offers"]
    assert facts["priced"] + facts["zero_price"] == run["summary"]["quotes"]
    assert facts["exploit"] == facts["priced"] > 0 and facts["zero_price"] > 0


def test_at_the_smoke_point_dps_beats_top_and_pa_runs_shorter_than_rs() -> None:
    """Spec 004 checks (i, third part) and (iii) at the experiment's smoke point (300 jobs
    on 4 servers with 2 worker and 1 PS type: 100-300 offers per type, the smallest
    setting the experiment runs), seeds 0-7. Measured: DPS 643 against the TOP stand-in
    360 on average, ahead on 8/8 seeds; PA's first completed jobs take 243 slots against
    RS's 332, lower on 8/8. (At the default scale DPS vs TOP is inside the spread between
    seeds: ratio 1.04, ahead on 5/8; docs/algorithms/dps.md.) The paper's other orderings
    of (i) do not hold in spec 004's model; the reproduction test names them."""
    scale = SCALE_SETTINGS["smoke"]
    runs = {
        (name, seed): run_item(
            Item("schemes", seed, name, SCHEMES[name][0], tuple(SCHEMES[name][1].items()), scale)
        )
        for name in ("dps", "top", "rs")
        for seed in range(8)
    }
    assert all(isinstance(r, dict) for r in runs.values())
    dps = np.array([runs[("dps", s)]["profit"] for s in range(8)])  # type: ignore[index]
    top = np.array([runs[("top", s)]["profit"] for s in range(8)])  # type: ignore[index]
    assert dps.sum() >= top.sum() and (dps >= top).sum() >= 7, (dps, top)
    for seed in range(8):
        pa, rs = runs[("dps", seed)]["runtimes"], runs[("rs", seed)]["runtimes"]  # type: ignore[index]
        n = min(len(pa), len(rs))
        assert n > 10 and sum(pa[:n]) < sum(rs[:n]), (seed, sum(pa[:n]), sum(rs[:n]))


@pytest.mark.reproduction
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_default_scale_holds_its_claims(tmp_path: Path) -> None:
    """``mlsched experiment dps`` as documented (default scale, eight seeds, the paper's
    radii, unit values U[0.2, 0.5]). Required: (iii) PA below RS, (i) DPS at least the TOP
    stand-in (ratio 1.19 on 8/8 seeds measured) and no failed run. Reported, not required,
    with the evidence in docs/algorithms/dps.md: (i) DPS above DPS-simple and at least 1.5x
    Random, (ii) the regret's zero crossing, (iv) the U shapes (the δ U held, at the edge
    of the spread: 1,474 at the default against 1,456 at 2x). In spec 004's model they do
    not hold (measured at this scale: DPS 4,703, DPS-simple 5,510, Random 3,334, BFP 6,178;
    regret 24 % of BFP's profit at the horizon, positive on 8/8 seeds; regret falls as θ
    shrinks): zero prices teach only runtimes, which the index ignores while C μ >> n Q
    (A4: the capacity bound would set a price from about 24,000 jobs per type, against
    800); the worker and PS arms each maximise their own revenue from one joint budget
    (A3)."""
    results = run_experiment("dps", out_dir=tmp_path, scale="default")
    checks = {c["name"]: c for c in results["checks"]}
    assert_claims_checked(results)
    required = (
        "(iii) PA's total runtime is below DPS-RS's",
        "(i) DPS earns at least the TOP stand-in",
        "no run restarts a job (placement is non-preemptive, so restart costs change nothing)",
        "every run finished without error",
    )
    assert [(n, checks[n]["detail"]) for n in required if not checks[n]["passed"]] == []
    assert set(results["summary"]) == set(SCHEMES)
    # The documented cause of (i)'s first ordering: no DPS price here is set by the capacity
    # bound, the only term the runtimes learnt by exploration enter (0.0 % measured).
    share = results["diagnosis"]["capacity_bound_share"]
    assert share["worker"] < 0.01 and share["ps"] < 0.01, share
    limit = results["diagnosis"]["capacity_threshold"]
    assert all(v > results["diagnosis"]["expected_per_type"] for v in limit.values()), limit
