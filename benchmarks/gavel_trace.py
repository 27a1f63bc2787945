"""The same trace, side by side: Gavel's generated 5,000-job trace through mlsched and Gavel.

Simulates the trace with each policy (default ``fifo`` and ``gavel-fifo``; closed loop
on; cluster 36 v100 + 36 p100 + 36 k80 one-GPU servers, 360-s slots) as one process that
reads the trace itself (``mlsched simulate --trace-format gavel``), the figure compared
with Gavel's; and as a user of a workload file runs it, ``mlsched trace import`` then
``simulate``, each in its own process (the records must be the same). Start-up and
imports count. Where Gavel's simulator is installed beside the repository
(``--gavel DIR``, default ``../gavel``: a checkout of stanford-futuredata/gavel with its
RPC stubs built), each repeat runs it too on the same file, FIFO, seed 0, one after the
other with mlsched (paired), and reads its average JCT, utilization and per-type rounds
from its output; else it says how to install it and compares with the figures in the
README beside the trace. Each repeat runs Gavel first, then mlsched's policies in an
order that turns by one each repeat, so that no policy is always the process that runs
right after Gavel's.

The average JCT is measured both ways: mlsched's own (completion - arrival slot) and
Gavel's (completion - the trace's arrival second). The report explains the gap between
mlsched's FIFO and Gavel's: ``gavel-fifo`` runs Gavel's FIFO semantics in mlsched's engine
(docs/algorithms/baselines.md), so what it closes is semantics and what is left is the
two engines.

    python -m benchmarks.gavel_trace [--repeat 5] [--trace PATH] [--policies fifo,gavel-fifo]
        [--gavel DIR] [--gavel-python PY] [--out DIR|FILE]
"""

from __future__ import annotations

import argparse
import collections
import csv
import functools
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.output import out_file, ready

__all__ = ["GAVEL", "INSTALL", "main", "run_gavel", "run_once"]

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT.parent / "shared" / "data" / "gavel" / "gen_n5000.trace"
DEFAULT_GAVEL = ROOT.parent / "gavel"
#: The other simulator's figures on this trace (README beside it): FIFO, whole process.
GAVEL = {"avg_jct_h": 3.06, "rounds": 2790, "utilization": 0.453, "process_s": 20.6}
GOAL_FRACTION = 1 / 20
SLOT_S = 360
CLUSTER = {
    "servers": [
        {"name": t, "count": 36, "capacity": {"gpu": 1, "cpu": 8}, "gpu_type": t}
        for t in ("v100", "p100", "k80")
    ]
}
INSTALL = """\
Gavel is not installed beside the repository ({where}). To pair with it:
  git clone https://github.com/stanford-futuredata/gavel {where}
  python3 -m venv {where}/.venv
  {where}/.venv/bin/pip install numpy cvxpy scikit-learn matrix-completion psutil grpcio grpcio-tools
  (cd {where}/scheduler && mkdir -p runtime/rpc_stubs && PATH={where}/.venv/bin:$PATH make rpc_stubs)
Until then the figures of its README (../shared/data/gavel/README.md) stand in."""


def byte_compile(python: str, *where: Path) -> None:
    """Write the bytecode of ``where``'s modules for ``python`` before any run is timed, as
    installing a wheel does: an environment with PYTHONDONTWRITEBYTECODE set (or a source
    tree changed since its last run) would otherwise compile them again in every run."""
    dirs = [str(d) for d in where if d.is_dir()]
    if dirs:
        # A file that does not compile (a stray script) is no reason to stop: it is not run.
        subprocess.run([python, "-m", "compileall", "-q", *dirs], check=False, capture_output=True)


def _timed(cmd: list[str], **kwargs: Any) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(cmd, check=True, text=True, capture_output=True, **kwargs)
    return time.perf_counter() - start, done


