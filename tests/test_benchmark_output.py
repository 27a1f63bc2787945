"""``--out`` of the benchmarks: a directory gets the benchmark's own file, a file is that
file, and a path that cannot be written fails before any run with a message naming
``--out`` (it used to raise IsADirectoryError after the runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.output import out_file

ROOT = Path(__file__).resolve().parent.parent


def test_a_directory_gets_the_benchmark_s_own_file(tmp_path: Path) -> None:
    parse = out_file("x.json")
    assert parse(str(tmp_path)) == tmp_path / "x.json"
    assert parse(f"{tmp_path}/new/") == tmp_path / "new" / "x.json"
    assert parse(str(tmp_path / "mine.json")) == tmp_path / "mine.json"


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", "--cases", "trace", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_python_m_benchmarks_writes_into_a_directory(tmp_path: Path) -> None:
    done = _bench("--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "sim_throughput.json").read_text())
    assert [r["policy"] for r in document["runs"]] == ["fifo"]


@pytest.mark.skipif(
    not Path("/proc/self").is_dir(), reason="no /proc: no path that nobody can make"
)
def test_an_unwritable_out_fails_before_the_runs(tmp_path: Path) -> None:
    done = _bench("--out", "/proc/no-such/x.json")
    assert done.returncode == 2
    assert "--out /proc/no-such/x.json: cannot make /proc/no-such" in done.stderr
    assert "[bench]" not in done.stderr  # nothing ran
