"""``scripts/gpu_check.py --cpu-check``: the GPU acceptance script's whole path on the CPU
(stand-in GPUs, small models), as ``make test`` runs it; on a GPU machine the same script
runs CUDA (docs/benchmarks.md, GPU check)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.processes
@pytest.mark.timeout(300)
def test_the_gpu_check_runs_every_part_on_the_cpu(tmp_path: Path) -> None:
    """About 35 s: five trainer runs (each a torch start) and a controller with an agent
    training two jobs to done. No faster test runs the script itself, whose parts break
    silently when a module it imports moves (it runs where no test suite does: on a GPU
    machine, with its own torch); in make test rather than soak because the issue that
    asked for the script asks for its check there."""
    done = subprocess.run(
        [sys.executable, "scripts/gpu_check.py", "--cpu-check", "--out", str(tmp_path),
         "--slot-seconds", "5", "--testbed-deadline", "120"],
        cwd=ROOT, capture_output=True, text=True, timeout=280,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    runs = {r["run"]: r for r in report["trainers"]["result"]}
    for kind in ("ps async", "ps sync", "ddp/nccl torchrun"):
        assert any(kind in name and r["ok"] for name, r in runs.items()), (kind, runs)
    testbed = report["testbed"]["result"]
    assert testbed["all_done"], testbed["table"]
    assert all(j["measured_iteration_s"] > 0 for j in testbed["jobs"])
    assert "gpu-agent" in testbed["table"] and "done" in testbed["table"]  # mlsched status
    assert "gpu_check: all parts passed" in done.stdout
