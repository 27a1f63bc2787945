"""The same trace, side by side: Gavel's generated 5,000-job trace through mlsched.

Imports the trace (``mlsched trace import --format gavel``, cluster 36 v100 + 36 p100 +
36 k80 one-GPU servers, 360-s slots) and simulates it with a policy (default FIFO, closed
loop on), each step in its own process as a user runs them, so start-up and imports count.
Reports the whole-process wall time beside the other simulator's (20.6 s median on this
trace, ../shared/data/gavel/README.md) and the average JCT both ways: mlsched's own
(completion - arrival slot) and Gavel's measure (completion - the trace's arrival second).

    python -m benchmarks.gavel_trace [--repeat 3] [--trace PATH] [--policy fifo]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["GAVEL", "main", "run_once"]

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT.parent / "shared" / "data" / "gavel" / "gen_n5000.trace"
#: The other simulator's figures on this trace (README beside it): FIFO, whole process.
GAVEL = {"avg_jct_h": 3.06, "rounds": 2790, "utilization": 0.453, "process_s": 20.6}
CLUSTER = {
    "servers": [
        {"name": t, "count": 36, "capacity": {"gpu": 1, "cpu": 8}, "gpu_type": t}
        for t in ("v100", "p100", "k80")
    ]
}


def _timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - start


def run_once(trace: Path, policy: str, work: Path) -> dict[str, Any]:
    cluster = work / "cluster.json"
    cluster.write_text(json.dumps(CLUSTER))
    workload, out = work / "gavel.yaml", work / "run"
    py = [sys.executable, "-m", "mlsched"]
    import_s = _timed(
        [*py, "trace", "import", str(trace), "--format", "gavel", "--cluster", str(cluster),
         "--slot-seconds", "360", "--out", str(workload)]
    )  # fmt: skip
    simulate_s = _timed(
        [*py, "simulate", "--workload", str(workload), "--policy", policy, "--out", str(out)]
    )
    summary = json.loads((out / "summary.json").read_text())
    arrivals = [float(line.split("\t")[9]) for line in trace.read_text().splitlines() if line]
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
        "import_s": round(import_s, 3),
        "simulate_s": round(simulate_s, 3),
        "process_s": round(import_s + simulate_s, 3),
        "completed": len(own),
        "slots": round(summary["makespan"] / 360),
        "avg_jct_h": round(statistics.fmean(own) / 3600, 3),
        "avg_jct_from_arrival_h": round(statistics.fmean(from_arrival) / 3600, 3),
        "gpu_utilization": summary["utilization"].get("gpu"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--policy", default="fifo")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    if not args.trace.is_file():  # the data sits beside the repository, not in it
        print(f"skipped: no Gavel trace at {args.trace} (pass --trace)", file=sys.stderr)
        return 0
    from benchmarks.__main__ import machine

    runs = []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            runs.append(run_once(args.trace, args.policy, Path(tmp)))
        print(f"run {i + 1}/{args.repeat}: {runs[-1]}", file=sys.stderr)
    median = statistics.median(r["process_s"] for r in runs)
    result = {
        "machine": machine(),
        "policy": args.policy,
        "runs": runs,
        "median_process_s": median,
        "goal_process_s": round(GAVEL["process_s"] / 5, 2),
        "gavel": GAVEL,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gavel_trace.json").write_text(json.dumps(result, indent=2) + "\n")
    last = runs[-1]
    print(
        f"{args.policy}: whole process {median:.2f} s median of {len(runs)} (import "
        f"{last['import_s']:.2f} s + simulate {last['simulate_s']:.2f} s); goal <= "
        f"{result['goal_process_s']} s (Gavel {GAVEL['process_s']} s)\n"
        f"avg JCT {last['avg_jct_h']:.2f} h (from the trace's arrival seconds "
        f"{last['avg_jct_from_arrival_h']:.2f} h; Gavel {GAVEL['avg_jct_h']} h), "
        f"{last['slots']} slots (Gavel {GAVEL['rounds']} rounds), GPU utilization "
        f"{last['gpu_utilization']:.3f} (Gavel {GAVEL['utilization']})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
