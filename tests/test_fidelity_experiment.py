"""The fidelity experiment's smaller form, for real: four MLP jobs of three kinds under two
policies on an emulated cluster with stand-in device slices, against the simulator with the
profile measured in the same slices before and after the real runs (about 5 minutes;
`make soak`).

It reports the experiment's own goals (docs/fidelity.md): per-job median error <= 10 %,
each policy's mean JCT within 10 %, the same ranking; it asserts the regression check, whose
bounds come from recorded repeats of this form (``fidelity/noise.py``). Plausible bugs
this catches: a profile measured in other shares than the agents give (start-up off by a
third), a ring measured under one launcher while the cluster runs one per host, tasks outside their slices (their
speed then depends on the other jobs), the simulator numbering the servers otherwise than
the real run (another placement, another queue), start-up or restarts not charged, and the
wire time of a job spread over hosts left out.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from mlsched.testbed.emulated.netns import missing_requirements
from mlsched.trainers.cpu_share import cpu_control

pytestmark = [pytest.mark.processes, pytest.mark.slow, pytest.mark.soak]

_CONTROL, _WHY = cpu_control()
_MISSING = [*missing_requirements(), *([] if _CONTROL else [_WHY])]


def _run(out: Path) -> tuple[str, dict]:
    """One smoke run: its report (with the profile it measured) and its results."""
    from mlsched.perfmodel.profile import load_profile
    from mlsched.profiling.cli import profile_table
    from mlsched.testbed.fidelity.experiment import run_fidelity
    from mlsched.testbed.fidelity.report import fidelity_report

    results = run_fidelity(out=out, scale="smoke", say=lambda s: None)
    profile = load_profile(Path(results["profile"]["path"]))
    report = f"{fidelity_report(results)}\n\nprofile:\n{profile_table(profile)}"
    print(report)
    written = json.loads((out / "results.json").read_text())
    assert written["profile"]["cells"] == 3
    assert all(Path(p).stat().st_size > 5000 for p in written["plots"])
    ablation = {row["variant"]: row for row in written["ablation"]}
    main = ablation["simulator: profile"]["median_job_error"]
    bare = ablation["simulator: profile, no start-up or restart cost"]["median_job_error"]
    assert bare > main, report  # start-up is most of what the profile adds here
    return report, written


@pytest.mark.skipif(bool(_MISSING), reason="; ".join(_MISSING) or "ok")
@pytest.mark.timeout(1200)  # about 5 minutes: a profile of 3 cells (at once) twice, 2 real runs
def test_the_simulator_predicts_the_testbed_within_the_noise(tmp_path: Path) -> None:
    """One run: the goals (per-job median error <= 10 %, each policy's mean within 10 %,
    the same ranking) are reported, and what must hold is the regression check
    (``fidelity/noise.py``): each of its statistics within the 99 % prediction interval
    that the recorded repeats of this form on this machine give (tests/data/fidelity-smoke),
    the ranking where the measured means are apart beyond their spread. One run's four jobs
    a policy do not hold the 10 % goals on this shared 2-core machine; the planted
    regressions each fail the check on every recorded run (test_fidelity_noise.py). The
    run is simulated with its profile and again with its own measured costs."""
    from mlsched.perfmodel.profile import load_profile
    from mlsched.testbed.fidelity.noise import (
        Recording,
        check_run,
        load_recordings,
        recorded_bounds,
    )

    recorded = Path(__file__).parent / "data" / "fidelity-smoke"
    bounds = recorded_bounds(load_recordings(recorded))
    report, result = _run(tmp_path / "run")
    missed = [c for c in result["checks"] if not c["passed"]]
    if missed:
        names = "; ".join(f"{c['name']}: {c['detail']}" for c in missed)
        warnings.warn(f"the smaller form missed a goal in this run: {names}", stacklevel=1)
    profile = load_profile(tmp_path / "run" / "profile.json")
    checks = check_run(Recording("this run", result, profile), bounds)
    print("\n".join(f"[{'PASS' if c.passed else 'FAIL'}] {c.name}: {c.detail}" for c in checks))
    failed = [c for c in checks if not c.passed]
    assert not failed, f"past the noise's bounds ({bounds}): {failed}\n\n{report}"
