"""The same job, the same layout: launched by an agent vs by hand with torchrun (goal >= 0.97).

By hand: ``torchrun --nproc-per-node 2 -m mlsched.trainers --arch allreduce ...``. By the
testbed: a controller (in this process) and one agent (its own process, two stand-in GPUs)
run the same 2-rank DDP job, submitted as a job spec; the slot is long enough that the job
is never re-laid-out. Iterations/s are taken the same way from both runs' rank-0 metrics:
steps after ``--warmup`` divided by the time between the two ``iter`` lines that bound them.
Runs alternate (ABBA) over ``--repeat``; the ratio is median(agent) / median(torchrun).

    python -m benchmarks.agent_launch                 # resnet20, batch 16, 60 steps, 3 repeats
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.__main__ import machine
from mlsched.controller.server import Controller, ControllerConfig
from mlsched.testbed.cluster_demo import agent_command
from mlsched.trainers.launch import free_port

RESULTS = Path(__file__).resolve().parent / "results"
GOAL = 0.97


def _rate(metrics: Path, warmup: int) -> float:
    """Iterations/s of rank 0 after ``warmup`` iterations."""
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    its = [r for r in rows if r.get("type") == "iter" and r.get("rank", 0) == 0]
    its.sort(key=lambda r: r["step"])
    if len(its) <= warmup + 1:
        raise RuntimeError(f"{metrics}: only {len(its)} iterations")
    first, last = its[warmup], its[-1]
    return (last["step"] - first["step"]) / (last["t"] - first["t"])


def _by_hand(a: argparse.Namespace, work: Path) -> float:
    ckpt, metrics = work / "ckpt", work / "metrics.jsonl"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
        "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
        "--master-port", str(free_port()),
        "-m", "mlsched.trainers", "--arch", "allreduce", "--model", a.model,
        "--batch-size", str(a.batch_size), "--stop-step", str(a.steps),
        "--checkpoint-dir", str(ckpt), "--metrics", str(metrics),
        "--num-samples", "1024", "--image-size", str(a.image_size), "--threads", "1",
    ]  # fmt: skip
    subprocess.run(cmd, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return _rate(metrics, a.warmup)


def _by_agent(a: argparse.Namespace, work: Path) -> float:
    ctl = Controller(
        ControllerConfig(
            listen="127.0.0.1:0",
            db=str(work / "state.db"),
            checkpoint_root=str(work / "ckpt"),
            slot_seconds=3600.0,
            heartbeat_s=0.5,
        )
    ).start()
    agent = subprocess.Popen(
        agent_command(ctl.address, "agent", work, "31000-31099"),
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stderr=subprocess.DEVNULL,
    )
    try:
        job = {
            "job_id": "bench",
            "model": a.model,
            "arch": "allreduce",
            "batch_size": a.batch_size,
            "batches_per_chunk": 2 * a.steps,  # 2 mini-batches per step
            "max_workers": 2,
            "requested_workers": 2,
            "worker": {"gpu": 1},
            "training": {"num_samples": 1024, "image_size": a.image_size, "threads": 1},
        }
        ctl.submit(yaml.safe_dump([job]))
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            # The engine hears of completion at the slot's end; the executor knows at once.
            run = ctl.executor.runs.get("bench")
            if run is not None and run.finished:
                break
            time.sleep(0.5)
        else:
            raise RuntimeError("the agent's job did not finish in 600 s")
        metrics = next((work / "agent").glob("bench.g1.r0/metrics.jsonl"))
        return _rate(metrics, a.warmup)
    finally:
        ctl.stop(stop_tasks=True)
        agent.terminate()
        agent.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet20")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", type=Path, default=RESULTS / "agent_launch.json")
    a = p.parse_args(argv)
    rates: dict[str, list[float]] = {"torchrun": [], "agent": []}
    for r in range(a.repeat):
        order = ("torchrun", "agent") if r % 2 == 0 else ("agent", "torchrun")
        for how in order:
            work = Path(tempfile.mkdtemp(prefix=f"mlsched-{how}-"))
            try:
                rate = _by_hand(a, work) if how == "torchrun" else _by_agent(a, work)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            rates[how].append(rate)
            print(f"[launch] rep {r} {how:<8} {rate:.2f} it/s", flush=True)
    hand, agent = statistics.median(rates["torchrun"]), statistics.median(rates["agent"])
    ratio = agent / hand
    verdict = "meets" if ratio >= GOAL else "misses"
    print(
        f"{a.model} batch {a.batch_size}, 2 ranks: torchrun {hand:.2f} it/s, agent "
        f"{agent:.2f} it/s, ratio {ratio:.3f} ({verdict} >= {GOAL})"
    )
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(
        json.dumps(
            {"machine": machine(), "args": vars(a) | {"out": str(a.out)}, "rates": rates,
             "ratio": ratio, "goal": GOAL},
            indent=2,
        )
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
