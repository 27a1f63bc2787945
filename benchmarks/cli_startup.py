"""Start-up time of the cheap ``mlsched`` commands: each run is a fresh process, so the
figure is what a person waits for (interpreter start-up, the imports the command needs,
argument parsing). Figures go to ``benchmarks/results/cli_startup.json``.

    python -m benchmarks.cli_startup                    # every case, 10 runs each
    python -m benchmarks.cli_startup --cases help,status-help --repeat 20

Cases: ``help`` (``python -m mlsched --help``), ``status-help`` (``mlsched status
--help``, the console script), ``version`` (``mlsched --version``) and ``status-refused``
(``mlsched status`` against a loopback port nothing listens on: the client's imports,
one channel and the RPC refused at once; exit status 1).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.__main__ import ROOT, machine
from benchmarks.output import out_file, ready
from mlsched.net.ports import free_port

RESULTS = Path(__file__).resolve().parent / "results"
GOAL_S = 0.5
SCRIPT = Path(sys.executable).parent / "mlsched"  # the console script beside this interpreter


def commands() -> dict[str, tuple[list[str], int]]:
    """case -> (command line, the exit status it must end with)."""
    script = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "mlsched"]
    # Nothing listens there, so the RPC is refused at once instead of waiting for a deadline.
    nobody = f"127.0.0.1:{free_port()}"
    return {
        "help": ([sys.executable, "-m", "mlsched", "--help"], 0),
        "status-help": ([*script, "status", "--help"], 0),
        "version": ([*script, "--version"], 0),
        "status-refused": ([*script, "status", "--controller", nobody, "--timeout", "5"], 1),
    }


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one(cmd: list[str], expect: int) -> tuple[float, float]:
    """(wall s, CPU s) of one run of ``cmd``; raises if it exits otherwise than ``expect``."""
    cpu_before = _children_cpu_s()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != expect:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}: {' | '.join(tail)}")
    return wall, _children_cpu_s() - cpu_before


def measure(cmd: list[str], expect: int, repeat: int) -> dict[str, Any]:
    one(cmd, expect)  # warm-up: the first run pays for cold file caches
    runs = [one(cmd, expect) for _ in range(repeat)]
    walls = [w for w, _ in runs]
    return {
        "command": " ".join(Path(cmd[0]).name if i == 0 else a for i, a in enumerate(cmd)),
        "wall_s_all": walls,
        "median_s": statistics.median(walls),
        "min_s": min(walls),
        "max_s": max(walls),
        "cpu_s_median": statistics.median(c for _, c in runs),
        "goal_s": GOAL_S,
        "goal_met": statistics.median(walls) < GOAL_S,
    }


def main(argv: list[str] | None = None) -> int:
    cases = commands()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=",".join(cases), help="comma-separated subset")
    ap.add_argument("--repeat", type=int, default=10, help="runs per case (median reported)")
    ap.add_argument(
        "--out", type=out_file("cli_startup.json"), default=RESULTS / "cli_startup.json"
    )
    args = ap.parse_args(argv)
    args.out = ready(ap, args.out)
    wanted = [c for c in args.cases.split(",") if c]
    unknown = [c for c in wanted if c not in cases]
    if unknown:
        ap.error(f"unknown cases {unknown}; known: {', '.join(cases)}")
    host = machine()  # before the runs: the load average says how busy the machine was
    results = {}
    for case in wanted:
        cmd, expect = cases[case]
        results[case] = r = measure(cmd, expect, args.repeat)
        print(
            f"{case}: median {r['median_s']:.3f} s (min {r['min_s']:.3f}, max "
            f"{r['max_s']:.3f}, CPU {r['cpu_s_median']:.3f}) over {args.repeat} runs; "
            f"goal < {GOAL_S:g} s {'met' if r['goal_met'] else 'MISSED'}"
        )
    document = {
        "benchmark": "cli_startup",
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": host,
        "repeat": args.repeat,
        # Set, mlsched's own modules are compiled from source on every run (no .pyc written).
        "pythondontwritebytecode": os.environ.get("PYTHONDONTWRITEBYTECODE"),
        "cases": results,
    }
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
