"""``mlsched experiment hetero`` (spec 002 §5): its outputs and checks at smoke scale, the
ordering that holds at the smoke point over eight seeds, and (``make reproduce``) the
default scale."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mlsched.experiments import run_experiment
from mlsched.experiments.hetero.common import (
    BASELINES,
    SCALE_SETTINGS,
    SCHEMES,
    VARIANT,
    Item,
    run_item,
)
from mlsched.experiments.pool import Runner
from tests.claims_helpers import assert_claims_checked


def test_smoke_scale_writes_results_checks_and_plots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is tested is the checking, not the claims (one seed is too few): the summary
    has every scheme with its weighted completion time, each verdict follows the numbers,
    the alpha sweep and the batch comparison stay out of the summary, PNGs at the top."""
    monkeypatch.setenv("MLSCHED_WORKERS", "1")
    results = run_experiment("hetero", out_dir=tmp_path, scale="smoke", seeds=1)
    assert_claims_checked(results)
    assert json.loads((tmp_path / "results.json").read_text())["experiment"] == "hetero"
    assert set(results["summary"]) == set(SCHEMES)
    wct = {n: results["summary"][n]["weighted_completion_time"] for n in SCHEMES}
    assert all(v > 0 for v in wct.values())
    checks = {c["name"]: c for c in results["checks"]}
    assert len(checks) == 7 and all(c["detail"] for c in checks.values())
    lowest = "hetero has the lowest total weighted completion time (mean over seeds)"
    assert checks[lowest]["passed"] == all(wct["hetero"] < wct[b] for b in BASELINES)
    # The compacted offsets (ours) a row of their own, decided on their own figures.
    ours = checks[f"{lowest} [A_online + compacted offsets (ours)]"]
    assert ours["passed"] == all(wct["hetero-compact"] < wct[b] for b in BASELINES)
    claim = next(c for n, c in checks.items() if "30%" in n and "(ours)" not in n)
    flow = {n: results["summary"][n]["weighted_from_arrival"] for n in SCHEMES}
    assert claim["passed"] == all(
        wct["hetero"] <= 0.7 * wct[b] and flow["hetero"] <= 0.7 * flow[b] for b in BASELINES
    )
    # sum w (c - a) is sum w c less the same sum w a for every scheme.
    arrival = {n: wct[n] - flow[n] for n in SCHEMES}
    assert max(arrival.values()) == pytest.approx(min(arrival.values()))
    (batch,) = results["batches"]
    fig8 = "A_maxweight schedules more weight than Jain et al.'s greedy (Fig. 8)"
    assert checks[fig8]["passed"] == (batch["maxweight"] > batch["greedy"])
    assert 0 < batch["maxweight"] <= batch["offered_weight"]
    assert 0 < batch["greedy"] <= batch["offered_weight"]
    assert set(results["alpha_sweep"]) == {"2", "4"}
    assert results["alpha_sweep"]["4"]["mean"] == pytest.approx(wct["hetero"])
    assert sorted(p.name for p in tmp_path.glob("*.png")) == sorted(results["plots"])
    assert {"fig2_weighted_completion.png", "fig8_maxweight_vs_greedy.png"} <= set(results["plots"])


def test_at_the_smoke_point_compacted_hetero_has_the_lowest_weighted_completion_time() -> None:
    """Figs. 2/5's ordering at the experiment's smoke point (12 jobs on 8 servers, arrivals
    over 20 one-hour slots: the smallest point where the jobs' ideal bundles cannot all run
    at once, the paper's resource shortage), seeds 0-7. A_online with the spec's compacted
    offsets (the testbed setting) is measured at 8.1M on average against 2D-LAS's 10.0M,
    the best baseline, and is lower than every baseline on 8/8 seeds. A_online as the paper
    has it (windows at alpha tau_i) is not at this point (11.2M; above 2D-LAS on 7/8
    seeds): the reproduction test asserts what holds for it at the default point."""
    scale = SCALE_SETTINGS["smoke"]
    names = (VARIANT, *BASELINES)
    items = [
        Item("schemes", seed, name, SCHEMES[name][0], tuple(SCHEMES[name][1].items()), scale)
        for name in names
        for seed in range(8)
    ]
    with Runner() as runner:
        runs = runner.map(run_item, items, lambda n: None)
    assert all(isinstance(r, dict) for r in runs)
    wct = {n: np.zeros(8) for n in names}
    for item, run in zip(items, runs, strict=True):
        wct[item.name][item.seed] = run["weighted_completion_time"]  # type: ignore[index]
    for b in BASELINES:
        assert wct[VARIANT].mean() < wct[b].mean() and (wct[VARIANT] < wct[b]).sum() >= 7, (
            b,
            wct[VARIANT],
            wct[b],
        )


@pytest.mark.reproduction
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_default_scale_holds_its_ordering(tmp_path: Path) -> None:
    """``mlsched experiment hetero`` as documented (default scale, eight seeds). Required:
    no failed run; with compacted offsets, a total weighted completion time below every
    baseline's on at least 7 of 8 seeds; as the paper has it, below FIFO's and DRF's on at
    least 7 of 8. Reported, not required (measured: docs/algorithms/hetero.md): the
    ordering check on the means, which for hetero as the paper has it against 2D-LAS and
    the AntMan-style baseline is inside the spread (3-5 % lower on the mean, lower on 5/8
    seeds); the paper's >= 30 % margin; A_maxweight against Jain et al.'s greedy."""
    results = run_experiment("hetero", out_dir=tmp_path, scale="default")
    checks = {c["name"]: c for c in results["checks"]}
    assert checks["every run finished without error"]["passed"]
    assert set(results["summary"]) == set(SCHEMES)
    cuts = {
        scheme: results["reductions"][scheme]["weighted_completion_time"]
        for scheme in ("hetero", VARIANT)
    }
    wins = {(scheme, b): cuts[scheme][b]["wins"] for scheme in cuts for b in BASELINES}
    assert all(wins[(VARIANT, b)] >= 7 for b in BASELINES), wins
    assert wins[("hetero", "fifo")] >= 7 and wins[("hetero", "drf")] >= 7, wins
