"""Pack recorded MILP solves into a solve memo (mlsched/scheduler/solvers/memo.py).

    python scripts/solve_memo.py pack OUT SRC [SRC ...]   # SRC: record directories, memo files
    python scripts/solve_memo.py stats MEMO                # programs, sizes, statuses

``make solve-memo`` runs ``make reproduce`` with a record directory and packs it into
tests/data/solve-memo.jsonl.gz, the memo ``make reproduce`` reads (docs/testing.md).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import sys
from pathlib import Path

from mlsched.scheduler.solvers.memo import pack


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/solve_memo.py")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="pack record directories and memo files into one memo")
    p.add_argument("out", type=Path)
    p.add_argument("sources", type=Path, nargs="+")
    s = sub.add_parser("stats", help="what a memo holds")
    s.add_argument("memo", type=Path)
    args = parser.parse_args(argv)
    if args.command == "pack":
        missing = [str(src) for src in args.sources if not src.exists()]
        if missing:
            print(f"no such source: {', '.join(missing)}", file=sys.stderr)
            return 2
        n = pack(args.sources, args.out)
        print(f"{args.out}: {n} programs, {args.out.stat().st_size:,} bytes")
        return 0
    statuses: collections.Counter[str] = collections.Counter()
    columns = 0
    with gzip.open(args.memo, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            statuses[row["status"]] += 1
            columns += int(row.get("n", 0))
    total = sum(statuses.values())
    print(f"{args.memo}: {total} programs, {columns:,} columns in all; {dict(statuses)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
