"""Run the benchmarks: ``python -m benchmarks`` (what ``make bench`` runs).

Each (case, policy) pair of :mod:`benchmarks.sim_throughput` runs in its own process, so
interpreter start-up and imports count towards the whole-process wall time that the goals
are about. Figures are printed as a table and written to
``benchmarks/results/sim_throughput.json`` together with a description of the machine.

Examples::

    python -m benchmarks                          # every case, every registered policy
    python -m benchmarks --cases trace            # only the trace-shaped case (FIFO)
    python -m benchmarks --policies fifo,drf --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.output import out_file, ready
from benchmarks.sim_throughput import GOALS

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"

CASES = GOALS  # case -> (goal for the whole-process wall time, default policies)


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count() or 0
    import numpy
    import scipy

    return {
        "cpu_model": cpu,
        "nproc": usable,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        # Other processes on the machine inflate wall times; this says how busy it was.
        "loadavg_1_5_15_at_start": list(os.getloadavg()),
    }


def registered_policies() -> list[str]:
    from mlsched.scheduler import registered

    return list(registered())


def run_once(case: str, policy: str, seed: int, timeout: float) -> dict[str, Any]:
    """One subprocess; its wall time includes start-up, imports and building the case."""
    cmd = [sys.executable, "-m", "benchmarks.sim_throughput", case, policy, "--seed", str(seed)]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    cpu_before = _children_cpu_s()
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return {
            "case": case,
            "policy": policy,
            "error": f"timed out after {timeout:g} s",
            "process_s": time.perf_counter() - start,
        }
    process_s = time.perf_counter() - start
    cpu_s = _children_cpu_s() - cpu_before
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {
            "case": case,
            "policy": policy,
            "process_s": process_s,
            "error": f"exit {proc.returncode}: " + " | ".join(tail),
        }
    figures: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    figures["process_s"] = process_s
    figures["cpu_s"] = cpu_s
    return figures


def _children_cpu_s() -> float:
    """User + system CPU seconds of the finished children (less sensitive than wall time
    to other processes competing for the two cores)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_pair(
    case: str, policy: str, *, seed: int, repeat: int, timeout: float, goal_s: float
) -> dict[str, Any]:
    runs = [run_once(case, policy, seed, timeout) for _ in range(repeat)]
    failed = [r for r in runs if "error" in r]
    if failed:
        out = dict(failed[0])
    else:
        times = [r["process_s"] for r in runs]
        out = dict(runs[times.index(statistics.median_low(times))])
        out["process_s_all"] = times
        out["process_s_min"] = min(times)
        out["cpu_s_all"] = [r["cpu_s"] for r in runs]
    out["goal_s"] = goal_s
    out["goal_met"] = "error" not in out and out["process_s"] <= goal_s
    return out


def _fmt(value: Any, spec: str = "") -> str:
    if value is None:
        return "-"
    return format(value, spec) if spec else str(value)


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        "case",
        "policy",
        "process s (median)",
        "min",
        "CPU s",
        "engine s",
        "goal s",
        "met",
        "slots",
        "done",
        "rejected",
        "unfinished",
        "GPU util",
    )
    print(" | ".join(head))
    for r in rows:
        if "error" in r:
            print(
                f"{r['case']} | {r['policy']} | {_fmt(r.get('process_s'), '.2f')} | "
                f"ERROR: {r['error']}"
            )
            continue
        print(
            " | ".join(
                [
                    r["case"],
                    r["policy"],
                    _fmt(r["process_s"], ".2f"),
                    _fmt(r.get("process_s_min"), ".2f"),
                    _fmt(r.get("cpu_s"), ".2f"),
                    _fmt(r["engine_s"], ".2f"),
                    _fmt(r["goal_s"], "g"),
                    "yes" if r["goal_met"] else "NO",
                    _fmt(r["slots"]),
                    _fmt(r["done"]),
                    _fmt(r["rejected"]),
                    _fmt(r["unfinished"]),
                    _fmt(r["mean_gpu_util"], ".2f"),
                ]
            )
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--cases", default=",".join(CASES), help=f"comma-separated subset of {', '.join(CASES)}"
    )
    parser.add_argument(
        "--policies",
        default="",
        help="comma-separated policy names (default: each case's own list)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs per pair; the median is reported (default 1)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds before a run is abandoned (default 600)",
    )
    parser.add_argument(
        "--out",
        type=out_file("sim_throughput.json"),
        default=RESULTS / "sim_throughput.json",
        help="the JSON file, or a directory to write sim_throughput.json into",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a goal is missed (default: only on errors)",
    )
    args = parser.parse_args(argv)
    args.out = ready(parser, args.out)

    host = machine()  # before the runs: the load average says how busy the machine was
    wanted = [p for p in args.policies.split(",") if p]
    registered = registered_policies()
    unknown = [p for p in wanted if p not in registered]
    if unknown:
        parser.error(f"unknown policies {unknown}; registered: {', '.join(registered)}")
    rows = []
    for case in [c for c in args.cases.split(",") if c]:
        if case not in CASES:
            parser.error(f"unknown case {case!r}; known: {', '.join(CASES)}")
        goal_s, own = CASES[case]
        policies = list(own) if own is not None else registered
        if wanted:
            policies = [p for p in policies if p in wanted]
        for policy in policies:
            row = run_pair(
                case,
                policy,
                seed=args.seed,
                repeat=args.repeat,
                timeout=args.timeout,
                goal_s=goal_s,
            )
            rows.append(row)
            print(
                f"[bench] {case}/{policy}: {_fmt(row.get('process_s'), '.2f')} s "
                f"(goal {goal_s:g} s) {'ok' if row['goal_met'] else 'MISSED'}",
                file=sys.stderr,
                flush=True,
            )
    print_table(rows)
    document = {
        "benchmark": "sim_throughput",
        "command": "python -m benchmarks " + " ".join(argv if argv is not None else sys.argv[1:]),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": host,
        "runs": rows,
    }
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    if any("error" in r for r in rows):
        return 1
    return 1 if args.strict and not all(r["goal_met"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
