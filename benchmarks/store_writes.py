"""Controller state-file write throughput: measurements recorded in one transaction (what
the controller does at a slot's end for every job's report) into a real SQLite file.
Figures go to ``benchmarks/results/store_writes.json``.

    python -m benchmarks.store_writes            # 1,000 measurements, 10 repeats
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.__main__ import machine
from mlsched.controller.store import Store

RESULTS = Path(__file__).resolve().parent / "results"

MEASUREMENT: dict[str, Any] = {
    "placement": {"workers": {"gpu0": 2}, "ps": {"ps0": 1}},
    "iterations": 40,
    "iteration_s": 0.25,
    "compute_s": 0.2,
    "comm_s": 0.05,
    "bytes_sent": 1_000_000,
    "bytes_recv": 2_000_000,
    "predicted_s": None,
}


def one(n: int) -> float:
    """Seconds to record ``n`` measurements of 10 jobs in one transaction."""
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "state.db")
        try:
            start = time.perf_counter()
            with store.transaction():
                for i in range(n):
                    store.add_measurement(i // 10, f"j{i % 10}", {**MEASUREMENT, "iterations": i})
            took = time.perf_counter() - start
            assert len(store.measurements()) == n
        finally:
            store.close()
    return took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--measurements", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args(argv)
    times = [one(args.measurements) for _ in range(args.repeat)]
    result = {
        "machine": machine(),
        "measurements": args.measurements,
        "seconds": times,
        "median_s": statistics.median(times),
        "per_measurement_us": 1e6 * statistics.median(times) / args.measurements,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "store_writes.json").write_text(json.dumps(result, indent=2))
    print(
        f"{args.measurements} measurements in one transaction: median "
        f"{result['median_s'] * 1e3:.1f} ms ({result['per_measurement_us']:.0f} us each), "
        f"min {min(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms over {args.repeat}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
