"""Record repeats of the fidelity experiment's smaller form: the noise its checks' bounds
come from (mlsched/testbed/fidelity/noise.py, docs/testing.md).

    sudo python scripts/record_fidelity.py --repeats 6 --out tests/data/fidelity-smoke
    python scripts/record_fidelity.py --table --out tests/data/fidelity-smoke
    python scripts/record_fidelity.py --resimulate --out tests/data/fidelity-smoke

Each repeat is a whole smaller form (its own profile before and after, each policy's real
run on a fresh emulated cluster), kept as ``rep-K/results.json`` and ``rep-K/profile.json``:
what the simulator needs to run the recorded jobs again (the cluster as each real run
numbered it, the profile) and what the testbed measured. Run it on an idle machine: the
noise is the machine's own, and other work adds to it. ``--table`` records nothing: it
prints the bounds the recordings give and what each planted regression does to each
statistic (docs/testing.md's table). Each repeat also keeps its runs simulated with their
own costs (``own_runs``, noise.own_costs). ``--resimulate`` records nothing either: it
simulates every recorded run again with this simulator, both ways, and writes the files
back: what a change to the simulator that means to move the statistics does, so that the
check's centre is the changed simulator's from then on.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mlsched.testbed.fidelity.experiment import run_fidelity


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/record_fidelity.py")
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scale", default="smoke")
    parser.add_argument("--first", type=int, default=0, help="the first repeat's number")
    parser.add_argument("--table", action="store_true", help="print the plants' table only")
    parser.add_argument(
        "--resimulate", action="store_true", help="simulate the recorded runs again, and keep that"
    )
    args = parser.parse_args(argv)
    if args.table:
        print(table(args.out))
        return 0
    if args.resimulate:
        for rep in sorted(args.out.glob("rep-*")):
            results = json.loads((rep / "results.json").read_text(encoding="utf-8"))
            _write(rep, simulated(results, rep / "profile.json", again=True))
            print(f"{rep.name}: simulated again")
        return 0
    if args.repeats < 1:
        parser.error(f"--repeats: {args.repeats}: at least 1")
    args.out.mkdir(parents=True, exist_ok=True)
    # A stop (SIGTERM) unwinds like ^C: each emulated cluster removes its namespaces.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for k in range(args.first, args.first + args.repeats):
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="mlsched-fidelity-") as tmp:
            run = Path(tmp)
            results = run_fidelity(out=run, scale=args.scale, say=lambda s: print("  " + s))
            rep = args.out / f"rep-{k}"
            rep.mkdir(exist_ok=True)
            shutil.copy(run / "profile.json", rep / "profile.json")
            results.pop("plots", None)
            results["profile"]["path"] = "profile.json"
            _write(rep, simulated(results, rep / "profile.json"))
        passed = sum(c["passed"] for c in results["checks"])
        print(f"rep-{k}: {passed}/{len(results['checks'])} goals, "
              f"{time.perf_counter() - started:.0f} s", flush=True)  # fmt: skip
    return 0


def simulated(results: dict[str, Any], profile: Path, again: bool = False) -> dict[str, Any]:
    """``results`` with its runs simulated with the run's own costs beside (``own_runs``),
    and (``again``) with the profile too, by this simulator."""
    from mlsched.perfmodel.profile import load_profile
    from mlsched.testbed.fidelity.noise import Recording, replay

    rec = Recording("rep", results, load_profile(profile))
    out = dict(results)
    if again:
        out["runs"] = replay(rec)["runs"]
    out["own_runs"] = replay(rec, own=True)["runs"]
    return out


def _write(rep: Path, results: dict[str, Any]) -> None:
    text = json.dumps(results, indent=1, sort_keys=True, allow_nan=False)
    (rep / "results.json").write_text(text + "\n", encoding="utf-8")


def table(root: Path) -> str:
    """The bounds and the plants' table (markdown) of the recordings under ``root``."""
    from mlsched.testbed.fidelity.noise import (
        PLANTS,
        STATISTICS,
        load_recordings,
        plant_table,
        recorded_bounds,
    )

    recordings = load_recordings(root)
    bounds = recorded_bounds(recordings)

    def span(lo: float, hi: float) -> str:
        return f"{lo:+.1%} .. {hi:+.1%}"

    lines = [
        f"{len(recordings)} recorded runs; {bounds.reach:.2f} standard deviations each way",
        "",
        "| planted in the simulator | " + " | ".join(STATISTICS) + " | runs failed |",
        "|---" * (len(STATISTICS) + 2) + "|",
        "| bounds (from the recorded runs) | "
        + " | ".join(span(*bounds.intervals[s]) for s in STATISTICS)
        + " | - |",
    ]
    for row in plant_table(recordings, bounds):
        name = row["plant"]
        label = f"{name}: {PLANTS[name].what}" if name in PLANTS else name
        cells = [span(*row[s]) if row[s] else "-" for s in STATISTICS]
        failed = f"{row['failed']} of {row['runs']}"
        if row["ranking_failed"]:
            failed += f" (ranking in {row['ranking_failed']})"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {failed} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
