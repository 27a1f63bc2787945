"""Chaos on a real testbed, in one run: a worker process SIGKILLed, then an agent machine
SIGKILLed mid-slot, then the controller SIGKILLed and restarted on its state file. Every
admitted job ends done, and each failure costs at most the periodic checkpoint interval."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import psutil
import pytest
import yaml
from cluster_helpers import (
    agents,
    controller_process,
    free_port,
    kill_tree,
    mlp_job,
    slow,
    stub,
    wait_for,
)

from mlsched.trainers.launch import flag_value
from mlsched.v1 import jobs_pb2

# A soak: over a minute of three failures and recoveries (make soak; CI runs it).
pytestmark = [pytest.mark.processes, pytest.mark.slow, pytest.mark.soak]

EVERY = 100  # steps between periodic checkpoints
TOTAL = 4000  # the three failures happen by about a third of it; the rest is just training
SLOW = slow(checkpoint_every_steps=EVERY)


def _jobs(address: str) -> dict[str, jobs_pb2.JobStatus]:
    resp = stub(address).ListJobs(jobs_pb2.ListJobsRequest(), timeout=5)
    return {j.job_id: j for j in resp.jobs}


def _serving(address: str) -> bool:
    try:
        _jobs(address)
    except Exception:
        return False
    return True


def _finished(jobs: dict[str, jobs_pb2.JobStatus], ids: tuple[str, ...]) -> bool:
    """Every job of ``ids`` is known and done or failed (a missing one is not finished)."""
    return all(i in jobs and jobs[i].state in ("done", "failed") for i in ids)


def _trainers(job_id: str, role: str) -> list[psutil.Process]:
    """The live trainer processes of ``job_id`` in ``role`` (matched on their arguments)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        ours = "mlsched.trainers" in cmd and flag_value(cmd, "--job-id") == job_id
        if ours and flag_value(cmd, "--role") == role:
            out.append(p)
    return out


def _host_agent(tmp: Path, job_id: str, gen: int, task: str) -> int:
    (path,) = tmp.glob(f"agent*/{job_id}.g{gen}.{task}")
    return int(path.parent.name.removeprefix("agent"))


def test_worker_agent_and_controller_killed_in_one_run(tmp_path: Path) -> None:
    port = free_port()
    address = f"127.0.0.1:{port}"
    jobs = [
        mlp_job("ps-sync", arch="ps", sync="sync", units=TOTAL, **SLOW),
        mlp_job("ring", arch="allreduce", units=TOTAL, **SLOW),
    ]

    def start(n: int) -> subprocess.Popen[bytes]:
        log = tmp_path / f"controller{n}.log"
        return controller_process(tmp_path, port, log, slot_seconds=3.0, min_agents=3)

    procs: list[subprocess.Popen[bytes]] = [start(1)]
    try:
        wait_for(lambda: _serving(address), 30, "the controller to serve")
        with agents(address, tmp_path, 3) as agent_procs:
            resp = stub(address).SubmitJobs(
                jobs_pb2.SubmitJobsRequest(document=yaml.safe_dump(jobs)), timeout=5
            )
            assert list(resp.job_ids) == ["ps-sync", "ring"]

            def trained(job_id: str, fraction: float) -> bool:
                j = _jobs(address)[job_id]
                return j.state == "running" and j.iterations >= fraction * TOTAL

            # 1. A PS worker process dies.
            wait_for(lambda: trained("ps-sync", 0.1), 90, "ps-sync to train 10 %")
            (worker,) = _trainers("ps-sync", "worker")
            worker.kill()
            wait_for(
                lambda: _jobs(address)["ps-sync"].failed_generations >= 1,
                40,
                "the worker's failure to be counted",
            )
            # 2. The machine running the ring job's rank goes down mid-slot.
            wait_for(lambda: trained("ring", 0.3), 90, "ring to train 30 %")
            victim = _host_agent(
                tmp_path, "ring", _jobs(address)["ring"].failed_generations + 1, "n0"
            )
            kill_tree(agent_procs[victim].pid, signal.SIGKILL)
            wait_for(
                lambda: _jobs(address)["ring"].failed_generations >= 1,
                40,
                "the ring job's lost generation to be counted",
            )
            # 3. The controller dies and comes back on its state file.
            wait_for(
                lambda: all(j.state == "running" for j in _jobs(address).values()),
                60,
                "both jobs to run again",
            )
            kill_tree(procs[0].pid, signal.SIGKILL)
            procs[0].wait(timeout=10)
            procs.append(start(2))
            wait_for(lambda: _serving(address), 30, "the restarted controller to serve")

            # Both jobs by name: a restarted controller that lost them would list none, and
            # `all` over nothing is true.
            wait_for(
                lambda: _finished(_jobs(address), ("ps-sync", "ring")),
                240,
                "both jobs to finish",
                every=0.5,
            )
            final = _jobs(address)
        assert sorted(final) == ["ps-sync", "ring"]
        for job_id, j in final.items():
            assert j.state == "done", (job_id, j.state, j.reason)
            assert j.progress == j.total_work == TOTAL
            assert j.failed_generations >= 1, job_id
            # Each failure threw away at most one checkpoint interval of steps.
            assert j.lost_steps <= j.failed_generations * (EVERY + 2), (job_id, j.lost_steps)
    finally:
        for proc in procs:
            if proc.poll() is None:
                kill_tree(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
