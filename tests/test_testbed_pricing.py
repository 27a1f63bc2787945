"""Prices on the testbed: a real controller (gRPC on loopback) under a pricing policy quotes
each job as it arrives; ``mlsched submit --wait`` shows the quote and the user's answer,
``mlsched status`` the prices, answers, revenue and acceptance."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from cluster_helpers import controller, mlp_job, wait_for

from mlsched.cli import main
from mlsched.controller.agents import AgentInfo


def test_submit_wait_shows_each_quote_and_answer_and_status_the_revenue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fixed prices of 0.5 per unit (``bfp`` with ``prices``): a one-worker job whose user's
    budget is 10 accepts, one whose budget is 0.1 declines and leaves, one without a
    valuation accepts any price. The agent is registered in-process: pricing happens at the
    slot boundary, before anything is launched, so no agent process is needed."""
    ctl = controller(tmp_path, policy="bfp", policy_options={"prices": 0.5}, slot_seconds=1.0)
    try:
        ctl.register_agent(
            AgentInfo(agent_id="a0", host="127.0.0.1", capacity={"gpu": 2, "cpu": 4})
        )
        jobs = [mlp_job("rich", valuation=10.0), mlp_job("poor", valuation=0.1), mlp_job("anyone")]
        spec = tmp_path / "jobs.yaml"
        spec.write_text(yaml.safe_dump({"jobs": jobs}))
        assert main(["submit", str(spec), "--wait", "--controller", ctl.address]) == 0
        lines = {line.split(":")[0]: line for line in capsys.readouterr().out.splitlines()}
        assert "quoted 0.5 (worker 0.5, PS 0 per unit): accepted, admitted in slot" in lines["rich"]
        assert (
            "quoted 0.5 (worker 0.5, PS 0 per unit): declined, rejected: user declined"
            in lines["poor"]
        )
        assert "accepted, admitted" in lines["anyone"]
        wait_for(lambda: bool(ctl.cluster_status().quotes), 10, "the controller's totals")
        assert main(["status", "--controller", ctl.address]) == 0
        out = capsys.readouterr().out
        assert "prices: revenue 1 (profit: no cost model), 2 of 3 quotes accepted (67%)" in out
        rows = {
            line.split()[0]: line.split()
            for line in out.splitlines()
            if line.startswith(("rich", "poor"))
        }
        assert rows["rich"][6:9] == ["0.5", "0.5", "accepted"]
        assert rows["poor"][4:8] == ["no", "0.5", "0", "declined"]
    finally:
        ctl.stop()
