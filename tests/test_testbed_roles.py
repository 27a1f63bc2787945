"""Two roles on the controller: users submit and query, agents register and heartbeat, and
an agent's credential speaks for that agent only. Real controller, real agent process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cluster_helpers import controller, kill_tree, stub, wait_for

from mlsched.controller.server import Controller
from mlsched.net.auth import ClientAuth, agent_token, client_channel
from mlsched.net.ports import free_port_range
from mlsched.testbed.local import agent_command
from mlsched.v1 import agent_pb2, agent_pb2_grpc, jobs_pb2

USER = "user-token-1"
SECRET = "agent-secret-1"


@pytest.fixture()
def ctl(tmp_path: Path) -> Iterator[Controller]:
    c = controller(tmp_path, token=USER, agent_secret=SECRET)
    yield c
    c.stop(stop_tasks=True)


def agent_stub(address: str, token: str) -> agent_pb2_grpc.AgentServiceStub:
    return agent_pb2_grpc.AgentServiceStub(client_channel(address, ClientAuth(token)))


def register(address: str, token: str, name: str) -> agent_pb2.RegisterResponse:
    request = agent_pb2.RegisterRequest(name=name, host="127.0.0.1")
    request.capacity.amounts.update({"cpu": 2.0})
    resp: agent_pb2.RegisterResponse = agent_stub(address, token).Register(request, timeout=5)
    return resp


def code_of(call: object) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as info:
        call()  # type: ignore[operator]
    return info.value.code()


def test_an_agent_credential_speaks_for_its_agent_only(ctl: Controller) -> None:
    a1 = agent_token(SECRET, "a1")
    assert register(ctl.address, a1, "a1").agent_id == "a1"
    beat = agent_stub(ctl.address, a1).Heartbeat
    assert not beat(agent_pb2.HeartbeatRequest(agent_id="a1"), timeout=5).reregister
    # a1's credential cannot register or heartbeat as another agent (reading its tasks).
    assert code_of(lambda: register(ctl.address, a1, "a2")) == grpc.StatusCode.PERMISSION_DENIED
    assert (
        code_of(lambda: beat(agent_pb2.HeartbeatRequest(agent_id="a2"), timeout=5))
        == grpc.StatusCode.PERMISSION_DENIED
    )


@pytest.mark.parametrize(
    "token",
    [USER, agent_token("another-secret", "a1"), "agent:a1:" + "0" * 64, "agent:a1", "agent::x"],
)
def test_users_and_forged_credentials_cannot_act_as_agents(ctl: Controller, token: str) -> None:
    assert code_of(lambda: register(ctl.address, token, "a1")) == grpc.StatusCode.UNAUTHENTICATED


def test_agents_cannot_act_as_users(ctl: Controller) -> None:
    jobs = stub(ctl.address, agent_token(SECRET, "a1"))
    call = lambda: jobs.ListJobs(jobs_pb2.ListJobsRequest(), timeout=5)  # noqa: E731
    assert code_of(call) == grpc.StatusCode.UNAUTHENTICATED
    assert stub(ctl.address, USER).ListJobs(jobs_pb2.ListJobsRequest(), timeout=5).jobs == []


def test_a_real_agent_joins_with_its_own_credential(ctl: Controller, tmp_path: Path) -> None:
    token_file = tmp_path / "a1.token"
    token_file.write_text(agent_token(SECRET, "a1") + "\n")
    token_file.chmod(0o600)
    cmd = agent_command(ctl.address, "a1", tmp_path, free_port_range())
    proc = subprocess.Popen(
        [*cmd, "--token-file", str(token_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        status = stub(ctl.address, USER).GetClusterStatus

        def joined() -> bool:
            agents = status(jobs_pb2.GetClusterStatusRequest(), timeout=5).agents
            return [(a.agent_id, a.alive) for a in agents] == [("a1", True)]

        wait_for(joined, 30, "agent a1 to register with its credential")
    finally:
        kill_tree(proc.pid)
        proc.wait(timeout=10)


def test_an_agent_refuses_a_credential_of_another_name(tmp_path: Path) -> None:
    token_file = tmp_path / "a1.token"
    token_file.write_text(agent_token(SECRET, "a1") + "\n")
    token_file.chmod(0o600)
    cmd = agent_command("127.0.0.1:1", "a2", tmp_path, free_port_range())
    done = subprocess.run(
        [*cmd, "--token-file", str(token_file)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "--name" in done.stderr and "'a1'" in done.stderr


def test_agent_token_command_prints_the_credential(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text(SECRET + "\n")
    secret.chmod(0o600)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlsched",
            "agent-token",
            "gpu-07",
            "--agent-secret-file",
            str(secret),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == agent_token(SECRET, "gpu-07")
