"""Philly-shaped traces of 1,000 to 100,000 jobs on clusters of 512 to 8,192 GPUs.

Each trace is made by ``mlsched trace generate`` (:mod:`mlsched.workloads.traces.synth`:
most jobs on one GPU, heavy-tailed run times, retried failures, a daily cycle, arrivals that
keep ``--load`` of the GPUs busy), imported with ``mlsched trace import --format philly``
and simulated with ``mlsched simulate``, each command in its own process as a user runs them,
so start-up, imports, reading the file and writing the results count. The closed loop is on:
every running job reports a measurement each slot and the runtime model refits.

Two sweeps, one figure (``--plot``): the number of jobs on ``--gpus`` GPUs, and the number of
GPUs under ``--sweep-jobs`` jobs at the same load. The goals (issue: scale) are for the
100,000-job trace: FIFO under 60 s, drf and tiresias under 120 s, each process under 2 GB.

    python -m benchmarks.philly_scale                       # the full sweep (several minutes)
    python -m benchmarks.philly_scale --jobs 1000 --gpus-sweep ''   # one quick point
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.output import out_file, ready

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
FIGURE = ROOT / "docs" / "figures" / "philly_scale.png"
#: policy -> whole-process goal (seconds) on the 100,000-job trace.
GOALS = {"fifo": 60.0, "drf": 120.0, "tiresias": 120.0}
MEMORY_GOAL_MB = 2048.0
GOAL_JOBS = 100_000


def goal(jobs: int, policy: str, res: dict[str, Any]) -> dict[str, Any]:
    """The goal fields of a row (``goal_s``, ``goal_met``): set for a policy with a goal
    at 100,000 jobs that ran (no ``error``); met when both its wall time and its peak
    memory are within their goals. Empty otherwise."""
    if jobs != GOAL_JOBS or policy not in GOALS or "error" in res:
        return {}
    met = res["wall_s"] <= GOALS[policy] and res["peak_rss_mb"] <= MEMORY_GOAL_MB
    return {"goal_s": GOALS[policy], "goal_met": bool(met)}


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"a comma list of integers, not {text!r}") from None


def run_child(cmd: list[str], *, timeout: float) -> dict[str, Any]:
    """Run ``cmd``: its wall time, and its own CPU seconds and peak RSS as the kernel
    accounts them for that child (``wait4``)."""
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    with tempfile.TemporaryFile("w+") as log:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                return {"error": f"timed out after {timeout:g} s", "wall_s": timeout}
            time.sleep(0.02)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        output = log.read()
    out: dict[str, Any] = {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024.0,  # KiB on Linux
    }
    if proc.returncode != 0:
        out["error"] = f"exit {proc.returncode}: " + " | ".join(output.strip().splitlines()[-4:])
    return out


def _required(cmd: list[str], *, timeout: float) -> dict[str, Any]:
    """:func:`run_child` of a step the sweep cannot go on without: its failure stops it."""
    res = run_child(cmd, timeout=timeout)
    if "error" in res:
        raise RuntimeError(f"{' '.join(cmd[3:5])}: {res['error']}")
    return res


def prepare(
    work: Path, jobs: int, gpus: int, *, load: float, slot_s: float, seed: int, timeout: float
) -> dict[str, Any]:
    """Generate and import one trace (kept in ``work`` for the next run); the figures."""
    trace = work / f"philly-{jobs}-{gpus}-s{seed}.json"
    cluster = work / f"cluster-{gpus}.yaml"
    workload = work / f"philly-{jobs}-{gpus}-s{seed}-{slot_s:g}.workload.json"
    mlsched = [sys.executable, "-m", "mlsched"]
    figures: dict[str, Any] = {"jobs": jobs, "gpus": gpus}
    if not trace.exists() or not cluster.exists():
        gen = _required(
            [
                *mlsched,
                "trace",
                "generate",
                "--jobs",
                str(jobs),
                "--gpus",
                str(gpus),
                "--load",
                str(load),
                "--seed",
                str(seed),
                "--out",
                str(trace),
                "--cluster-out",
                str(cluster),
            ],
            timeout=timeout,
        )
        figures["generate_s"] = gen["wall_s"]
    if not workload.exists():
        imp = _required(
            [
                *mlsched,
                "trace",
                "import",
                str(trace),
                "--format",
                "philly",
                "--cluster",
                str(cluster),
                "--slot-seconds",
                f"{slot_s:g}",
                "--out",
                str(workload),
            ],
            timeout=timeout,
        )
        figures["import_s"] = imp["wall_s"]
        figures["import_peak_rss_mb"] = imp["peak_rss_mb"]
    figures["workload"] = str(workload)
    return figures


def simulate(workload: str, policy: str, out_dir: Path, *, timeout: float) -> dict[str, Any]:
    """One ``mlsched simulate`` process; its figures and the run's summary."""
    res = run_child(
        [
            sys.executable,
            "-m",
            "mlsched",
            "simulate",
            "--workload",
            workload,
            "--policy",
            policy,
            "--out",
            str(out_dir),
        ],
        timeout=timeout,
    )
    if "error" not in res:
        summary = json.loads((out_dir / "summary.json").read_text())
        res.update(
            completed=summary.get("completed"),
            engine_s=summary.get("wall_seconds"),
            slots=round(summary["makespan"] / summary["slot_seconds"])
            if summary.get("makespan")
            else None,
            avg_jct_h=(summary.get("avg_jct") or 0.0) / 3600.0,
            gpu_util=summary.get("utilization", {}).get("gpu"),
        )
    return res


