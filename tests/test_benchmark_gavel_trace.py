"""benchmarks/gavel_trace.py as a user runs it: with Gavel's trace beside the repository,
without Gavel installed (it must say how to install it and still compare), and paired with
Gavel where it is installed beside the repository."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.gavel_trace import DEFAULT_GAVEL, DEFAULT_TRACE, explain

ROOT = Path(__file__).resolve().parent.parent
needs_trace = pytest.mark.skipif(not DEFAULT_TRACE.is_file(), reason=f"no trace at {DEFAULT_TRACE}")


def run(tmp_path: Path, *args: str) -> tuple[dict, str]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gavel_trace", "--repeat", "1", "--out", f"{tmp_path}/",
         *args],
        cwd=ROOT, check=True, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    return json.loads((tmp_path / "gavel_trace.json").read_text()), done.stdout + done.stderr


@needs_trace
def test_without_gavel_it_says_how_to_install_it_and_compares_with_its_readme(
    tmp_path: Path,
) -> None:
    result, text = run(tmp_path, "--policies", "gavel-fifo", "--gavel", str(tmp_path / "none"))
    assert "git clone https://github.com/stanford-futuredata/gavel" in text
    assert result["gavel_paired"] is False
    assert result["gavel"]["avg_jct_h"] == 3.06  # the README's figure
    mine = result["runs"][0]["gavel-fifo"]
    assert mine["completed"] == 5000
    assert mine["avg_jct_from_arrival_h"] == pytest.approx(3.06, rel=0.05)
    assert any("gavel-fifo" in line for line in result["explanation"])


@pytest.mark.skipif(
    not (DEFAULT_GAVEL / "scheduler" / "scripts" / "drivers").is_dir()
    or not DEFAULT_TRACE.is_file(),
    reason=f"Gavel is not installed at {DEFAULT_GAVEL}",
)
def test_paired_with_gavel_its_figures_are_read_from_its_own_run(tmp_path: Path) -> None:
    result, _ = run(tmp_path, "--policies", "gavel-fifo")
    gavel = result["runs"][0]["gavel"]
    assert result["gavel_paired"] is True
    assert gavel["avg_jct_h"] == pytest.approx(3.06, abs=0.01)
    assert set(gavel["gpu_rounds_by_type"]) == {"k80", "p100", "v100"}
    assert result["ratio_to_gavel"]["gavel-fifo"] > 0


def test_the_explanation_splits_the_gap_into_rounding_and_semantics() -> None:
    fifo = {"avg_jct_h": 3.9, "avg_jct_from_arrival_h": 4.0}
    emulated = {"avg_jct_h": 3.0, "avg_jct_from_arrival_h": 3.1}
    lines = explain({"fifo": fifo, "gavel-fifo": emulated}, {"avg_jct_h": 3.0})
    text = "\n".join(lines)
    assert "+1.00 h" in text  # fifo from Gavel
    assert "0.10 h is measuring from the arrival second" in text
    assert "semantics +0.90 h" in text
    assert "+0.10 h" in text  # what gavel-fifo leaves
