"""A user's quotas after a job has ended, over real gRPC with a real agent and a real
training process (tests/test_users.py holds the rest of users and quotas, without agents)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
import yaml
from cluster_helpers import agents, controller, mlp_job, wait_for

from mlsched.controller.status import FINAL_STATES
from mlsched.net.auth import ClientAuth, client_channel
from mlsched.net.users import Quota, add_user
from mlsched.v1 import jobs_pb2, jobs_pb2_grpc

pytestmark = pytest.mark.processes  # a training process, run to its end

OPERATOR = "operator-token"


def _submit(address: str, token: str, *jobs: dict) -> list[str]:
    stub = jobs_pb2_grpc.JobServiceStub(client_channel(address, ClientAuth(token)))
    request = jobs_pb2.SubmitJobsRequest(document=yaml.safe_dump(list(jobs)))
    return list(stub.SubmitJobs(request, timeout=10).job_ids)


def test_a_job_that_ended_frees_its_quota(tmp_path: Path) -> None:
    """A user at both quotas submits again once a job has finished: a done job holds no
    GPUs and no place in the queue (the plausible bug: finished jobs counted forever)."""
    users = tmp_path / "users.yaml"
    alice = add_user(users, "alice", quota=Quota(gpus=2, queued=1))
    ctl = controller(tmp_path, token=OPERATOR, users_file=str(users), slot_seconds=2.0)
    try:
        assert _submit(ctl.address, alice, mlp_job("a1", units=4)) == ["a1"]  # 2 GPUs at most
        with pytest.raises(grpc.RpcError) as refused:
            _submit(ctl.address, alice, mlp_job("a2"))
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "quota." in (refused.value.details() or "")
        with agents(ctl.address, tmp_path, 1, "--token", OPERATOR):
            wait_for(lambda: ctl.job("a1").state in FINAL_STATES, 120, "a1 to end")
        assert ctl.job("a1").state == "done"
        # Both quotas free again: 2 GPUs and a place in the queue.
        assert _submit(ctl.address, alice, mlp_job("a2")) == ["a2"]
    finally:
        ctl.stop()
