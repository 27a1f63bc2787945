"""Instrumentation overhead of the trainers against bare PyTorch loops (goal: <= 3%).

Each trainer job (``python -m mlsched.trainers`` processes, started the way
:func:`mlsched.trainers.launch.launch` starts them) runs the same model, batches and number
of processes as a bare loop with no metrics, telemetry, stop flag or checkpoint:

============  ==============================  ==========================================
case          trainer                         bare loop
============  ==============================  ==========================================
ps-async      PS async, 2 workers + 1 PS      :mod:`benchmarks.bare_ps` ``--mode async``
ps-sync       PS sync, 2 workers + 1 PS       :mod:`benchmarks.bare_ps` ``--mode sync``
ddp           DDP 2 ranks (default: timed     :mod:`benchmarks.bare_ddp` ``--sync-hook``
              all-reduce hook, no overlap)    (torchrun, the same synchronous all-reduce
                                              hook, untimed)
ddp-overlap   DDP 2 ranks ``--overlap``       :mod:`benchmarks.bare_ddp` (DDP's default
                                              overlapped all-reduce)
horovod       Horovod 2 ranks (if installed)  :mod:`benchmarks.bare_ddp` ``--horovod``
                                              (``hvd.DistributedOptimizer``)
============  ==============================  ==========================================

Two figures per run, taken the same way from both after ``--warmup`` iterations:

* ``iter_ms``: the median per-iteration time of every worker/rank iteration: the trainer's
  ``compute_time + comm_time`` (its own ``perf_counter`` spans) against the bare loop's
  ``perf_counter`` around each iteration;
* ``step_ms``: end-to-end wall time per global step over the measured window (no start-up):
  from the completion time of the last warm-up step to that of the last step, divided by
  the steps in between (completion = ``t`` of the iteration record, the latest rank's for
  synchronous jobs), so whatever the trainer does between its timed spans counts too.

With both DDP cases the summary has one more row, the measuring mode (``ddp``) against
overlapped bare DDP: what running the all-reduce apart from the backward pass costs, so
that computation and communication are measured separately (spec 003), beyond the
instrumentation.

Trainer and bare runs alternate (ABBA over repeats) to spread drift from other load on the
machine; overheads are medians over the repeats of the paired ratios. Results go to
``benchmarks/results/trainer_overhead.json``.

    python -m benchmarks.trainer_overhead                    # resnet20, batch 32, 3 repeats
    python -m benchmarks.trainer_overhead --cases ddp,ps-sync --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.machine import _horovodrun, horovod_ok, machine
from benchmarks.output import out_file, ready
from benchmarks.processes import CpuSampler, _env, _run
from mlsched.trainers.launch import flag_value

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
GOAL = 0.03

CASES = ("ps-async", "ps-sync", "ddp", "ddp-overlap", "horovod")
FIGURES = ("iter_ms", "step_ms", "cpu_ms_per_step")


def _trainer_cfg(case: str, args: argparse.Namespace, ckpt: Path) -> Any:
    from mlsched.core.train_config import Backend, TrainConfig
    from mlsched.trainers.launch import free_port

    steps = args.warmup + args.iters
    common: dict[str, Any] = dict(
        model=args.model,
        batch_size=args.batch_size,
        image_size=args.image_size,
        num_samples=args.num_samples,
        threads=1,
        checkpoint_dir=str(ckpt),
        metrics=str(ckpt / "metrics.jsonl"),
        rendezvous=f"127.0.0.1:{free_port()}",
        timeout_s=300.0,
        job_id=f"overhead-{case}",
    )
    if case == "ps-async":
        # Every worker iteration is one global step: W times as many steps for as many
        # iterations per worker.
        return TrainConfig(
            arch="ps", mode="async", num_workers=2, num_ps=1, stop_step=2 * steps, **common
        )
    if case == "ps-sync":
        return TrainConfig(
            arch="ps", mode="sync", num_workers=2, num_ps=1, stop_step=steps, **common
        )
    backend = Backend.HOROVOD if case == "horovod" else Backend.DDP
    return TrainConfig(
        arch="allreduce",
        backend=backend,
        num_workers=2,
        num_ps=0,
        stop_step=steps,
        overlap=case == "ddp-overlap",
        **common,
    )


def run_trainer(
    case: str, args: argparse.Namespace, work: Path, *, instrument: bool = False
) -> dict[str, Any]:
    from mlsched.trainers.launch import commands

    ckpt = Path(tempfile.mkdtemp(prefix=f"trainer-{case}-", dir=work))
    cfg = _trainer_cfg(case, args, ckpt)
    cmds = commands(cfg)
    if instrument:  # each trainer process runs under _instrumented_child
        wrap = ["-m", "benchmarks.trainer_overhead", "--instrument-child", str(ckpt)]
        cmds = [_replace_module(c, wrap) for c in cmds]
    wall, cpu = _run(cmds, _env(1), ckpt / "log.txt", args.timeout)
    records = [json.loads(x) for x in (ckpt / "metrics.jsonl").read_text().splitlines() if x]
    iters = [r for r in records if r.get("type") == "iter"]
    streams: dict[Any, list[tuple[float, float, int]]] = {}
    for r in iters:
        # All-reduce ranks run in lockstep: one stream of steps (ranks need not be told
        # apart, which also holds for trainers that label every rank 0). PS workers: one
        # stream each.
        key = (r["role"], r["rank"]) if cfg.arch == "ps" else "allreduce"
        streams.setdefault(key, []).append(
            (float(r["t"]), float(r["compute_time"]) + float(r["comm_time"]), int(r["step"]))
        )
    out = _figures(streams, args.warmup, lockstep=cfg.mode == "sync", cpu=cpu)
    out.update(kind="trainer", wall_s=wall)
    if instrument:
        out["breakdown"] = _breakdown(ckpt, iters)
    shutil.rmtree(ckpt, ignore_errors=True)
    return out


def _replace_module(cmd: list[str], wrap: list[str]) -> list[str]:
    i = cmd.index("mlsched.trainers")
    assert cmd[i - 1] == "-m", cmd
    return [*cmd[: i - 1], *wrap, *cmd[i + 1 :]]


# Where the trainer's own time goes -----------------------------------------------------------
def _instrumented_child(out_dir: str, argv: list[str]) -> int:
    """Run one trainer process (``python -m mlsched.trainers ARGV``) with its
    instrumentation and control calls wrapped in timers, and write the totals to
    ``OUT_DIR/instr-<pid>.json`` at exit. The wrappers cost well under a microsecond per
    call; nothing in the trainer is changed."""
    from collections import defaultdict

    import torch.distributed as dist

    from mlsched.trainers import metrics, telemetry
    from mlsched.trainers.__main__ import main as trainer_main

    total: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    each: dict[str, list[float]] = defaultdict(list)

    def timed(name: str | Any, fn: Any) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            key = name(*a, **k) if callable(name) else name
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                dt = time.perf_counter() - t0
                total[key] += dt
                count[key] += 1
                each[key].append(dt)

        return wrapper

    def emit_kind(sink: Any, record: dict[str, Any]) -> str:
        return f"emit:{record.get('type')}"

    metrics.MetricsSink.emit = timed(emit_kind, metrics.MetricsSink.emit)  # type: ignore[method-assign]
    metrics.IterationStats.add = timed("stats.add", metrics.IterationStats.add)  # type: ignore[method-assign]
    telemetry.TelemetrySampler.sample = timed(  # type: ignore[method-assign]
        "telemetry.sample (thread)", telemetry.TelemetrySampler.sample
    )
    dist.all_reduce = timed(  # the stop flag is the only 1-element all-reduce
        lambda t, *a, **k: "stop-flag all-reduce" if t.numel() == 1 else "gradient all-reduce",
        dist.all_reduce,
    )
    from mlsched.trainers.allreduce.horovod import horovod_available

    if "horovod" in argv and horovod_available():
        import horovod.torch as hvd

        hvd.allreduce = timed(
            lambda *a, **k: (
                "stop-flag all-reduce" if k.get("name") == "stop" else "done all-reduce"
            ),
            hvd.allreduce,
        )
        hvd.grouped_allreduce = timed("gradient all-reduce", hvd.grouped_allreduce)
    try:
        return trainer_main(argv)
    finally:
        doc = {
            "pid": os.getpid(),
            "argv": argv,
            "seconds": total,
            "calls": count,
            "median_call_s": {k: statistics.median(v) for k, v in each.items()},
            "min_call_s": {k: min(v) for k, v in each.items()},
        }
        Path(out_dir, f"instr-{os.getpid()}.json").write_text(json.dumps(doc))


def _breakdown(ckpt: Path, iters: list[dict[str, Any]]) -> dict[str, Any]:
    """Per trainer process kind: mean microseconds per iteration of each wrapped call, and
    as a share of the mean iteration time (compute_time + comm_time)."""
    mean_iter = statistics.fmean(float(r["compute_time"]) + float(r["comm_time"]) for r in iters)
    out: dict[str, Any] = {"mean_iter_ms": 1e3 * mean_iter, "processes": {}}
    per_role: dict[str, list[dict[str, Any]]] = {}
    for f in sorted(ckpt.glob("instr-*.json")):
        doc = json.loads(f.read_text())
        argv = doc["argv"]
        role = flag_value(argv, "--role") or "rank"
        per_role.setdefault(role, []).append(doc)
    for role, docs in per_role.items():
        # Per trainer iteration: a worker/rank process runs its share of the iterations, a
        # PS process serves every one of them.
        its = len(iters) if role == "ps" else len(iters) / len(docs)
        keys = sorted({k for d in docs for k in d["seconds"]})
        rows = {}
        for k in keys:
            sec = statistics.fmean(d["seconds"].get(k, 0.0) for d in docs)
            calls = statistics.fmean(d["calls"].get(k, 0) for d in docs)
            rows[k] = {
                "calls_per_iter": calls / its,
                "us_per_iter": 1e6 * sec / its,
                "share_of_iter": sec / its / mean_iter,
                "median_call_us": 1e6
                * statistics.median(d["median_call_s"][k] for d in docs if k in d["median_call_s"]),
                "min_call_us": 1e6 * min(d["min_call_s"][k] for d in docs if k in d["min_call_s"]),
            }
        out["processes"][role] = rows
    return out


def run_bare(case: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from mlsched.trainers.launch import free_port

    out_dir = Path(tempfile.mkdtemp(prefix=f"bare-{case}-", dir=work))
    steps = args.warmup + args.iters
    common = [
        "--model",
        args.model,
        "--batch-size",
        str(args.batch_size),
        "--image-size",
        str(args.image_size),
        "--num-samples",
        str(args.num_samples),
        "--threads",
        "1",
        "--out",
        str(out_dir),
    ]
    py = sys.executable
    if case.startswith("ps-"):
        mode = case.removeprefix("ps-")
        n = 2 * steps if mode == "async" else steps
        cmd = [py, "-m", "benchmarks.bare_ps", "--mode", mode, "--workers", "2", "--ps", "1"]
        cmds = [[*cmd, "--steps", str(n), *common]]
        arch = "ps"
    elif case == "horovod":
        runner = _horovodrun()
        assert runner is not None
        cmds = [
            [
                *(runner, "-np", "2", "-H", "localhost:2", "--gloo"),
                *(py, "-m", "benchmarks.bare_ddp", "--horovod", "--steps", str(steps)),
                *common,
            ]
        ]
        arch, mode = "allreduce", "sync"
    else:
        cmds = [
            [
                *(py, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2"),
                *("--master-addr", "127.0.0.1", "--master-port", str(free_port())),
                *("-m", "benchmarks.bare_ddp", "--steps", str(steps)),
                *(["--sync-hook"] if case == "ddp-sync" else []),
                *common,
            ]
        ]
        arch, mode = "allreduce", "sync"
    wall, cpu = _run(cmds, _env(1), out_dir / "log.txt", args.timeout)
    streams: dict[Any, list[tuple[float, float, int]]] = {}
    for f in sorted(out_dir.glob("bare-*.json")):
        doc = json.loads(f.read_text())
        key = f.stem if arch == "ps" else "allreduce"
        streams.setdefault(key, []).extend(
            (t, d, i) for i, (t, d) in enumerate(zip(doc["t_end"], doc["iter_s"], strict=True))
        )
    out = _figures(streams, args.warmup, lockstep=mode == "sync", cpu=cpu)
    out.update(kind="bare", wall_s=wall)
    shutil.rmtree(out_dir, ignore_errors=True)
    return out


def _figures(
    streams: dict[Any, list[tuple[float, float, int]]],
    warmup: int,
    lockstep: bool,
    cpu: CpuSampler,
) -> dict[str, Any]:
    """Median iteration time and end-to-end time per global step after warm-up.

    Each stream (one per worker, or one for all ranks together) holds (completion time,
    iteration seconds, step) records. ``lockstep``: synchronous jobs (all-reduce ranks,
    sync PS rounds), where a step completes when its last rank/worker finishes it; async
    PS: each worker iteration is one global step.
    """
    durations: list[float] = []
    completions: list[float] = []
    if lockstep:
        recs = [r for stream in streams.values() for r in stream]
        first = min(step for _, _, step in recs)
        durations = [d for _, d, step in recs if step >= first + warmup]
        per_step: dict[int, float] = {}
        for t, _, step in recs:
            per_step[step] = max(per_step.get(step, 0.0), t)
        completions = list(per_step.values())
        skip = warmup
    else:
        for stream in streams.values():
            stream.sort()
            durations += [d for _, d, _ in stream[warmup:]]
            completions += [t for t, _, _ in stream]
        skip = warmup * len(streams)
    completions.sort()
    window = completions[skip - 1 :]
    steps = len(window) - 1
    wall = window[-1] - window[0]
    used = cpu.cpu_between(window[0], window[-1])
    return {
        "iter_ms": 1e3 * statistics.median(durations),
        "iter_ms_mean": 1e3 * statistics.fmean(durations),
        "iterations": len(durations),
        "step_ms": 1e3 * wall / steps,
        "cpu_ms_per_step": 1e3 * used["all"] / steps,
        "cpu_ms_per_step_by_process": {k: 1e3 * v / steps for k, v in used.items()},
        "steps": steps,
        "window_s": wall,
    }


# Driver -------------------------------------------------------------------------------------
def _bare_case(case: str) -> str:
    """The bare run a trainer case is compared with: the same communication pattern."""
    return {"ddp": "ddp-sync", "ddp-overlap": "ddp"}.get(case, case)


def _pairs(cases: list[str]) -> list[tuple[str, str]]:
    """(trainer case, bare case) rows of the summary. With both DDP cases, also the
    measuring mode against overlapped bare DDP: what measuring communication apart costs."""
    pairs = [(c, _bare_case(c)) for c in cases]
    if "ddp" in cases and "ddp-overlap" in cases:
        pairs.append(("ddp", "ddp"))
    return pairs


def main(argv: list[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["--instrument-child"]:
        return _instrumented_child(raw[1], raw[2:])
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.trainer_overhead", description=__doc__.split("\n")[0]
    )
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--model", default="resnet20")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--num-samples", type=int, default=50_000)
    p.add_argument("--warmup", type=int, default=8, help="iterations per worker left out")
    p.add_argument("--iters", type=int, default=32, help="measured iterations per worker")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument(
        "--out", type=out_file("trainer_overhead.json"), default=RESULTS / "trainer_overhead.json"
    )
    p.add_argument(
        "--breakdown",
        choices=["yes", "no", "only"],
        default="yes",
        help="also run each trainer once with its instrumentation calls timed (only: just "
        "that, updating the 'breakdown' of an existing --out file)",
    )
    args = p.parse_args(argv)
    args.out = ready(p, args.out)

    cases = [c for c in args.cases.split(",") if c]
    for c in cases:
        if c not in CASES:
            p.error(f"unknown case {c!r}; known: {', '.join(CASES)}")
    skipped: dict[str, str] = {}
    if "horovod" in cases and not horovod_ok():
        cases.remove("horovod")
        skipped["horovod"] = "Horovod not installed (make horovod)"
    doc: dict[str, Any] = {}
    if args.breakdown == "only" and args.out.exists():
        doc = json.loads(args.out.read_text())
    work = Path(tempfile.mkdtemp(prefix="mlsched-overhead-"))
    try:
        if args.breakdown != "only":
            load_before = os.getloadavg()
            runs, summary = _compare(args, cases, work)
            doc = {
                "benchmark": "trainer_overhead",
                "command": "python -m benchmarks.trainer_overhead "
                + " ".join(argv if argv is not None else sys.argv[1:]),
                "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "machine": machine(),
                "loadavg_before": list(load_before),
                "loadavg_after": list(os.getloadavg()),
                "params": {
                    k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
                },
                "goal": GOAL,
                "skipped": skipped,
                "summary": summary,
                "runs": runs,
            }
        if args.breakdown != "no":
            doc["breakdown"] = _breakdown_pass(args, cases, work)
            doc["breakdown_machine"] = machine()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for case, why in skipped.items():
        print(f"{case}: skipped ({why})")
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


def _compare(
    args: argparse.Namespace, cases: list[str], work: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Trainer against bare runs, alternating, ``args.repeat`` times; prints the table."""
    bare_cases = list(dict.fromkeys(_bare_case(c) for c in cases))
    runs: list[dict[str, Any]] = []
    for rep in range(args.repeat):
        for bc in bare_cases:
            trainers = [c for c in cases if _bare_case(c) == bc]
            order: list[tuple[str, str]] = [("bare", bc)] + [("trainer", c) for c in trainers]
            if rep % 2 == 1:  # ABBA: alternate which goes first
                order.reverse()
            for kind, case in order:
                load = os.getloadavg()[0]
                fn = run_bare if kind == "bare" else run_trainer
                row = fn(case, args, work)
                row.update(case=case, repeat=rep, load1_before=load)
                runs.append(row)
                procs = ", ".join(
                    f"{k} {v:.1f}"
                    for k, v in row["cpu_ms_per_step_by_process"].items()
                    if k != "all"
                )
                print(
                    f"[overhead] rep {rep} {kind:7s} {case:12s} iter {row['iter_ms']:7.1f} ms"
                    f"  step {row['step_ms']:7.1f} ms  CPU {row['cpu_ms_per_step']:6.1f} ms/step"
                    f" ({procs})  (n={row['iterations']}, wall {row['wall_s']:.1f} s, "
                    f"load {load:.1f})",
                    file=sys.stderr,
                    flush=True,
                )

    summary = []
    for case, bc in _pairs(cases):
        t_rows = sorted(
            (r for r in runs if r["kind"] == "trainer" and r["case"] == case),
            key=lambda r: r["repeat"],
        )
        b_rows = sorted(
            (r for r in runs if r["kind"] == "bare" and r["case"] == bc),
            key=lambda r: r["repeat"],
        )
        srow: dict[str, Any] = {"case": case, "bare": bc}
        for fig in FIGURES:
            ratios = [t[fig] / b[fig] - 1.0 for t, b in zip(t_rows, b_rows, strict=True)]
            srow[f"trainer_{fig}"] = statistics.median(r[fig] for r in t_rows)
            srow[f"bare_{fig}"] = statistics.median(r[fig] for r in b_rows)
            srow[f"overhead_{fig}"] = statistics.median(ratios)
            srow[f"overhead_{fig}_all"] = ratios
        srow["goal_met"] = {fig: srow[f"overhead_{fig}"] <= GOAL for fig in FIGURES}
        summary.append(srow)

    print(
        f"\nmodel {args.model}, batch {args.batch_size}, image {args.image_size}, "
        f"{args.warmup} warm-up + {args.iters} measured iterations per worker, "
        f"{args.repeat} repeats (medians; overhead: median of the paired ratios)"
    )
    print(
        "case | bare | iter ms trainer / bare (overhead) | step ms trainer / bare (overhead) "
        "| CPU ms per step trainer / bare (overhead)"
    )
    for r in summary:
        cells = [
            f"{r[f'trainer_{fig}']:.1f} / {r[f'bare_{fig}']:.1f} "
            f"({100 * r[f'overhead_{fig}']:+.1f}%{'' if r['goal_met'][fig] else ' > 3%'})"
            for fig in FIGURES
        ]
        print(" | ".join([r["case"], r["bare"], *cells]))
    return runs, summary


def _breakdown_pass(args: argparse.Namespace, cases: list[str], work: Path) -> dict[str, Any]:
    """Each trainer once with its instrumentation and control calls timed; prints them."""
    out: dict[str, Any] = {}
    print("\nwhere the trainers' own time goes (us per iteration, % of the mean iteration):")
    for case in cases:
        row = run_trainer(case, args, work, instrument=True)
        bd = row["breakdown"]
        out[case] = bd
        print(f"{case} (mean iteration {bd['mean_iter_ms']:.1f} ms):")
        for role, calls in bd["processes"].items():
            for name, c in calls.items():
                print(
                    f"  {role:6s} {name:28s} {c['us_per_iter']:9.1f} us "
                    f"({100 * c['share_of_iter']:.3f}%, {c['calls_per_iter']:.2f} calls; "
                    f"per call median {c['median_call_us']:.1f} us, min {c['min_call_us']:.1f} us)"
                )
    return out


if __name__ == "__main__":
    raise SystemExit(main())
