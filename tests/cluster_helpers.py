"""Start real controllers and agents on loopback for the testbed tests."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil

from mlsched.agent import Agent
from mlsched.controller.server import Controller, ControllerConfig
from mlsched.net.auth import ClientAuth, client_channel
from mlsched.net.ports import free_port, free_port_range  # noqa: F401 (free_port: re-exported)
from mlsched.testbed.local import agent_command
from mlsched.v1 import jobs_pb2, jobs_pb2_grpc

SMALL = {"num_samples": 256, "image_size": 8, "timeout_s": 15.0}


def slow(**training: Any) -> dict[str, Any]:
    """Job fields for steps of a few milliseconds (32x32 images, batch 64): a generation
    cannot finish a job within the slot it starts in. Periodic checkpoints are off unless
    ``training`` turns them on."""
    settings = {"num_samples": 256, "image_size": 32, "timeout_s": 15.0, "checkpoint_every_s": 0.0}
    return {"batch_size": 64, "training": {**settings, **training}}


def mlp_job(job_id: str, *, arch: str = "allreduce", units: int = 40, **kw: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "job_id": job_id,
        "model": "mlp",
        "arch": arch,
        "batch_size": 8,
        "chunks": 1,
        "batches_per_chunk": units,
        "max_workers": 2,
        "requested_workers": 1,
        "worker": {"gpu": 1, "cpu": 0.5},
        "ps": {"cpu": 0.5},
        "compute_s": 0.01,
        "gradient_mb": 0.1,
        "training": dict(SMALL),
    }
    if arch == "ps":
        job["requested_ps"] = 1
    job.update(kw)
    return job


def controller(tmp: Path, **kw: Any) -> Controller:
    cfg = ControllerConfig(
        listen="127.0.0.1:0",
        db=str(tmp / "state.db"),
        checkpoint_root=str(tmp / "ckpt"),
        heartbeat_s=0.3,
        agent_timeout_s=4.0,
        slot_seconds=kw.pop("slot_seconds", 4.0),
        task_timeout_s=15.0,
        **kw,
    )
    return Controller(cfg).start()


def tls_controller(
    tmp: Path, *clients: str, token: str = "s3cret"
) -> tuple[Controller, Path, Path]:
    """A controller requiring client certificates and a user token: the certificates from
    ``mlsched certs`` in ``tmp/pki`` (the server's for localhost and 127.0.0.1, one per
    client), the token in ``tmp/token`` (owner-only). Returns (controller, pki, token)."""
    from mlsched.cli import main

    pki = tmp / "pki"
    argv = ["certs", "--dir", str(pki), "--dns", "localhost", "--ip", "127.0.0.1"]
    assert main([*argv, *(f"--client={c}" for c in clients)]) == 0
    path = tmp / "token"
    path.write_text(f"{token}\n")
    path.chmod(0o600)
    ctl = controller(
        tmp, token=token, tls_cert=str(pki / "server.pem"), tls_key=str(pki / "server.key"),
        tls_ca=str(pki / "ca.pem"),
    )  # fmt: skip
    return ctl, pki, path


@contextlib.contextmanager
def running(fleet: list[Agent]) -> Iterator[list[Agent]]:
    """Each agent's ``run`` in a thread of this process; stopped (tasks killed) after."""
    threads = [threading.Thread(target=a.run, daemon=True) for a in fleet]
    for t in threads:
        t.start()
    try:
        yield fleet
    finally:
        for a in fleet:
            a.shutdown(force=True)
        for t in threads:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in threads), "an agent did not stop"


def agent_cmd(address: str, name: str, tmp: Path, ports: str, *extra: str) -> list[str]:
    return [*agent_command(address, name, tmp, ports, grace_s=10), *extra]


@contextlib.contextmanager
def agents(address: str, tmp: Path, n: int, *extra: str) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = []
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    try:
        for i in range(n):
            log = open(tmp / f"agent{i}.log", "wb")  # noqa: SIM115
            procs.append(
                subprocess.Popen(
                    agent_cmd(address, f"agent{i}", tmp, free_port_range(), *extra),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
        yield procs
    finally:
        stop_all(procs, grace_s=20)


def stop_all(procs: list[subprocess.Popen[bytes]], *, grace_s: float) -> None:
    """SIGTERM every process's tree, then SIGKILL those not gone within ``grace_s``."""
    for p in procs:
        kill_tree(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            kill_tree(p.pid, signal.SIGKILL)


def controller_process(
    tmp: Path, port: int, log: Path, *, slot_seconds: float = 4.0, min_agents: int = 1
) -> subprocess.Popen[bytes]:
    """``mlsched controller`` as its own process (state in ``tmp/state.db``), so that a test
    can kill it outright and start another on the same port and state file."""
    cmd = [
        sys.executable,
        "-m",
        "mlsched",
        "--log-level",
        "info",
        "controller",
        "--listen",
        f"127.0.0.1:{port}",
        "--db",
        str(tmp / "state.db"),
        "--checkpoint-root",
        str(tmp / "ckpt"),
        "--slot-seconds",
        str(slot_seconds),
        "--heartbeat",
        "0.3",
        "--agent-timeout",
        "5",
        "--task-timeout",
        "15",
        "--min-agents",
        str(min_agents),
    ]
    with open(log, "ab") as out:
        return subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
            start_new_session=True,
        )


def metrics(tmp: Path, task_id: str) -> list[list[dict[str, Any]]]:
    """The metrics records of task ``task_id``, one list per agent workdir that ran it."""
    out = []
    for path in sorted(tmp.glob(f"agent*/{task_id}/metrics.jsonl")):
        lines = path.read_text().splitlines()
        out.append([json.loads(line) for line in lines if line.endswith("}")])
    return out


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signal a process and every process it started (a machine going down)."""
    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(sig)


def stub(address: str, token: str | None = None) -> jobs_pb2_grpc.JobServiceStub:
    return jobs_pb2_grpc.JobServiceStub(client_channel(address, ClientAuth(token)))


def wait_for(cond: Callable[[], bool], timeout: float, what: str, every: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


def states(ctl: Controller) -> dict[str, str]:
    return {j.job_id: j.state for j in ctl.jobs()}


def all_final(ctl: Controller) -> bool:
    s = states(ctl)
    return bool(s) and all(v in ("done", "rejected", "failed", "cancelled") for v in s.values())


def job_status(address: str, job_id: str) -> jobs_pb2.JobStatus:
    return stub(address).GetJob(jobs_pb2.GetJobRequest(job_id=job_id), timeout=5).job


def finished(address: str, job_id: str, timeout: float, what: str) -> jobs_pb2.JobStatus:
    """The job's status once it is done or failed (polled over RPC every half second)."""
    wait_for(
        lambda: job_status(address, job_id).state in ("done", "failed"), timeout, what, every=0.5
    )
    return job_status(address, job_id)
