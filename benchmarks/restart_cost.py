"""What stopping a job and restarting it from its checkpoint costs (ResNet-18 on CPU).

For each layout (``ddp``: 2 DDP ranks under torchrun; ``ps``: 1 worker + 1 PS) and each
repeat, through the user's command (``python -m mlsched train ...``, which is
:func:`mlsched.trainers.launch.launch`):

1. start a fresh job with a far stop step and wait until ``--steps-before`` steps are done;
2. send SIGTERM to the launcher (what an agent does to preempt a job) and measure
   **stop_s**: from the signal until every process of the job has exited, and
   **ckpt_written_s**: from the signal until the checkpoint file was complete (its mtime);
   the checkpoint must exist at the step the job reached, the launcher must exit 0;
3. launch the job again on the same checkpoint directory (``stop_step = step + 3``) and
   measure **resume_first_iter_s**: from the launch until the first iteration of the resumed
   run completed (the earliest ``t`` of its iteration records; ``..._all_ranks_s``: until
   every rank completed one), split into the first iteration's own time and the rest
   (interpreter start-up, imports, rendezvous, checkpoint load);
4. for comparison, the same time to the first iteration of the fresh start
   (**fresh_first_iter_s**), so that ``resume - fresh`` is what the checkpoint load adds.

Also the checkpoint's size (``state.pt``: parameters, buffers and SGD momentum, fp32).

    python -m benchmarks.restart_cost                     # ddp and ps, 3 repeats each
    python -m benchmarks.restart_cost --layouts ddp --repeat 5
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from benchmarks.machine import machine
from benchmarks.output import out_file, ready
from mlsched.trainers.launch import flag_value

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"

LAYOUTS = {
    "ddp": ["--arch", "allreduce", "--backend", "ddp", "--workers", "2"],
    "ps": ["--arch", "ps", "--mode", "async", "--workers", "1", "--ps", "1"],
}


def _cmd(args: argparse.Namespace, layout: str, ckpt: Path, stop_step: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "mlsched",
        "train",
        "--model",
        args.model,
        *LAYOUTS[layout],
        "--stop-step",
        str(stop_step),
        "--checkpoint-dir",
        str(ckpt),
        "--image-size",
        str(args.image_size),
        "--batch-size",
        str(args.batch_size),
        "--num-samples",
        str(args.num_samples),
        "--threads",
        "1",
    ]


def _iters(ckpt: Path, skip: int = 0) -> list[dict[str, Any]]:
    path = ckpt / "metrics.jsonl"
    if not path.exists():
        return []
    out = []
    for i, line in enumerate(path.read_text().splitlines()):
        if i < skip or not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:  # a line being written
            continue
        if rec.get("type") == "iter":
            out.append(rec)
    return out


def _lines(ckpt: Path) -> int:
    path = ckpt / "metrics.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _children(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    """Every process the launcher started (torchrun, its ranks, PS processes, ...)."""
    try:
        return list(psutil.Process(proc.pid).children(recursive=True))
    except psutil.NoSuchProcess:
        return []


def _label(p: psutil.Process) -> str:
    try:
        cmd = p.cmdline()
    except psutil.Error:
        return "?"
    if "torch.distributed.run" in cmd:  # before the next test: its arguments name the module
        return "torchrun"
    if "mlsched.trainers" in cmd:
        return flag_value(cmd, "--role") or "rank"
    return Path(cmd[0]).name if cmd else "?"


def _watch_exit(
    proc: subprocess.Popen[bytes], children: list[psutil.Process], timeout: float
) -> tuple[int, dict[int, float], float]:
    """Poll (every 10 ms) until the launcher and all its children have exited; returns the
    launcher's status, each child's exit time and the launcher's. A child that is a zombie
    (exited, not yet reaped by its parent) counts as exited. The launcher is waited for
    through Popen, since psutil would reap it and hide its exit status."""
    exits: dict[int, float] = {}
    deadline = time.monotonic() + timeout
    t_launcher: float | None = None
    while True:
        now = time.time()
        for c in children:
            if c.pid in exits:
                continue
            try:
                if c.status() == psutil.STATUS_ZOMBIE:
                    exits[c.pid] = now
            except psutil.NoSuchProcess:
                exits[c.pid] = now
        if t_launcher is None and proc.poll() is not None:
            t_launcher = now
        if t_launcher is not None and len(exits) == len(children):
            return int(proc.returncode), exits, t_launcher
        if time.monotonic() > deadline:
            for c in children:
                with contextlib.suppress(psutil.Error):
                    c.kill()
            proc.kill()
            raise RuntimeError(f"job still running {timeout} s after SIGTERM")
        time.sleep(0.01)


def _import_s(repeat: int = 3) -> float:
    """Wall time of a Python that imports what a trainer process imports (median)."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", "import mlsched.trainers.run, mlsched.trainers.allreduce.ddp"],
            cwd=ROOT,
            check=True,
        )
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _start(cmd: list[str], log: Path) -> tuple[subprocess.Popen[bytes], float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with open(log, "ab") as fh:
        t = time.time()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
    return proc, t


def one_cycle(args: argparse.Namespace, layout: str, work: Path) -> dict[str, Any]:
    from mlsched.trainers.checkpoint import latest_step

    ckpt = Path(tempfile.mkdtemp(prefix=f"restart-{layout}-", dir=work))
    log = ckpt / "log.txt"
    ranks = 2 if layout == "ddp" else 1

    # 1. A fresh job, run until `steps_before` steps are done on every rank.
    proc, t_launch = _start(_cmd(args, layout, ckpt, 10**9), log)
    deadline = time.monotonic() + args.timeout
    while True:
        its = _iters(ckpt)
        if len(its) >= ranks * args.steps_before:
            break
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"fresh run ended or stalled (log {log})")
        time.sleep(0.05)
    fresh_first = min(float(r["t"]) for r in its) - t_launch
    fresh_iter = statistics.median(float(r["compute_time"]) + float(r["comm_time"]) for r in its)

    # 2. SIGTERM to the launcher; wait for every process of the job to exit. (The launcher
    # itself is waited for through Popen: psutil would reap it and hide its exit status.)
    children = _children(proc)
    labels = {c.pid: _label(c) for c in children}
    t_sig = time.time()
    proc.send_signal(signal.SIGTERM)
    rc, exits, t_exit = _watch_exit(proc, children, args.timeout)
    step = latest_step(ckpt)
    if rc != 0 or step is None:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise RuntimeError(f"stop: launcher exit {rc}, checkpoint step {step}:\n" + "\n".join(tail))
    state = ckpt / f"step-{step:09d}" / "state.pt"
    ckpt_mb = state.stat().st_size / 1e6
    # `latest` is rewritten after the state file is fsync-ed and renamed into place.
    ckpt_written = (ckpt / "latest").stat().st_mtime - t_sig

    # 3. Resume to step + 3 and find its first completed iteration.
    offset = _lines(ckpt)
    proc, t_launch = _start(_cmd(args, layout, ckpt, step + 3), log)
    rc = proc.wait(timeout=args.timeout)
    t_done = time.time()
    resumed = _iters(ckpt, skip=offset)
    if rc != 0 or not resumed:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise RuntimeError(f"resume: exit {rc}, {len(resumed)} iterations:\n" + "\n".join(tail))
    first_step = min(int(r["step"]) for r in resumed)
    firsts = [r for r in resumed if int(r["step"]) == first_step]
    earliest = min(firsts, key=lambda r: float(r["t"]))
    first_iter_s = float(earliest["compute_time"]) + float(earliest["comm_time"])
    resume_first = float(earliest["t"]) - t_launch
    out = {
        "layout": layout,
        "stopped_at_step": step,
        "stop_s": t_exit - t_sig,
        "stop_trainers_exited_s": max(
            t - t_sig for pid, t in exits.items() if labels[pid] in ("rank", "worker", "ps")
        ),
        "stop_torchrun_exited_s": max(
            (t - t_sig for pid, t in exits.items() if labels[pid] == "torchrun"), default=None
        ),
        "ckpt_written_s": ckpt_written,
        "checkpoint_mb": ckpt_mb,
        "resumed_at_step": first_step,
        "resume_first_iter_s": resume_first,
        "resume_first_iter_all_ranks_s": max(float(r["t"]) for r in firsts) - t_launch,
        "resume_first_iter_own_s": first_iter_s,
        "resume_startup_s": resume_first - first_iter_s,
        "resume_run_s": t_done - t_launch,
        "fresh_first_iter_s": fresh_first,
        "steady_iter_s": fresh_iter,
        "processes": 1 + len(children),
    }
    shutil.rmtree(ckpt, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.restart_cost", description=__doc__.split("\n")[0]
    )
    p.add_argument("--layouts", default="ddp,ps", help="comma-separated: ddp, ps")
    p.add_argument("--model", default="resnet18")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--num-samples", type=int, default=50_000)
    p.add_argument("--steps-before", type=int, default=5, help="steps before the SIGTERM")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument(
        "--out", type=out_file("restart_cost.json"), default=RESULTS / "restart_cost.json"
    )
    args = p.parse_args(argv)
    args.out = ready(p, args.out)
    layouts = [x for x in args.layouts.split(",") if x]
    for x in layouts:
        if x not in LAYOUTS:
            p.error(f"unknown layout {x!r}; known: {', '.join(LAYOUTS)}")

    import_s = _import_s()
    print(f"[restart] python + trainer imports: {import_s:.2f} s", file=sys.stderr, flush=True)
    work = Path(tempfile.mkdtemp(prefix="mlsched-restart-"))
    runs = []
    try:
        for rep in range(args.repeat):
            for layout in layouts:
                load = os.getloadavg()[0]
                row = one_cycle(args, layout, work)
                row.update(repeat=rep, load1_before=load)
                runs.append(row)
                print(
                    f"[restart] rep {rep} {layout}: stop {row['stop_s']:.2f} s (ckpt at "
                    f"{row['ckpt_written_s']:.2f} s, {row['checkpoint_mb']:.1f} MB), resume to "
                    f"first iteration {row['resume_first_iter_s']:.2f} s (fresh "
                    f"{row['fresh_first_iter_s']:.2f} s), load {load:.1f}",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)

    figs = (
        "stop_s",
        "ckpt_written_s",
        "stop_trainers_exited_s",
        "stop_torchrun_exited_s",
        "resume_first_iter_s",
        "resume_first_iter_all_ranks_s",
        "resume_startup_s",
        "resume_first_iter_own_s",
        "fresh_first_iter_s",
        "steady_iter_s",
        "checkpoint_mb",
    )
    summary = []
    for layout in layouts:
        rows = [r for r in runs if r["layout"] == layout]
        srow: dict[str, Any] = {"layout": layout, "repeats": len(rows)}
        for f in figs:
            vals = [r[f] for r in rows if r[f] is not None]
            if not vals:  # no torchrun in a PS job
                continue
            srow[f] = statistics.median(vals)
            srow[f + "_min"] = min(vals)
            srow[f + "_max"] = max(vals)
        summary.append(srow)

    print(
        f"\n{args.model}, image {args.image_size}, batch {args.batch_size}, "
        f"{args.repeat} repeats (median [min-max])"
    )
    print(f"python start-up + trainer imports (one process): {import_s:.2f} s")
    for row in summary:
        print(f"{row['layout']}:")
        for f in (f for f in figs if f in row):
            unit = "MB" if f.endswith("_mb") else "s"
            print(f"  {f:32s} {row[f]:8.2f} {unit} [{row[f + '_min']:.2f}-{row[f + '_max']:.2f}]")
    doc = {
        "benchmark": "restart_cost",
        "command": "python -m benchmarks.restart_cost "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
        "params": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "python_import_s": import_s,
        "summary": summary,
        "runs": runs,
    }
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
