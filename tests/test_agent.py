"""The node agent against a real gRPC controller stand-in, with real trainer processes.

``FakeController`` is a small ``AgentService`` on an ephemeral loopback port: it records
every request and answers heartbeats with a configurable desired task list, renewing each
task's lease unless the test pins it. Tasks are one-rank all-reduce jobs of the tiny MLP
(a few seconds each, most of it importing torch); at most three run at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import grpc
import psutil
import pytest
from gpu import nvml_skip_reason

from mlsched.agent import Agent, AgentError, discover, to_register_request
from mlsched.agent.cli import add_agent_args, run_agent
from mlsched.agent.discovery import gpu_type_of
from mlsched.agent.serde import task_plan
from mlsched.core.errors import SpecError
from mlsched.net.auth import ClientAuth, TokenInterceptor
from mlsched.net.ports import free_port_range, listen_port
from mlsched.trainers.telemetry import gpu_inventory
from mlsched.v1 import agent_pb2, agent_pb2_grpc, train_pb2

pytestmark = pytest.mark.processes  # training processes: one such test at a time

EXITED = agent_pb2.TASK_STATE_EXITED
RUNNING = agent_pb2.TASK_STATE_RUNNING
LONG = 1_000_000  # a stop step no test reaches: the task runs until it is stopped


class FakeController(agent_pb2_grpc.AgentServiceServicer):
    """Records registrations and heartbeats; desired tasks get a fresh lease each answer."""

    def __init__(self, interval_s: float = 0.3, lease_s: float = 5.0) -> None:
        self.lock = threading.Lock()
        self.interval_s = interval_s
        self.lease_s = lease_s  # short: tasks outlive it only because every answer renews it
        self.registers: list[agent_pb2.RegisterRequest] = []
        self.beats: list[agent_pb2.HeartbeatRequest] = []
        self.desired: dict[str, agent_pb2.TaskSpec] = {}
        self.pinned_lease: dict[str, float] = {}  # task id -> lease that is not renewed
        self.reregister_next = False
        self.not_found_next = False

    def Register(self, request: Any, context: Any) -> agent_pb2.RegisterResponse:
        with self.lock:
            self.registers.append(request)
            n = len(self.registers)
        return agent_pb2.RegisterResponse(
            agent_id=f"agent-{n}", heartbeat_interval_s=self.interval_s, slot_seconds=1.0
        )

    def Heartbeat(self, request: Any, context: Any) -> agent_pb2.HeartbeatResponse:
        with self.lock:
            self.beats.append(request)
            not_found, self.not_found_next = self.not_found_next, False
            reregister, self.reregister_next = self.reregister_next, False
            tasks = []
            for task_id, spec in self.desired.items():
                out = agent_pb2.TaskSpec()
                out.CopyFrom(spec)
                out.lease_expires_unix = self.pinned_lease.get(task_id, time.time() + self.lease_s)
                tasks.append(out)
        if not_found:
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown agent")
        return agent_pb2.HeartbeatResponse(tasks=tasks, reregister=reregister)

    # Test helpers -------------------------------------------------------------------------
    def want(self, *specs: agent_pb2.TaskSpec) -> None:
        with self.lock:
            for spec in specs:
                self.desired[spec.task_id] = spec

    def drop(self, *task_ids: str) -> None:
        with self.lock:
            for task_id in task_ids:
                self.desired.pop(task_id, None)

    def beat_count(self) -> int:
        with self.lock:
            return len(self.beats)

    def history(self, task_id: str) -> list[agent_pb2.TaskStatus]:
        """Every status of ``task_id`` reported so far, in order."""
        with self.lock:
            return [t for b in self.beats for t in b.tasks if t.task_id == task_id]

    def latest(self, task_id: str) -> agent_pb2.TaskStatus | None:
        statuses = self.history(task_id)
        return statuses[-1] if statuses else None

    def first_empty_beat(self, after: int) -> int | None:
        """The index of the first heartbeat after the ``after``-th that reports no task."""
        with self.lock:
            return next((i for i in range(after, len(self.beats)) if not self.beats[i].tasks), None)

    def pids(self) -> set[int]:
        with self.lock:
            return {t.pid for b in self.beats for t in b.tasks if t.pid}


@contextmanager
def controller_server(
    ctl: FakeController, *, token: str | None = None, port: int = 0
) -> Iterator[str]:
    interceptors = [TokenInterceptor(token)] if token else []
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), interceptors=interceptors)
    agent_pb2_grpc.add_AgentServiceServicer_to_server(ctl, server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    try:
        yield f"127.0.0.1:{bound}"
    finally:
        server.stop(grace=None)


def make_agent(target: str, workdir: Path, *, token: str | None = None) -> Agent:
    node = discover(controller=target, name="node-a", cpus=2, mem_gb=4, nic_gbps=10, use_nvml=False)
    return Agent(
        target,
        node,
        workdir=workdir,
        auth=ClientAuth(token),
        grace_s=15.0,
        poll_s=0.1,
        rpc_timeout_s=2.0,
        backoff_s=(0.1, 0.5),
        use_nvml=False,
    )


@contextmanager
def agent_running(agent: Agent, ctl: FakeController) -> Iterator[threading.Thread]:
    """``agent.run()`` in a thread; afterwards: shut down and kill any task left behind."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            agent.run()
        except BaseException as err:
            errors.append(err)

    thread = threading.Thread(target=target, name="agent", daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        agent.shutdown()
        thread.join(timeout=40)
        for pid in ctl.pids():  # a failed test must not leave trainers behind
            with suppress(psutil.Error, ProcessLookupError, PermissionError):
                if "mlsched.trainers" in " ".join(psutil.Process(pid).cmdline()):
                    os.killpg(pid, signal.SIGKILL)
    assert not thread.is_alive(), "the agent did not stop"
    assert not errors, f"the agent failed: {errors[0]!r}"


def wait_for(check: Callable[[], Any], what: str, timeout_s: float = 40.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def task_spec(root: Path, task_id: str, stop_step: int = 30, **overrides: Any) -> Any:
    """A TaskSpec as the controller sends it (raw: overrides may be invalid on purpose).
    Keys of the proto TrainConfig go into ``config``; the rest into the TaskSpec."""
    config: dict[str, Any] = {
        "job_id": f"job-{task_id}",
        "role": "rank",
        "rank": 0,
        "num_workers": 1,
        "num_ps": 0,
        "rendezvous": f"127.0.0.1:{listen_port()}",
        "stop_step": stop_step,
        "checkpoint_dir": str(root / "ckpt" / task_id),
        "model": "mlp",
        "arch": "allreduce",
        "mode": "sync",
        "backend": "ddp",
        "launcher": "direct",
        "batch_size": 16,
        "lr": 0.05,
        "momentum": 0.9,
        "weight_decay": 5e-4,
        "dataset": "synthetic",
        "num_samples": 512,
        "image_size": 8,
        "num_classes": 10,
        "threads": 1,
        "device": "cpu",
        "timeout_s": 30.0,
        "checkpoint_keep": 2,
        "checkpoint_every_s": 60.0,
    }
    names = set(train_pb2.TrainConfig.DESCRIPTOR.fields_by_name)
    config.update({k: v for k, v in overrides.items() if k in names})
    outer = {k: v for k, v in overrides.items() if k not in names}
    node = outer.pop("node", agent_pb2.NodeLaunch(launcher="direct"))
    return agent_pb2.TaskSpec(
        task_id=task_id,
        job_id=config["job_id"],
        generation=outer.pop("generation", 3),
        config=train_pb2.TrainConfig(**config),
        node=node,
        **outer,
    )


def wait_status(
    ctl: FakeController,
    task_id: str,
    ok: Callable[[agent_pb2.TaskStatus], bool],
    what: str,
    timeout_s: float = 40.0,
) -> agent_pb2.TaskStatus:
    """The first reported status of ``task_id`` that satisfies ``ok``; a task that exits
    without satisfying it fails the wait at once (an exit is final: waiting on would only
    time out, and hide what it raced past)."""

    def check() -> agent_pb2.TaskStatus | None:
        status = ctl.latest(task_id)
        if status is not None and not ok(status) and status.state == EXITED:
            raise AssertionError(f"{task_id} exited while waiting for {what}: {status}")
        return status if status is not None and ok(status) else None

    try:
        result: agent_pb2.TaskStatus = wait_for(check, f"{task_id}: {what}", timeout_s)
    except AssertionError as err:
        raise AssertionError(f"{err}; last status: {ctl.latest(task_id)}") from None
    return result


def exited(ctl: FakeController, task_id: str, timeout_s: float = 40.0) -> agent_pb2.TaskStatus:
    return wait_status(ctl, task_id, lambda s: s.state == EXITED, "exited", timeout_s)


def training(ctl: FakeController, task_id: str, iterations: int) -> agent_pb2.TaskStatus:
    return wait_status(
        ctl,
        task_id,
        lambda s: s.state == RUNNING and s.measurement.iterations >= iterations,
        f"running with {iterations} iterations",
    )


# Discovery ----------------------------------------------------------------------------------------
def test_declared_gpus_stand_in_on_a_cpu_box() -> None:
    node = discover(controller="127.0.0.1:7000", gpus=2, gpu_type="V100", use_nvml=False)
    req = to_register_request(node)
    assert req.capacity.amounts["gpu"] == 2
    assert not req.real_gpus
    assert req.gpu_type == "V100"
    assert [(g.index, g.type) for g in req.gpus] == [(0, "V100"), (1, "V100")]
    assert req.host == "127.0.0.1"  # the controller is on loopback
    assert (req.port_lo, req.port_hi) == (29500, 29999)
    assert req.capacity.amounts["cpu"] == psutil.cpu_count()
    assert req.capacity.amounts["mem_gb"] > 0


def test_discovery_follows_nvml_and_falls_back_without_it() -> None:
    found = gpu_inventory()  # empty where NVML is absent
    node = discover(controller="127.0.0.1:7000", cpus=3, mem_gb=8, nic_gbps=25, pool="ps")
    assert len(node.gpus) == len(found)
    assert node.real_gpus == bool(found)
    amounts = to_register_request(node).capacity.amounts
    assert dict(amounts) == {"gpu": len(found), "cpu": 3, "mem_gb": 8, "bw_gbps": 25}
    unknown_nic = discover(controller="127.0.0.1:7000", nic_gbps=0, use_nvml=False)
    assert "bw_gbps" not in to_register_request(unknown_nic).capacity.amounts
    assert to_register_request(unknown_nic).nic_gbps == 0


def test_gpu_types_from_nvml_names() -> None:
    assert gpu_type_of("Tesla V100-SXM2-16GB") == "V100"
    assert gpu_type_of("NVIDIA H100 80GB HBM3") == "H100"
    assert gpu_type_of("NVIDIA A100-SXM4-40GB") == "A100"
    assert gpu_type_of("Tesla T4") == "T4"


def test_a_spec_becomes_the_trainer_config() -> None:
    spec = task_spec(Path("/ckpt"), "t")
    plan = task_plan(spec, metrics="m.jsonl", real_gpus=False)
    cfg = plan.config
    assert (cfg.role.value, cfg.threads, cfg.metrics, cfg.job_id) == ("rank", 1, "m.jsonl", "job-t")
    assert (cfg.device, plan.generation, plan.node.launcher.value) == ("cpu", 3, "direct")
    gpu = task_spec(Path("/ckpt"), "g", device="auto", gpu_indices=[1])
    assert task_plan(gpu, metrics="", real_gpus=True).config.device == "cuda"
    assert task_plan(gpu, metrics="", real_gpus=False).config.device == "cpu"  # stand-ins
    gpu.config.device = "cpu"  # an explicit CPU task stays on the CPU
    assert task_plan(gpu, metrics="", real_gpus=True).config.device == "cpu"
    ps = task_spec(Path("/ckpt"), "p", arch="ps", role="ps", num_ps=1)
    assert task_plan(ps, metrics="", real_gpus=False).config.role.value == "ps"
    # Zero is a value, not "unset": a field the sender left out fails, naming it.
    for field, value in (("role", ""), ("dataset", ""), ("threads", 0), ("num_classes", 0)):
        with pytest.raises(SpecError, match=f"'{field}'"):
            task_plan(task_spec(Path("/c"), "x", **{field: value}), metrics="", real_gpus=False)
    torchrun = agent_pb2.NodeLaunch(launcher="torchrun", node_rank=1, node_sizes=[1, 2])
    with pytest.raises(SpecError, match=r"node\.launcher"):  # the config says direct
        task_plan(task_spec(Path("/c"), "n", node=torchrun), metrics="", real_gpus=False)
    one_rank = task_spec(Path("/c"), "n", node=torchrun, launcher="torchrun")
    with pytest.raises(SpecError, match=r"node\.node_sizes"):  # 3 ranks for a 1-rank job
        task_plan(one_rank, metrics="", real_gpus=False)
    spec = task_spec(Path("/c"), "n", node=torchrun, num_workers=3, launcher="torchrun")
    assert task_plan(spec, metrics="", real_gpus=False).node.nproc == 2


# Protocol -----------------------------------------------------------------------------------------
def test_registers_then_heartbeats_at_the_controllers_interval(tmp_path: Path) -> None:
    ctl = FakeController(interval_s=0.2)
    with controller_server(ctl) as target:
        agent = make_agent(target, tmp_path)
        with agent_running(agent, ctl):
            wait_for(lambda: ctl.beat_count() >= 4, "4 heartbeats", 10)
    (reg,) = ctl.registers
    assert reg.name == "node-a" and reg.host == "127.0.0.1" and reg.pool == "both"
    assert dict(reg.capacity.amounts) == {"gpu": 0, "cpu": 2, "mem_gb": 4, "bw_gbps": 10}
    beat = ctl.beats[1]
    assert beat.agent_id == "agent-1"
    assert beat.telemetry.mem_used_bytes > 0 and not beat.telemetry.nvml
    assert list(beat.tasks) == []


def test_registration_is_retried_until_the_controller_is_up(tmp_path: Path) -> None:
    port = listen_port()
    ctl = FakeController()
    agent = make_agent(f"127.0.0.1:{port}", tmp_path)
    with agent_running(agent, ctl):
        time.sleep(1.0)  # a few refused attempts with backoff
        with controller_server(ctl, port=port):
            wait_for(lambda: ctl.beat_count() >= 1, "a heartbeat after the controller started")
    assert len(ctl.registers) == 1


def test_a_task_runs_to_completion_and_is_never_relaunched(tmp_path: Path) -> None:
    ctl = FakeController()
    done = task_spec(tmp_path, "done", stop_step=60)
    bad_field = task_spec(tmp_path, "bad-field", batch_size=0)
    bad_model = task_spec(tmp_path, "bad-model", model="nope")
    with controller_server(ctl) as target:
        agent = make_agent(target, tmp_path / "work")
        with agent_running(agent, ctl) as thread:
            ctl.want(done, bad_field, bad_model)
            invalid = exited(ctl, "bad-field")
            final = exited(ctl, "done")
            failed = exited(ctl, "bad-model")
            # Still desired for a few more heartbeats: reported as exited, not relaunched.
            seen = ctl.beat_count()
            wait_for(lambda: ctl.beat_count() >= seen + 3, "3 more heartbeats")
            assert sorted((t.task_id, t.state) for t in ctl.beats[-1].tasks) == [
                ("bad-field", EXITED),
                ("bad-model", EXITED),
                ("done", EXITED),
            ]
            # Acknowledged: the controller no longer lists them, the agent forgets them.
            ctl.drop("done", "bad-field", "bad-model")
            forgotten = wait_for(lambda: ctl.first_empty_beat(after=seen), "them forgotten")
            wait_for(lambda: ctl.beat_count() >= forgotten + 3, "3 more heartbeats")
            assert all(list(b.tasks) == [] for b in ctl.beats[forgotten:])
            # Desired again (a controller behind the times): reported again, still not run.
            ctl.want(done)
            wait_for(lambda: list(ctl.beats[-1].tasks) != [], "the task reported again")
            assert thread.is_alive()
    runs = {s.pid for s in ctl.history("done")}
    assert len(runs) == 1, f"relaunched: pids {runs}"
    assert ctl.beats[-1].tasks[0].exit_reason == "completed"

    assert (final.exit_code, final.exit_reason) == (0, "completed")
    m = final.measurement
    assert m.iterations == 60 and m.timed_iterations == 58 and m.last_step == 59
    assert m.start_step == 0 and (m.checkpoint_step, m.checkpoint_cursor) == (60, 60)
    assert m.compute_time_s > 0 and m.comm_time_s > 0
    assert 0 < m.first_iteration_unix <= m.last_iteration_unix
    assert final.job_id == "job-done" and final.generation == 3
    assert Path(final.log_path).is_file()
    progress = [s.measurement.iterations for s in ctl.history("done")]
    assert progress == sorted(progress), "cumulative counts never go down"

    assert (invalid.exit_code, invalid.pid) == (-1, 0)
    assert "batch_size" in invalid.exit_reason
    assert failed.exit_code == 1
    assert failed.exit_reason.startswith("error: ") and "model 'nope'" in failed.exit_reason


def test_outage_reregistration_stop_lease_expiry_and_shutdown(tmp_path: Path) -> None:
    # Leases outlast any outage below (whose length is the machine's: a missed heartbeat,
    # then two registrations): the expiry tested is the pinned lease's, not a race with it.
    ctl = FakeController(lease_s=120.0)
    specs = [task_spec(tmp_path, name, stop_step=LONG) for name in ("undesired", "lease", "last")]
    port = listen_port()
    agent = make_agent(f"127.0.0.1:{port}", tmp_path / "work")
    with agent_running(agent, ctl) as thread:
        with controller_server(ctl, port=port):
            ctl.want(*specs)
            before = {s.task_id: training(ctl, s.task_id, 3) for s in specs}
        # The controller is down for a while (shorter than a lease): the tasks keep running.
        # Down until the agent has missed a heartbeat (its reported problem), not a set time.
        wait_for(lambda: agent._problem.startswith("heartbeat"), "a missed heartbeat")
        with controller_server(ctl, port=port):
            outage_over = ctl.beat_count()
            # Registering again (asked, or after NOT_FOUND) leaves the tasks running too.
            ctl.reregister_next = True
            wait_for(lambda: len(ctl.registers) == 2, "registration after reregister")
            ctl.not_found_next = True
            wait_for(lambda: len(ctl.registers) == 3, "registration after NOT_FOUND")
            wait_for(lambda: ctl.beats[-1].agent_id == "agent-3", "heartbeats as agent-3")
            for task_id, status in before.items():
                # Measurements are cumulative and keep growing across it all.
                now = training(ctl, task_id, status.measurement.iterations + 1)
                assert now.pid == status.pid
                assert now.measurement.compute_time_s > status.measurement.compute_time_s
                assert now.measurement.last_step > status.measurement.last_step
            assert outage_over > 0 and ctl.beats[outage_over].agent_id == "agent-1"
            # Not desired any more: SIGTERM, the trainer checkpoints and exits 0.
            ctl.drop("undesired")
            # The controller stops renewing a lease (as if unreachable).
            with ctl.lock:
                ctl.pinned_lease["lease"] = time.time() + 0.5
            stopped = exited(ctl, "undesired")
            expired = exited(ctl, "lease")
            assert ctl.latest("last").state == RUNNING
            agent.shutdown()
            thread.join(timeout=30)
    last = ctl.beats[-1]
    (final,) = [t for t in last.tasks if t.task_id == "last"]
    assert final.state == EXITED, "the last heartbeat reports the stopped task"
    for status, prefix in ((stopped, ""), (expired, "lease expired: "), (final, "")):
        m = status.measurement
        assert status.exit_code == 0, status.exit_reason
        assert status.exit_reason == f"{prefix}stopped at step {m.checkpoint_step}"
        assert m.checkpoint_step == m.last_step + 1 >= 3
        assert not psutil.pid_exists(status.pid) or psutil.Process(status.pid).status() == "zombie"


# Tokens and flags ---------------------------------------------------------------------------------
def test_the_right_token_registers_and_a_wrong_one_fails_fast(tmp_path: Path) -> None:
    ctl = FakeController()
    with controller_server(ctl, token="s3cret") as target:
        assert make_agent(target, tmp_path, token="s3cret").register()
        assert len(ctl.registers) == 1
        wrong = make_agent(target, tmp_path, token="wrong")
        # Fails fast: a refused token is final, so the agent must not back off and retry.
        wrong._sleep = lambda seconds: pytest.fail(f"backed off {seconds} s to retry")  # type: ignore[method-assign]
        with pytest.raises(AgentError, match=r"UNAUTHENTICATED.*--token"):
            wrong.register()
        with pytest.raises(AgentError, match="UNAUTHENTICATED"):
            make_agent(target, tmp_path).register()  # no token at all
    assert len(ctl.registers) == 1


def _cli_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_agent_args(parser)
    return parser.parse_args(list(argv))


def test_cli_fails_fast_on_a_wrong_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ctl = FakeController()
    with controller_server(ctl, token="s3cret") as target:
        args = _cli_args("--controller", target, "--token", "nope", "--workdir", str(tmp_path))
        assert run_agent(args) == 1
    assert "UNAUTHENTICATED" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--ports", "29500"], "--ports"),
        (["--ports", "30000-29000"], "--ports"),
        (["--gpus", "-1"], "--gpus"),
        (["--controller", "nohost"], "--controller"),
        (["--tls-cert", "c.pem"], "--tls-key"),
        (["--tls-ca", "/nonexistent/ca.pem"], "tls_ca"),
    ],
)
def test_cli_rejects_bad_flags_by_name(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _cli_args("--controller", "127.0.0.1:1", *argv)
    assert run_agent(args) == 2
    assert f"'{flag}'" in capsys.readouterr().err


def test_python_m_agent_runs_until_sigterm(tmp_path: Path) -> None:
    ctl = FakeController(interval_s=0.2)
    with controller_server(ctl) as target:
        cmd = [sys.executable, "-m", "mlsched.agent", "--controller", target]
        cmd += ["--name", "cli-node", "--gpus", "1", "--gpu-type", "T4"]
        ports = free_port_range()
        cmd += ["--workdir", str(tmp_path), "--ports", ports]
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            wait_for(lambda: ctl.beat_count() >= 2, "heartbeats from the agent process", 30)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err
    assert "[agent cli-node] registered" in err
    (reg,) = ctl.registers
    assert (f"{reg.port_lo}-{reg.port_hi}", reg.gpu_type) == (ports, "T4")
    assert reg.capacity.amounts["gpu"] == 1


@pytest.mark.skipif(nvml_skip_reason() is not None, reason=str(nvml_skip_reason()))
def test_a_task_with_gpu_indices_trains_on_its_gpu(tmp_path: Path) -> None:
    ctl = FakeController()
    with controller_server(ctl) as target:
        node = discover(controller=target, name="gpu-node")
        assert node.real_gpus
        agent = Agent(target, node, workdir=tmp_path / "work", poll_s=0.1, use_nvml=True)
        with agent_running(agent, ctl):
            ctl.want(task_spec(tmp_path, "gpu", device="cuda", gpu_indices=[0]))
            final = exited(ctl, "gpu", 120)
    assert (final.exit_code, final.exit_reason) == (0, "completed"), final.exit_reason
    # The agent's last heartbeat, at shutdown, carries no telemetry: look at those before it.
    gpu_beats = [b for b in ctl.beats if b.HasField("telemetry") and b.telemetry.nvml]
    assert gpu_beats, "no heartbeat carried NVML telemetry"
    assert all(b.telemetry.gpus for b in gpu_beats)
    assert any(g.HasField("mem_used_bytes") for b in gpu_beats for g in b.telemetry.gpus)


def test_hostile_task_specs_fail_alone_and_the_agent_stays_up(tmp_path: Path) -> None:
    """What once took agents down (a NUL in a job id reached Popen) or escaped the workdir
    now fails only the task, with its reason; a good task beside them still completes."""
    ctl = FakeController()
    hostile = {
        "nul-job": task_spec(tmp_path, "nul-job", job_id="a\x00b"),
        "escape-job": task_spec(tmp_path, "escape-job", job_id="../../x"),
        "nul-path": task_spec(tmp_path, "nul-path", dataset="folder", data_path="/d\x00x"),
        "outside-root": task_spec(tmp_path, "outside-root", checkpoint_dir="/tmp/elsewhere"),
    }
    huge = task_spec(tmp_path, "x" * 300_000)
    good = task_spec(tmp_path, "good", stop_step=20)
    with controller_server(ctl) as target:
        agent = make_agent(target, tmp_path / "work")
        agent.node = dataclasses.replace(agent.node, checkpoint_root=str(tmp_path / "ckpt"))
        with agent_running(agent, ctl) as thread:
            ctl.want(*hostile.values(), huge, good)
            for task_id in hostile:
                status = exited(ctl, task_id)
                assert (status.exit_code, status.pid) == (-1, 0), status.exit_reason
                assert "invalid task spec" in status.exit_reason
            assert "job_id" in ctl.latest("nul-job").exit_reason  # type: ignore[union-attr]
            assert "checkpoint_dir" in ctl.latest("outside-root").exit_reason  # type: ignore[union-attr]
            assert exited(ctl, huge.task_id).exit_code == -1
            assert exited(ctl, "good").exit_reason == "completed"
            assert thread.is_alive()
    assert not (tmp_path / "x").exists() and not Path("/tmp/elsewhere").exists()
    assert {p.name for p in (tmp_path / "work").iterdir()} <= {"good", *hostile, "x" * 192}