def plot(rows: list[dict[str, Any]], gpus: int, sweep_jobs: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for policy in sorted({r["policy"] for r in rows}):
        mine = [r for r in rows if r["policy"] == policy and "error" not in r]
        by_jobs = sorted((r["jobs"], r["wall_s"]) for r in mine if r["gpus"] == gpus)
        by_gpus = sorted((r["gpus"], r["wall_s"]) for r in mine if r["jobs"] == sweep_jobs)
        if by_jobs:
            left.plot(*zip(*by_jobs, strict=True), marker="o", label=policy)
        if by_gpus:
            right.plot(*zip(*by_gpus, strict=True), marker="o", label=policy)
    from matplotlib.ticker import FuncFormatter

    for ax, xlabel, title, xs in (
        (left, "jobs", f"{gpus:,} GPUs", sorted({r["jobs"] for r in rows if r["gpus"] == gpus})),
        (
            right,
            "cluster GPUs",
            f"{sweep_jobs:,} jobs",
            sorted({r["gpus"] for r in rows if r["jobs"] == sweep_jobs}),
        ),
    ):
        ax.set_xscale("log")
        ax.set_xticks(xs, [f"{x:,}" for x in xs])
        ax.minorticks_off()
        if ax is left:  # decades of jobs: decades of seconds
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        else:
            ax.set_ylim(
                bottom=0,
                top=1.15 * max((r["wall_s"] for r in rows if r["jobs"] == sweep_jobs), default=1),
            )
        ax.set_xlabel(xlabel)
        ax.set_ylabel("mlsched simulate, whole process (s)")
        ax.set_title(f"Philly-shaped trace, {title}")
        ax.grid(True, alpha=0.3)
        ax.legend()
    goals: dict[float, list[str]] = {}
    for policy, goal in GOALS.items():
        goals.setdefault(goal, []).append(policy)
    for goal, names in goals.items():
        left.axhline(goal, ls=":", color="grey")
        left.annotate(
            f"goal of {', '.join(names)}: {goal:g} s",
            (left.get_xlim()[0], goal),
            fontsize=7,
            va="bottom",
        )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.philly_scale", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--jobs",
        type=_ints,
        default=[1000, 10000, 100000],
        help="trace sizes on --gpus GPUs (default 1000,10000,100000)",
    )
    parser.add_argument("--gpus", type=int, default=2048, help="cluster GPUs (default 2048)")
    parser.add_argument(
        "--gpus-sweep",
        type=_ints,
        default=[512, 2048, 8192],
        help="cluster sizes under --sweep-jobs jobs (default 512,2048,8192)",
    )
    parser.add_argument("--sweep-jobs", type=int, default=10000)
    parser.add_argument("--policies", default=",".join(GOALS))
    parser.add_argument("--load", type=float, default=0.8)
    parser.add_argument(
        "--slot-seconds",
        type=float,
        default=360.0,
        help="slot length (default 360 s, the other simulator's round)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=900.0, help="per process (s)")
    parser.add_argument("--work", type=Path, help="folder for the traces (default: a temp dir)")
    parser.add_argument(
        "--out", type=out_file("philly_scale.json"), default=RESULTS / "philly_scale.json"
    )
    parser.add_argument("--plot", type=Path, default=FIGURE, help="figure to write (PNG)")
    parser.add_argument(
        "--from", dest="source", type=Path, help="only redraw the figure from a results file"
    )
    args = parser.parse_args(argv)
    if args.source:
        saved = json.loads(args.source.read_text())
        plot(saved["rows"], args.gpus, args.sweep_jobs, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
        return 0
    ready(parser, args.out)
    policies = [p for p in args.policies.split(",") if p]
    points = [(j, args.gpus) for j in args.jobs]
    points += [(args.sweep_jobs, g) for g in args.gpus_sweep if (args.sweep_jobs, g) not in points]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="philly-scale-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for jobs, gpus in points:
            prep = prepare(
                work,
                jobs,
                gpus,
                load=args.load,
                slot_s=args.slot_seconds,
                seed=args.seed,
                timeout=args.timeout,
            )
            for policy in policies:
                print(
                    f"[philly-scale] {jobs} jobs, {gpus} GPUs, {policy} ...",
                    file=sys.stderr,
                    flush=True,
                )
                res = simulate(
                    prep["workload"],
                    policy,
                    work / f"out-{jobs}-{gpus}-{policy}",
                    timeout=args.timeout,
                )
                row = {
                    **{k: v for k, v in prep.items() if k != "workload"},
                    "policy": policy,
                    **res,
                }
                row.update(goal(jobs, policy, res))
                rows.append(row)
                print(json.dumps(row), flush=True)
    from benchmarks.__main__ import machine

    args.out.write_text(
        json.dumps(
            {
                "machine": machine(),
                "load": args.load,
                "slot_seconds": args.slot_seconds,
                "rows": rows,
            },
            indent=1,
        )
    )
    if args.plot:
        plot(rows, args.gpus, args.sweep_jobs, args.plot)
    print(f"wrote {args.out}" + (f" and {args.plot}" if args.plot else ""), file=sys.stderr)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
