"""The Philly-scale benchmark end to end at a small size: generate, import and simulate
as separate processes, the figures read back, and the figure drawn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import philly_scale


def test_one_small_point_runs_every_step(tmp_path: Path) -> None:
    out, png = tmp_path / "r.json", tmp_path / "f.png"
    rc = philly_scale.main(
        [
            "--jobs",
            "150",
            "--gpus",
            "64",
            "--gpus-sweep",
            "32",
            "--sweep-jobs",
            "150",
            "--policies",
            "fifo",
            "--work",
            str(tmp_path / "w"),
            "--out",
            str(out),
            "--plot",
            str(png),
        ]
    )
    assert rc == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["jobs"], r["gpus"]) for r in rows] == [(150, 64), (150, 32)]
    for r in rows:
        assert r["completed"] == 150
        assert 0 < r["engine_s"] < r["wall_s"]
        assert r["peak_rss_mb"] > 20  # the child's own, not this process's
        assert r["slots"] > 0
    assert "import_s" in rows[0] and "goal_met" not in rows[0]  # goals are for 100,000
    # Fewer GPUs at the same jobs: the same work over a longer span.
    assert rows[1]["slots"] > rows[0]["slots"]
    assert png.stat().st_size > 10_000
    # The figure can be redrawn from the results alone.
    png.unlink()
    assert (
        philly_scale.main(
            ["--from", str(out), "--plot", str(png), "--gpus", "64", "--sweep-jobs", "150"]
        )
        == 0
    )
    assert png.exists()


def test_a_bad_out_stops_before_any_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(SystemExit):
        philly_scale.main(["--out", str(blocker / "sub" / "r.json"), "--jobs", "10"])
    assert "--out" in capsys.readouterr().err


def _figures(wall_s: float, rss_mb: float) -> dict[str, float]:
    return {"wall_s": wall_s, "peak_rss_mb": rss_mb}


@pytest.mark.parametrize(
    ("jobs", "policy", "res", "expected"),
    [
        (100_000, "fifo", _figures(59, 2000), {"goal_s": 60.0, "goal_met": True}),
        (100_000, "fifo", _figures(61, 2000), {"goal_s": 60.0, "goal_met": False}),
        (100_000, "drf", _figures(100, 2049), {"goal_s": 120.0, "goal_met": False}),
        (100_000, "tiresias", _figures(120, 2048), {"goal_s": 120.0, "goal_met": True}),
        (100_000, "fifo", {"error": "timed out"}, {}),  # no figures: no verdict
        (99_999, "fifo", _figures(1, 1), {}),  # goals are for 100,000
        (100_000, "gadget", _figures(1, 1), {}),  # no goal of its own
    ],
)
def test_the_goal_rows_say_met_only_within_both_the_time_and_the_memory_goal(
    jobs: int, policy: str, res: dict, expected: dict
) -> None:
    """The docs' goal rows come from ``goal``: met at or under both goals, missed over
    either, and absent where the run has no figures or no goal."""
    assert philly_scale.goal(jobs, policy, res) == expected
