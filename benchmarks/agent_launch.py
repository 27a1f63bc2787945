"""Each testbed launch vs the same job launched by hand on one machine (goal >= 0.97 each).

Three launches of one 2-rank all-reduce job, each paired with its bare counterpart:

* ``torchrun``: the agent's torchrun task vs ``torchrun --nproc-per-node 2 -m
  mlsched.trainers ...`` by hand;
* ``direct``: the agent's one process per rank vs the same bare torchrun;
* ``horovod``: the agent's Horovod node launcher vs ``horovodrun -np 2 -H localhost:2 --gloo
  python -m mlsched.trainers ...`` by hand (skipped when Horovod is not installed).

By the testbed: a controller (in this process) and one agent (its own process, two
stand-in GPUs) run the job, submitted as a job spec; the slot is long enough that it is
never re-laid-out. Iterations/s are taken the same way from every run's rank-0 metrics:
steps after ``--warmup`` divided by the time between the two ``iter`` lines that bound
them. Each launch's runs alternate with its bare runs (ABBA) over ``--repeat``; the ratio
is median(testbed) / median(bare).

    python -m benchmarks.agent_launch                 # resnet20, batch 16, 60 steps, 3 repeats
    python -m benchmarks.agent_launch --launches torchrun,horovod --repeat 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.__main__ import machine
from benchmarks.output import out_file, ready
from mlsched.controller.server import Controller, ControllerConfig
from mlsched.core.train_config import Backend, TrainConfig
from mlsched.net.ports import free_port_range
from mlsched.testbed.local import agent_command
from mlsched.trainers.allreduce.horovod import horovod_available
from mlsched.trainers.launch import commands, free_port

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


def _config(a: argparse.Namespace, work: Path, launch: str) -> TrainConfig:
    return TrainConfig(
        model=a.model, arch="allreduce", num_workers=2, num_ps=0,
        backend=Backend.HOROVOD if launch == "horovod" else Backend.DDP,
        rendezvous=f"127.0.0.1:{free_port()}", stop_step=a.steps,
        checkpoint_dir=str(work / "ckpt"), metrics=str(work / "metrics.jsonl"),
        batch_size=a.batch_size, num_samples=1024, image_size=a.image_size, threads=1,
        job_id="bench",
    )  # fmt: skip


def _by_hand(a: argparse.Namespace, work: Path, launch: str) -> float:
    """The bare launcher on one machine: torchrun, or horovodrun for Horovod."""
    cfg = _config(a, work, launch)
    (cmd,) = commands(cfg)  # torchrun --nnodes 1 ..., or horovodrun -np 2 ... --gloo
    subprocess.run(cmd, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return _rate(Path(cfg.metrics), a.warmup)


def _by_agent(a: argparse.Namespace, work: Path, launch: str) -> float:
    ctl = Controller(
        ControllerConfig(
            listen="127.0.0.1:0",
            db=str(work / "state.db"),
            checkpoint_root=str(work / "ckpt"),
            slot_seconds=3600.0,
            heartbeat_s=0.5,
        )
    ).start()
    chosen = {"backend": "horovod"} if launch == "horovod" else {"launcher": launch}
    agent: subprocess.Popen[bytes] | None = None
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
            "training": {"num_samples": 1024, "image_size": a.image_size, "threads": 1,
                         **chosen},
        }  # fmt: skip
        # Submitted before the agent registers: the first slot (an hour long) starts with
        # the job in it rather than an hour later.
        ctl.submit(json.dumps([job]))
        agent = subprocess.Popen(
            agent_command(ctl.address, "agent", work, free_port_range()),
            env={**os.environ, "OMP_NUM_THREADS": "1"},
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            # The engine hears of completion at the slot's end; the executor knows at once.
            entry = ctl.executor.jobs.get("bench")
            if entry is not None and entry.run.finished:
                break
            time.sleep(0.5)
        else:
            raise RuntimeError("the agent's job did not finish in 600 s")
        task = "bench.g1.r0" if launch == "direct" else "bench.g1.n0"
        metrics = next((work / "agent").glob(f"{task}/metrics.jsonl"))
        return _rate(metrics, a.warmup)
    finally:
        ctl.stop(stop_tasks=True)
        if agent is not None:
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
    p.add_argument(
        "--out", type=out_file("agent_launch.json"), default=RESULTS / "agent_launch.json"
    )
    p.add_argument("--launches", default="torchrun,direct,horovod")
    a = p.parse_args(argv)
    a.out = ready(p, a.out)
    launches = [x for x in a.launches.split(",") if x]
    if "horovod" in launches and not horovod_available():
        print("[launch] horovod: skipped (Horovod is not installed: `make horovod`)")
        launches.remove("horovod")
    results: dict[str, dict[str, object]] = {}
    for launch in launches:
        bare = "horovodrun" if launch == "horovod" else "torchrun"
        rates: dict[str, list[float]] = {bare: [], "testbed": []}
        for r in range(a.repeat):
            order = (bare, "testbed") if r % 2 == 0 else ("testbed", bare)
            for how in order:
                work = Path(tempfile.mkdtemp(prefix=f"mlsched-{launch}-{how}-"))
                try:
                    run = _by_agent if how == "testbed" else _by_hand
                    rate = run(a, work, launch)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
                rates[how].append(rate)
                print(f"[launch] {launch:<8} rep {r} {how:<10} {rate:.2f} it/s", flush=True)
        hand, agent = statistics.median(rates[bare]), statistics.median(rates["testbed"])
        ratio = agent / hand
        results[launch] = {"bare": bare, "rates": rates, "ratio": ratio, "met": ratio >= GOAL}
    print(f"{a.model} batch {a.batch_size}, 2 ranks, median it/s over {a.repeat} pairs:")
    for launch, res in results.items():
        rates = res["rates"]  # type: ignore[assignment]
        bare = str(res["bare"])
        print(
            f"  {launch:<8} testbed {statistics.median(rates['testbed']):6.2f}  {bare:<10} "
            f"{statistics.median(rates[bare]):6.2f}  ratio {res['ratio']:.3f} "
            f"({'meets' if res['met'] else 'misses'} >= {GOAL})"
        )
    a.out.write_text(
        json.dumps(
            {"machine": machine(), "args": vars(a) | {"out": str(a.out)}, "launches": results,
             "goal": GOAL},
            indent=2,
        )
    )  # fmt: skip
    return 0 if all(r["met"] for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
