"""The reproduction table (``mlsched reproduce``, docs/reproduction.md): each claim's verdict
follows its checks, decided for the paper's algorithm alone; our additions never pass a
claim, only name what meets it. Results are written by hand here; the experiments' own
smoke tests assert that every claim's check exists in their results.json
(``tests/claims_helpers.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mlsched.cli import main
from mlsched.experiments.base import addition_check
from mlsched.experiments.claims import CLAIMS, PAPERS, Claim, claims_of
from mlsched.experiments.costs import cluster_check
from mlsched.experiments.reproduction import (
    README_BEGIN,
    README_END,
    count_verdicts,
    readme_figure,
    render,
    table_counts,
    verdicts,
    with_readme_figure,
)

H1 = "H1: OASiS has the highest total utility at every job count"
FLOOR = "OASiS + utility floor + level plans (ours)"


def _results(experiment: str, checks: list[tuple[str, bool]]) -> dict[str, Any]:
    return {
        "experiment": experiment,
        "scale": "smoke",
        "seeds": 2,
        "wall_seconds": 1.0,
        "restart_cost": {"restart_s": 0.0, "why": "free, as the paper assumes (spec)"},
        "checks": [{"name": n, "passed": ok, "detail": f"figures of {n}"} for n, ok in checks],
    }


def _verdict(results: dict[str, Any], check: str) -> str:
    return next(v.text for v in verdicts(results) if v.claim.check == check)


@pytest.mark.parametrize(
    ("paper", "ours", "expected"),
    [
        (True, False, "reproduced"),
        (True, True, "reproduced"),
        (False, True, f"reproduced only with {FLOOR}"),
        (False, False, "not reproduced"),
    ],
)
def test_a_claim_is_decided_by_the_paper_s_algorithm(
    paper: bool, ours: bool, expected: str
) -> None:
    results = {"oasis": _results("oasis", [(H1, paper), (addition_check(H1, FLOOR), ours)])}
    assert _verdict(results, H1) == expected


def test_claims_without_results_or_without_their_check_are_not_run() -> None:
    rows = {v.claim.check: v for v in verdicts({"oasis": _results("oasis", [])})}
    assert rows[H1].verdict == "not run" and "no check named" in rows[H1].detail
    pdors = next(c.check for c in claims_of("000") if c.check)
    assert rows[pdors].verdict == "not run" and rows[pdors].detail == "no results"


def test_every_claim_is_in_the_table_once_untested_ones_with_a_reason() -> None:
    ids = [(c.spec, c.id) for c in CLAIMS]
    assert len(ids) == len(set(ids))
    assert {c.spec for c in CLAIMS} == set(PAPERS)
    assert all(c.untested for c in CLAIMS if not c.check)
    with pytest.raises(ValueError, match="a check or why"):
        Claim("001", "x", "Fig. 1", "says", check="a", untested="b")
    text = render({}, "mlsched reproduce --scale smoke")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == len(CLAIMS) + 1  # the header


def test_the_table_shows_the_figures_and_the_cause_of_what_failed() -> None:
    claim = next(c for c in CLAIMS if c.check == H1)
    other = "a check of our own"
    results = {"oasis": _results("oasis", [(H1, False), (other, True)])}
    text = render(results, "mlsched reproduce --scale smoke")
    assert f"Measured: figures of {H1}" in text
    assert f"Cause: {claim.cause}." in text
    assert f"- passed: {other}" in text  # a check no claim names is listed, not dropped
    assert "Restart cost of the verdicts: none (free, as the paper assumes (spec))" in text
    assert "No second cost: no run restarts a job." in text
    assert "`mlsched experiment oasis --scale smoke --seeds 2`" in text
    # A reproduced claim shows no cause.
    ok = render({"oasis": _results("oasis", [(H1, True)])}, "x")
    assert claim.cause not in ok


@pytest.mark.parametrize(("charged", "shown"), [(True, "holds"), (False, "does not hold")])
def test_a_claim_shows_whether_it_holds_with_a_cluster_s_restart_cost(
    charged: bool, shown: str
) -> None:
    """The verdict stays the paper's (its own restart assumption); the row of the same
    check on runs charging a cluster's cost is its own column and line, with its cost,
    never a verdict, and never listed among the checks of our own."""
    results = {"oasis": _results("oasis", [(H1, True), (cluster_check(H1), charged)])}
    results["oasis"]["cluster_restart_cost"] = {
        "restart_s": 30.0, "slot_seconds": 60.0, "slot_share": 0.5, "why": "a cluster's",
    }  # fmt: skip
    (row,) = [v for v in verdicts(results) if v.claim.check == H1]
    assert row.verdict == "reproduced" and row.cluster is charged
    text = render(results, "x")
    (line,) = [ln for ln in text.splitlines() if ln.startswith("| OASiS") and "| H1 |" in ln]
    assert line.endswith(f"| {shown} | **reproduced** |")
    assert f"  - With a cluster's restart cost: {shown}." in text
    assert "a cluster's: 30 s per restart, 0.5 of the 60-s slot (a cluster's)" in text
    for listed in ("- passed: ", "- **failed**: "):  # not listed as a check of our own
        assert listed + cluster_check(H1) not in text
    assert table_counts(text) == count_verdicts(verdicts(results))


def test_reproduce_reuses_results_of_its_scale_and_writes_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--reuse`` with every experiment's results.json present runs nothing: the table
    comes from the files, and results of another scale are not mixed in."""
    for _, experiment in PAPERS.values():
        (tmp_path / experiment).mkdir()
        checks = [(c.check, True) for c in CLAIMS if c.experiment == experiment and c.check]
        res = _results(experiment, checks)
        res["checks"].append(
            {"name": "every run finished without error", "passed": True, "detail": "none"}
        )
        if experiment == "dps":
            res["scale"] = "default"  # another scale: would be rerun, so leave it out
            continue
        (tmp_path / experiment / "results.json").write_text(json.dumps(res))
    table = tmp_path / "table.md"
    argv = ["reproduce", "--scale", "smoke", "--out", str(tmp_path), "--reuse"]
    assert main([*argv, "--experiments", "oasis,pdors,hetero,gadget", "--table", str(table)]) == 0
    text = table.read_text()
    tested = [c for c in CLAIMS if c.check]
    dps = [c for c in tested if c.experiment == "dps"]
    assert text.count("| **reproduced** |") == len(tested) - len(dps)
    assert text.count("| **not run** |") == len(dps)
    assert "wrote" in capsys.readouterr().out
    assert main([*argv, "--experiments", "nope"]) == 2


ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_s_figure_is_the_totals_of_docs_reproduction_md() -> None:
    """Regenerating the table without the README, or editing either by hand, fails here."""
    table = (ROOT / "docs" / "reproduction.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    counts = table_counts(table)
    assert sum(counts.values()) == len(CLAIMS)
    assert f"\n{readme_figure(counts)}\n" in readme
    assert with_readme_figure(readme, readme_figure(counts)) == readme


def test_the_totals_read_back_from_a_table_are_those_it_was_written_with() -> None:
    results = {"oasis": _results("oasis", [(H1, False), (addition_check(H1, FLOOR), True)])}
    rows = verdicts(results)
    assert table_counts(render(results, "x")) == count_verdicts(rows)
    assert count_verdicts(rows)["reproduced only with"] == 1


@pytest.mark.parametrize(
    ("counts", "figure"),
    [
        (
            {"reproduced": 1, "not tested": 2},
            "Of the five papers' 3 claims, 1 is reproduced by the paper's algorithm as the "
            "paper defines it and 2 are not tested",
        ),
        ({"not run": 4}, "Of the five papers' 4 claims, 4 are not run"),
    ],
)
def test_the_figure_names_every_verdict_with_its_count(counts: dict[str, int], figure: str):
    assert readme_figure(counts).startswith(figure + " (")


def test_reproduce_writes_the_totals_into_the_readme_between_its_markers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for _, experiment in PAPERS.values():
        (tmp_path / experiment).mkdir()
        checks = [(c.check, False) for c in CLAIMS if c.experiment == experiment and c.check]
        (tmp_path / experiment / "results.json").write_text(
            json.dumps(_results(experiment, checks))
        )
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n{README_BEGIN}\nold figure\n{README_END}\nafter\n")
    table = tmp_path / "table.md"
    argv = ["reproduce", "--scale", "smoke", "--out", str(tmp_path), "--reuse"]
    assert main([*argv, "--table", str(table), "--readme", str(readme)]) == 0
    text = readme.read_text()
    figure = readme_figure(table_counts(table.read_text()))
    assert text == f"# x\n\nbefore\n{README_BEGIN}\n{figure}\n{README_END}\nafter\n"
    assert f"{len(CLAIMS)} claims" in figure and "not reproduced" in figure
    # Without both markers the command refuses before running anything, naming the flag.
    capsys.readouterr()
    readme.write_text(f"# x\n{README_BEGIN}\n")
    assert main([*argv, "--table", str(table), "--readme", str(readme)]) == 2
    assert "--readme" in capsys.readouterr().err
    assert readme.read_text() == f"# x\n{README_BEGIN}\n"
    assert main([*argv, "--readme", str(tmp_path / "missing.md")]) == 2


def test_a_claim_tested_on_a_stand_in_says_so_in_its_row() -> None:
    """A claim whose paper's data is not public is tested on a stand-in: its row names it
    (a reader of the table alone must not take it for the paper's data); no other row
    does."""
    stood = [c for c in CLAIMS if c.stand_in]
    assert stood and all(c.check for c in stood)
    results = {PAPERS[c.spec][1]: _results(PAPERS[c.spec][1], [(c.check, True)]) for c in stood}
    text = render(results, "x")
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    for c in stood:
        (row,) = [r for r in rows if f"| {c.id} |" in r and c.says in r]
        assert f"stand-in: {c.stand_in}" in row
        assert f"  - Stand-in: {c.stand_in}." in text
    assert sum("stand-in:" in r for r in rows) == len(stood)
