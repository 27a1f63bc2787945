"""What a failure costs on the testbed: how fast a lost agent is noticed, and how much
training each failure throws away with periodic checkpoints.

A real controller (in this process, the default 1-s heartbeats and 10-s agent timeout,
20-s slots) and three agent processes on loopback train one ring-all-reduce job and one
synchronous PS job (CPU-sized MLP, a few ms a step). Each trial SIGKILLs either the agent
running the ring job (a machine going down: detection time from the kill to the agent
declared lost) or the PS job's worker process; a replacement agent joins under the same
name. Steps lost per failure are the controller's count (trained past the last checkpoint).
Results go to ``benchmarks/results/failure_cost.json``.

    python -m benchmarks.failure_cost                 # 3 agent kills, 3 worker kills
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import yaml

from benchmarks.__main__ import machine
from benchmarks.output import out_file, ready
from mlsched.controller.server import Controller, ControllerConfig
from mlsched.net.ports import free_port_range
from mlsched.testbed.local import agent_command
from mlsched.trainers.launch import flag_value

RESULTS = Path(__file__).resolve().parent / "results"
SLOW = {"batch_size": 64, "training": {"num_samples": 256, "image_size": 32, "timeout_s": 15.0}}


def _job(job_id: str, arch: str, **kw: Any) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "model": "mlp",
        "arch": arch,
        "chunks": 1,
        "batches_per_chunk": 10**9,
        "max_workers": 1,
        "requested_workers": 1,
        "worker": {"gpu": 1, "cpu": 0.5},
        "ps": {"cpu": 0.5},
        "compute_s": 0.01,
        "gradient_mb": 0.1,
        **SLOW,
        **kw,
    }


def _wait(cond: Callable[[], bool], timeout: float, what: str, every: float = 0.05) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return time.monotonic() - t0
        time.sleep(every)
    raise RuntimeError(f"timed out after {timeout:g}s waiting for {what}")


def _kill_tree(pid: int) -> None:
    with contextlib.suppress(psutil.NoSuchProcess):
        proc = psutil.Process(pid)
        for p in [proc, *proc.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=3)
    p.add_argument(
        "--out", type=out_file("failure_cost.json"), default=RESULTS / "failure_cost.json"
    )
    a = p.parse_args(argv)
    a.out = ready(p, a.out)
    tmp = Path(tempfile.mkdtemp(prefix="mlsched-failure-"))
    ctl = Controller(
        ControllerConfig(
            listen="127.0.0.1:0",
            db=str(tmp / "state.db"),
            checkpoint_root=str(tmp / "ckpt"),
            slot_seconds=20.0,
            min_agents=3,
            task_timeout_s=15.0,
        )
    ).start()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs: dict[str, subprocess.Popen[bytes]] = {}

    def start_agent(name: str, ports: str) -> None:
        log = open(tmp / f"{name}.log", "ab")  # noqa: SIM115 (outlives the block)
        cmd = agent_command(ctl.address, name, tmp, ports)
        procs[name] = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

    ports = {f"agent{i}": free_port_range() for i in range(3)}
    result: dict[str, Any] = {"machine": machine(), "agent_loss": [], "worker_kill": []}
    try:
        for name, rng in ports.items():
            start_agent(name, rng)
        ctl.submit(yaml.safe_dump([_job("ring", "allreduce"), _job("ps", "ps", sync="sync")]))
        every = ctl.executor.settings.checkpoint_every_s
        assert every is not None  # the controller sets it from its slot length
        interval = every
        print(f"[failure] controller {ctl.address}, checkpoints every {interval:g} s", flush=True)

        def running(job_id: str) -> bool:
            j = ctl.job(job_id)
            return j.state == "running" and j.iterations > 0 and len(j.placement) > 0

        def lost_after(job_id: str, failures: int) -> tuple[int, int]:
            _wait(lambda: ctl.job(job_id).failed_generations > failures, 60, "the failure")
            j = ctl.job(job_id)
            return j.lost_steps, j.iterations

        for trial in range(a.trials):
            # A machine goes down: the agent running the ring job, and everything on it.
            _wait(lambda: running("ring"), 120, "the ring job to run")
            time.sleep(interval * 1.5)  # past at least one periodic checkpoint
            victim = ctl.job("ring").placement[0].agent_id
            before = ctl.job("ring")
            rate = _steps_per_s(ctl, "ring")
            _kill_tree(procs[victim].pid)
            t_detect = _wait(functools.partial(_lost, ctl, victim), 60, "the loss")
            lost, _ = lost_after("ring", before.failed_generations)
            row: dict[str, float | None] = {
                "detect_s": t_detect,
                "lost_steps": float(lost - before.lost_steps),
                "steps_per_s": rate,
            }
            row["lost_s"] = (lost - before.lost_steps) / rate if rate else None
            result["agent_loss"].append(row)
            print(f"[failure] agent loss {trial + 1}: {row}", flush=True)
            start_agent(victim, ports[victim])  # the machine comes back
            # A worker process dies.
            _wait(lambda: running("ps"), 120, "the PS job to run")
            time.sleep(interval * 1.5)
            before = ctl.job("ps")
            rate = _steps_per_s(ctl, "ps")
            workers = _trainers("ps", "worker")
            for w in workers:
                w.kill()
            lost, _ = lost_after("ps", before.failed_generations)
            row = {"lost_steps": float(lost - before.lost_steps), "steps_per_s": rate}
            row["lost_s"] = (lost - before.lost_steps) / rate if rate else None
            result["worker_kill"].append(row)
            print(f"[failure] worker kill {trial + 1}: {row}", flush=True)
        detect = [r["detect_s"] for r in result["agent_loss"]]
        result["summary"] = {
            "heartbeat_s": ctl.cfg.heartbeat_s,
            "agent_timeout_s": ctl.cfg.agent_timeout_s,
            "checkpoint_every_s": interval,
            "detect_s_max": max(detect),
            "detect_s_median": statistics.median(detect),
            "lost_s_max": max(
                r["lost_s"] or 0.0 for r in result["agent_loss"] + result["worker_kill"]
            ),
        }
        print(f"[failure] {result['summary']}")
    finally:
        ctl.stop(stop_tasks=True)
        for proc in procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)
    a.out.write_text(json.dumps(result, indent=2))
    return 0


def _steps_per_s(ctl: Controller, job_id: str, window: float = 2.0) -> float:
    s0 = ctl.job(job_id).iterations
    time.sleep(window)
    return (ctl.job(job_id).iterations - s0) / window


def _lost(ctl: Controller, agent_id: str) -> bool:
    agent = ctl.agents.get(agent_id)
    return agent is None or not agent.alive


def _trainers(job_id: str, role: str) -> list[psutil.Process]:
    out = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        ours = "mlsched.trainers" in cmd
        if ours and (flag_value(cmd, "--job-id"), flag_value(cmd, "--role")) == (
            job_id,
            role,
        ):
            out.append(proc)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