def run_once(trace: Path, policy: str, work: Path) -> dict[str, Any]:
    """One whole run of mlsched as one process (``simulate --trace-format gavel``: the
    trace imported in place), and as two (``trace import``, then ``simulate`` of the
    workload file written); the records of both must be the same."""
    cluster = work / "cluster.json"
    cluster.write_text(json.dumps(CLUSTER))
    workload, out, two = work / "gavel.yaml", work / f"run-{policy}", work / f"two-{policy}"
    py = [sys.executable, "-m", "mlsched"]
    process_s, _ = _timed(
        [*py, "simulate", "--workload", str(trace), "--trace-format", "gavel",
         "--cluster", str(cluster), "--slot-seconds", str(SLOT_S), "--policy", policy,
         "--out", str(out)]
    )  # fmt: skip
    import_s, _ = _timed(
        [*py, "trace", "import", str(trace), "--format", "gavel", "--cluster", str(cluster),
         "--slot-seconds", str(SLOT_S), "--out", str(workload)]
    )  # fmt: skip
    simulate_s, _ = _timed(
        [*py, "simulate", "--workload", str(workload), "--policy", policy, "--out", str(two)]
    )
    if (out / "jobs.csv").read_bytes() != (two / "jobs.csv").read_bytes():
        raise RuntimeError(f"{policy}: one process and two give different job records")
    summary = json.loads((out / "summary.json").read_text())
    arrivals = _arrivals(trace)
    origin = min(arrivals)
    own, from_arrival = [], []
    with (out / "jobs.csv").open() as fh:
        for row in csv.DictReader(fh):
            if not row["completion_time_s"]:
                continue
            done = float(row["completion_time_s"])
            own.append(float(row["jct_s"]))
            from_arrival.append(done - (arrivals[int(row["job_id"].split("-")[1])] - origin))
    return {
        "policy": policy,
        "process_s": round(process_s, 3),
        "two_step_s": round(import_s + simulate_s, 3),
        "import_s": round(import_s, 3),
        "simulate_s": round(simulate_s, 3),
        "completed": len(own),
        "slots": round(summary["makespan"] / SLOT_S),
        "avg_jct_h": round(statistics.fmean(own) / 3600, 3),
        "avg_jct_from_arrival_h": round(statistics.fmean(from_arrival) / 3600, 3),
        "gpu_utilization": summary["utilization"].get("gpu"),
    }


@functools.cache
def _arrivals(trace: Path) -> list[float]:
    """The trace's arrival seconds (read once per file, whatever the runs)."""
    return [float(line.split("\t")[9]) for line in trace.read_text().splitlines() if line]


def gavel_python(where: Path, given: str | None) -> str:
    if given:
        return given
    venv = where / ".venv" / "bin" / "python"
    return str(venv) if venv.is_file() else sys.executable


def run_gavel(trace: Path, where: Path, python: str) -> dict[str, Any]:
    """One whole run of Gavel's simulator on ``trace`` (FIFO, seed 0, 360-s rounds)."""
    scheduler = where / "scheduler"
    seconds, done = _timed(
        [python, "scripts/drivers/simulate_scheduler_with_trace.py", "-t", str(trace.resolve()),
         "-p", "fifo", "--throughputs_file", "simulation_throughputs.json", "-c", "36:36:36",
         "--seed", "0", "--time_per_iteration", str(SLOT_S)],
        cwd=scheduler,
    )  # fmt: skip
    out = done.stdout
    jct = re.search(r"Average job completion time: ([\d.]+) seconds", out)
    util = re.search(r"Cluster utilization: ([\d.]+)", out)
    total = re.search(r"Total duration: ([\d.]+) seconds", out)
    if jct is None or util is None:
        raise RuntimeError(f"Gavel's output has no average JCT: {out[-500:]!r}")
    # Its log names the GPU type of every job's every round.
    rounds = collections.Counter(
        re.findall(r"Micro-task scheduled\].*?Worker type: (\w+)", done.stderr)
    )
    return {
        "process_s": round(seconds, 3),
        "avg_jct_h": round(float(jct.group(1)) / 3600, 3),
        "utilization": float(util.group(1)),
        "rounds": round(float(total.group(1)) / SLOT_S) if total else None,
        "gpu_rounds_by_type": dict(rounds),
    }


