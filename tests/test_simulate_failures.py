"""`mlsched simulate` over several policies: one policy's error does not hide the others.

Plausible bugs this catches: a policy's error ending the command with nothing reported for
the policies that ran (the whole comparison lost to one bug), a failure exiting 0 or left
out of the files, the policies that ran written where a single policy's run goes, and the
spec 003 baselines run with a placement that ignores the links on a workload whose jobs
reserve hop bandwidth (the engine then refuses their allocations).
"""

from __future__ import annotations

import json
from pathlib import Path

from mlsched.cli import main
from mlsched.core import Admission, Allocation, JobSpec, Placement
from mlsched.scheduler.policy import Policy
from mlsched.scheduler.registry import register, ring_placement_for
from mlsched.scheduler.view import ClusterView
from mlsched.workloads import load_workload


@register
class _Overbook(Policy):
    """Places every job on server 0 with more workers than it has: the engine refuses it."""

    name = "test-overbook"
    description = "test: an allocation that never fits"

    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        return Admission.admit(reason="test policy")

    def allocate(self, slot: int, view: ClusterView) -> Allocation:
        return Allocation(slot, {j: Placement(((0, 1000),)) for j in view})


_SMALL = ["--workload", "oasis-paper", "--jobs", "10", "--horizon", "30", "-W", "servers=4"]


def test_a_failing_policy_is_reported_beside_the_others(tmp_path: Path, capsys) -> None:
    out = tmp_path / "cmp"
    args = ["simulate", *_SMALL, "--policy", "fifo,test-overbook,drf", "--out", str(out)]
    assert main(args) == 1
    printed = capsys.readouterr().out
    table = printed.split("test-overbook: FAILED")[0]
    assert "fifo " in table and "drf " in table  # both ran, in the table
    assert "test-overbook: FAILED, no results: policy 'test-overbook'" in printed
    assert (out / "fifo" / "summary.json").exists() and (out / "drf" / "summary.json").exists()
    assert not (out / "test-overbook").exists()
    (failed,) = json.loads((out / "failed.json").read_text())
    assert failed["policy"] == "test-overbook" and "slot" in failed["failed"]
    assert main(["simulate", *_SMALL, "--policy", "test-overbook", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document == [{"policy": "test-overbook", "failed": failed["failed"]}]


def test_spec_003_baselines_reserve_hops_by_themselves_where_jobs_reserve_them(capsys) -> None:
    gadget = load_workload("gadget-paper", seed=1, jobs=150, horizon=50, options={"servers": 10})
    assert any(j.hop_gbps for j in gadget.jobs)
    for name in ("fifo", "drf", "tiresias"):
        assert ring_placement_for(name, {}, gadget.jobs) == {"placement": "ring"}
        assert ring_placement_for(name, {"placement": "default"}, gadget.jobs) is None
    assert ring_placement_for("oasis", {}, gadget.jobs) is None  # has no ring placement
    oasis = load_workload("oasis-paper", seed=1, jobs=10, horizon=30, options={"servers": 4})
    assert ring_placement_for("fifo", {}, oasis.jobs) is None  # no job reserves hops
    # The point where fifo's default placement over-reserved a link at slot 15.
    point = ["--workload", "gadget-paper", "-W", "servers=10", "-W", "horizon=50"]
    args = ["simulate", *point, "--jobs", "150", "--seed", "1", "--policy", "drf,fifo"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "drf, fifo: ring placement" in printed and "FAILED" not in printed
