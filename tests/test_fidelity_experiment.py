"""The fidelity experiment's smaller form, for real: four MLP jobs of three kinds under two
policies on an emulated cluster with stand-in device slices, against the simulator with the
profile measured in the same slices before and after the real runs (about 5 minutes;
`make soak`).

It reports the experiment's own goals (docs/fidelity.md): per-job median error <= 10 %,
each policy's mean JCT within 10 %, the same ranking; it asserts them at the regression
bounds (25 % per job, 40 % for a policy's mean of four jobs), which one run holds on this
machine. Plausible bugs this catches: a profile measured in other shares than the agents give (start-up off by a third), a ring measured
under one launcher while the cluster runs one per host, tasks outside their slices (their
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
def test_the_simulator_predicts_the_testbed_within_the_goals(tmp_path: Path) -> None:
    """One run: the goals (per-job median error <= 10 %, each policy's mean within 10 %,
    the same ranking) are reported, and what must hold is the regression bounds
    (``fidelity.report.REGRESSION``: 25 % for the per-job median over 8 job runs,
    ``REGRESSION_POLICY``: 40 % for a policy's mean of 4 jobs and the ranking's ties). One
    run's four jobs a policy do not hold a mean within 10 % on this shared 2-core machine:
    runs that met the goals when repeated missed them with fifo's mean 19 % under, then
    17.6 % over, and las2d's 12.3 % over, 10.8 % under and 25 % over (its jobs take 24 s,
    where one 10-s slot is 40 %); a start-up measurement moved from 14.9 to 20.0 s within
    minutes. A second run to pool (7 minutes more) did not fit CI's budget. A regression
    still fails it: without start-up and restart costs the per-job median is 36-58 % off;
    the wrong slices or another server numbering move a job's JCT by its whole start-up or
    queue wait. The goals themselves are the full experiment's (docs/fidelity.md)."""
    from mlsched.testbed.fidelity.report import regression_checks

    report, result = _run(tmp_path / "run")
    missed = [c for c in result["checks"] if not c["passed"]]
    if missed:
        names = "; ".join(f"{c['name']}: {c['detail']}" for c in missed)
        warnings.warn(f"the smaller form missed a goal in this run: {names}", stacklevel=1)
    failed = [c for c in regression_checks(result) if not c.passed]
    assert not failed, f"past the regression bound: {failed}\n\n{report}"