def explain(mine: dict[str, dict[str, Any]], gavel: dict[str, Any]) -> list[str]:
    """Where mlsched's average JCT departs from Gavel's, by how much and why."""
    lines = []
    target = gavel["avg_jct_h"]
    fifo, emulated = mine.get("fifo"), mine.get("gavel-fifo")
    if fifo is not None:
        gap = fifo["avg_jct_from_arrival_h"] - target
        lines.append(
            f"fifo {fifo['avg_jct_from_arrival_h']:.2f} h vs Gavel {target:.2f} h: "
            f"{gap:+.2f} h ({gap / target:+.0%}), of which {fifo['avg_jct_from_arrival_h'] - fifo['avg_jct_h']:.2f} h "
            "is measuring from the arrival second, not the slot it is rounded up to"
        )
    if emulated is not None:
        rest = emulated["avg_jct_from_arrival_h"] - target
        lines.append(
            f"gavel-fifo {emulated['avg_jct_from_arrival_h']:.2f} h: {rest:+.2f} h "
            f"({rest / target:+.1%}) from Gavel: with Gavel's semantics the two engines agree"
        )
        if fifo is not None:
            semantic = fifo["avg_jct_from_arrival_h"] - emulated["avg_jct_from_arrival_h"]
            lines.append(
                f"  semantics {semantic:+.2f} h: Gavel's FIFO binds each job to one GPU type "
                "(the alphabetically last with free GPUs, or a finished job's), recomputes "
                "that at most every 1,920 s, and lets a type be over-claimed while others "
                "idle; mlsched's fifo places every job round-robin over all free GPUs, so "
                "more of them run on the slow K80s"
            )
    by_type = gavel.get("gpu_rounds_by_type")
    if by_type:
        total = sum(by_type.values())
        shares = ", ".join(f"{t} {n / total:.0%}" for t, n in sorted(by_type.items()))
        lines.append(f"  Gavel's GPU-rounds by type: {shares}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--policies", default="fifo,gavel-fifo")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--gavel", type=Path, default=DEFAULT_GAVEL, help="Gavel's checkout")
    parser.add_argument("--gavel-python", help="its interpreter (default: DIR/.venv's)")
    parser.add_argument(
        "--out",
        type=out_file("gavel_trace.json"),
        default=ROOT / "benchmarks" / "results" / "gavel_trace.json",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: at least 1")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if not policies:
        parser.error("--policies: name at least one policy")
    if not args.trace.is_file():  # the data sits beside the repository, not in it
        print(f"skipped: no Gavel trace at {args.trace} (pass --trace)", file=sys.stderr)
        return 0
    out = ready(parser, args.out)
    from benchmarks.__main__ import machine

    installed = (args.gavel / "scheduler" / "scripts" / "drivers").is_dir()
    python = gavel_python(args.gavel, args.gavel_python)
    if not installed:
        print(INSTALL.format(where=args.gavel), file=sys.stderr)
    import mlsched

    byte_compile(sys.executable, Path(mlsched.__file__).parent)
    if installed:
        byte_compile(python, args.gavel / "scheduler")
    runs: list[dict[str, Any]] = []
    for i in range(args.repeat):
        pair: dict[str, Any] = {}
        if installed:
            pair["gavel"] = run_gavel(args.trace, args.gavel, python)
        turn = i % len(policies)
        with tempfile.TemporaryDirectory() as tmp:
            for policy in policies[turn:] + policies[:turn]:
                pair[policy] = run_once(args.trace, policy, Path(tmp))
        runs.append(pair)
        print(f"run {i + 1}/{args.repeat}: {json.dumps(pair)}", file=sys.stderr)
    gavel = runs[-1]["gavel"] if installed else dict(GAVEL)
    gavel_s = statistics.median(r["gavel"]["process_s"] for r in runs) if installed else None
    mine = {p: runs[-1][p] for p in policies}
    medians = {p: statistics.median(r[p]["process_s"] for r in runs) for p in policies}
    ratios = (
        {
            p: statistics.median(r[p]["process_s"] / r["gavel"]["process_s"] for r in runs)
            for p in policies
        }
        if installed
        else {p: medians[p] / GAVEL["process_s"] for p in policies}
    )
    lines = explain(mine, gavel)
    result = {
        "machine": machine(),
        "trace": str(args.trace),
        "gavel_paired": installed,
        "gavel": gavel,
        "gavel_median_process_s": gavel_s,
        "runs": runs,
        "median_process_s": medians,
        "ratio_to_gavel": {p: round(v, 4) for p, v in ratios.items()},
        "goal_ratio": GOAL_FRACTION,
        "explanation": lines,
    }
    out.write_text(json.dumps(result, indent=2) + "\n")
    gavel_line = (
        f"Gavel {gavel_s:.2f} s (median of {len(runs)}, paired)"
        if installed
        else f"Gavel {GAVEL['process_s']} s (its README; not paired)"
    )
    print(gavel_line)
    for p in policies:
        r = mine[p]
        verdict = "met" if ratios[p] <= GOAL_FRACTION else "missed"
        print(
            f"{p}: whole process {medians[p]:.2f} s median (as two: import "
            f"{r['import_s']:.2f} s + simulate {r['simulate_s']:.2f} s), 1/{1 / ratios[p]:.1f} of Gavel's "
            f"(goal 1/{1 / GOAL_FRACTION:.0f}: {verdict}); avg JCT {r['avg_jct_h']:.2f} h "
            f"({r['avg_jct_from_arrival_h']:.2f} h from the arrival second), {r['slots']} slots, "
            f"GPU utilization {r['gpu_utilization']:.3f}"
        )
    print(
        f"Gavel: avg JCT {gavel['avg_jct_h']:.2f} h, {gavel['rounds']} rounds, utilization "
        f"{gavel['utilization']:.3f}"
    )
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
