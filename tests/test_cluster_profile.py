"""`mlsched profile measure --controller`: cells measured through a running cluster's agents.

A real controller and two real agents (in two racks) on loopback; the profile command is
run as a user runs it. Plausible bugs this catches: a probe started while a job runs (two
jobs on one device) or while another probe runs, a cell without its shape or measured in the wrong one, the restart
never measured (the generation not stopped and resumed), the slot loop left held after a
probe (later jobs never run), a second run measuring again what the file has, and a probe
left in the executor (reported to the engine as a job it never admitted).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from mlsched.perfmodel.profile import Cell, load_profile
from mlsched.v1 import jobs_pb2
from tests.cluster_helpers import (
    agent_cmd,
    controller,
    finished,
    free_port_range,
    kill_tree,
    mlp_job,
    stub,
    wait_for,
)

pytestmark = pytest.mark.processes


def _profile(address: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable, "-m", "mlsched", "profile", "measure", "--controller", address,
        "--out", str(out), "--cells", "mlp:ps_async:1", "--steps", "10", "--warmup", "2",
        "--batch-size", "8", "--image-size", "8", "--probe-timeout", "60", "--probe-seconds", "1",
        *extra,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def test_a_profile_through_the_agents_measures_each_shape_and_leaves_the_cluster_usable(
    tmp_path: Path,
) -> None:
    ctl = controller(tmp_path, slot_seconds=2.0)
    procs = []
    try:
        for i in range(2):
            log = open(tmp_path / f"agent{i}.log", "wb")  # noqa: SIM115
            cmd = agent_cmd(
                ctl.address, f"agent{i}", tmp_path, free_port_range(), "--rack", f"r{i}"
            )
            procs.append(
                subprocess.Popen(
                    cmd,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, "OMP_NUM_THREADS": "1"},
                    start_new_session=True,
                )
            )
        wait_for(lambda: len(ctl.agents.alive()) == 2, 30, "both agents")
        client = stub(ctl.address)

        # A running job: no probe now (it would share its devices).
        long_job = mlp_job("long", units=100_000)
        client.SubmitJobs(jobs_pb2.SubmitJobsRequest(document=json.dumps([long_job])), timeout=10)
        wait_for(lambda: ctl.job("long").state == "running", 30, "the long job to run")
        with pytest.raises(grpc.RpcError) as refused:
            client.StartProbe(
                jobs_pb2.StartProbeRequest(job=json.dumps(mlp_job("p")), placement="host"),
                timeout=10,
            )
        assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert "long" in (refused.value.details() or "")
        client.CancelJob(jobs_pb2.CancelJobRequest(job_id="long"), timeout=10)
        wait_for(lambda: ctl.job("long").state == "cancelled", 30, "the cancel")
        wait_for(lambda: not any(a.tasks for a in ctl.agents.alive()), 30, "the tasks to stop")

        # One probe at a time: a second is refused while the first runs.
        job = json.dumps(mlp_job("p", arch="ps", requested_workers=1))
        probe = client.StartProbe(
            jobs_pb2.StartProbeRequest(job=job, placement="host", steps=5, seconds=0.5),
            timeout=10,
        )
        with pytest.raises(grpc.RpcError) as twice:
            client.StartProbe(
                jobs_pb2.StartProbeRequest(job=job, placement="racks", steps=5, seconds=0.5),
                timeout=10,
            )
        assert twice.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert "one at a time" in (twice.value.details() or "")
        get = jobs_pb2.GetProbeRequest(probe_id=probe.probe_id)
        wait_for(lambda: client.GetProbe(get, timeout=10).state != "running", 120, "the probe")
        done = client.GetProbe(get, timeout=10)
        assert done.state == "done", done.error
        assert [(e.workers, e.ps) for e in done.layout] == [(1, 1)]  # worker and PS, one host
        assert json.loads(done.cell_json)["placement"] == "host"

        out = tmp_path / "cluster-profile.json"
        first = _profile(ctl.address, out, "--placements", "racks,rack")
        assert first.returncode == 0, first.stdout + first.stderr
        assert "resumed run" in first.stdout  # progress, phase by phase
        # Two racks of one agent each: "rack" cannot be given, and says why.
        assert "skipped" in first.stdout and "idle agents in one rack" in first.stdout
        profile = load_profile(out)
        assert profile.machine["controller"] == ctl.address
        assert profile.machine["agents"] == "agent0,agent1"
        assert profile.settings["through"] == "agents"
        cells = {c.placement: c for c in profile.cells}
        assert set(cells) == {"racks"}
        for cell in [*cells.values(), Cell(**json.loads(done.cell_json))]:
            assert (cell.model, cell.kind, cell.workers) == ("mlp", "ps_async", 1)
            assert cell.iterations >= 8 and cell.compute_s and cell.comm_s
            assert cell.startup_s and cell.startup_s > 0.2  # processes start in seconds
            assert cell.restart_s and cell.restart_s > 0.2
            assert cell.checkpoint_save_s is None  # not separable through the agents
        assert not ctl.executor.jobs or all(j == "long" for j in ctl.executor.jobs)

        again = _profile(ctl.address, out, "--placements", "racks")
        assert again.returncode == 0, again.stdout + again.stderr
        assert "1 already measured, 0 to go" in again.stdout
        assert load_profile(out) == profile

        # The slot loop goes on after the probes: a job submitted now runs to the end.
        client.SubmitJobs(
            jobs_pb2.SubmitJobsRequest(document=json.dumps([mlp_job("after", units=20)])),
            timeout=10,
        )
        assert finished(ctl.address, "after", 60, "the job after the probes").state == "done"
    finally:
        for p in procs:
            kill_tree(p.pid)
        ctl.stop(stop_tasks=True)
