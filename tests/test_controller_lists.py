"""The controller's job list under load: made once per short interval, never hiding a
submission or a cancel (a real controller on loopback, no agents)."""

from __future__ import annotations

import time
from pathlib import Path

import yaml
from cluster_helpers import controller, mlp_job

from mlsched.controller.server import LIST_REUSE_S


def test_a_job_list_is_reused_briefly_but_never_hides_a_change(tmp_path: Path) -> None:
    ctl = controller(tmp_path)
    try:
        ctl.submit(yaml.safe_dump([mlp_job("a")]))
        first = ctl.jobs()
        assert [j.job_id for j in first] == ["a"]
        first.clear()  # a caller's copy: the list kept for reuse is not touched
        assert [j.job_id for j in ctl.jobs()] == ["a"]
        ctl.submit(yaml.safe_dump([mlp_job("b")]))  # within the reuse interval
        assert [j.job_id for j in ctl.jobs()] == ["a", "b"]
        status = ctl.cancel("b")
        assert status.state == "cancelling"
        # The engine hears of the cancel at its next boundary; until then the list is made
        # anew after the cancel (not the one from before it), and it keeps both jobs.
        assert [j.job_id for j in ctl.jobs()] == ["a", "b"]
        time.sleep(LIST_REUSE_S + 0.1)
        assert [j.job_id for j in ctl.jobs()] == ["a", "b"]
        single = ctl.job("a")  # a single job is never answered from the list
        assert single.job_id == "a"
    finally:
        ctl.stop()
