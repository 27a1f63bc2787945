"""``mlsched reproduce``: run the five paper experiments and write the reproduction table."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from mlsched.cli.parser import add_executor_option
from mlsched.core.errors import SpecError

__all__ = ["add_reproduce_parser", "run_reproduce"]


def add_reproduce_parser(sub: Any) -> None:
    p = sub.add_parser(
        "reproduce",
        help="run the five paper experiments and write the reproduction table",
        description="Run each paper experiment (oasis, pdors, hetero, gadget, dps) into "
        "OUT/NAME and write a Markdown table of every claim of the five papers with its "
        "verdict: reproduced by the paper's algorithm, only with an addition of ours "
        "(named), not reproduced (with the figures), or not tested (why).",
    )
    p.add_argument(
        "--scale",
        default="default",
        choices=["smoke", "default", "paper"],
        help="the experiments' scale; default takes about 17 minutes on 2 cores",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("results") / "reproduction",
        help="where each experiment writes (OUT/NAME/results.json)",
    )
    p.add_argument("--table", type=Path, help="the table's path (default OUT/reproduction.md)")
    p.add_argument(
        "--readme",
        type=Path,
        help="also write the table's totals into this README, between its reproduction "
        "figure's marker lines (mlsched reproduce --table docs/reproduction.md --readme "
        "README.md regenerates both)",
    )
    add_executor_option(p)
    p.add_argument(
        "--experiments",
        help="run only these (a,b,c; default: all five); the others' claims come from "
        "their results of this scale in OUT, 'not run' where there are none",
    )
    p.add_argument(
        "--reuse",
        action="store_true",
        help="take an experiment's results.json from OUT when it is of this scale instead "
        "of running it again",
    )


def run_reproduce(args: argparse.Namespace) -> int:
    from mlsched.experiments import run_experiment
    from mlsched.experiments.claims import PAPERS
    from mlsched.experiments.reproduction import (
        count_verdicts,
        load_results,
        readme_figure,
        render,
        verdicts,
        with_readme_figure,
    )

    every = [exp for _, exp in PAPERS.values()]
    chosen = [n.strip() for n in (args.experiments or "").split(",") if n.strip()] or every
    for name in chosen:
        if name not in every:
            raise SpecError("--experiments", name, f"one of {', '.join(every)}")
    readme: Path | None = args.readme
    if readme is not None:  # refused before the runs, not after them
        with_readme_figure(_read(readme), "", str(readme))
    out: Path = args.out
    for name in chosen:
        path = out / name / "results.json"
        if args.reuse and path.is_file():
            saved = json.loads(path.read_text(encoding="utf-8"))
            if saved.get("scale") == args.scale:
                print(f"[reproduce] {name}: reusing {path}", file=sys.stderr)
                continue
        print(f"[reproduce] {name} ({args.scale}) ...", file=sys.stderr, flush=True)
        res = run_experiment(name, out_dir=out / name, scale=args.scale)
        failed = sum(not c["passed"] for c in res["checks"])
        print(
            f"[reproduce] {name}: {res['wall_seconds']:.0f} s, {failed} of "
            f"{len(res['checks'])} checks failed",
            file=sys.stderr,
            flush=True,
        )
    results = {
        name: res for name, res in load_results(out).items() if res.get("scale") == args.scale
    }
    table: Path = args.table or out / "reproduction.md"
    command = f"mlsched reproduce --scale {args.scale}"
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text(render(results, command), encoding="utf-8")
    counts = count_verdicts(verdicts(results))
    print(", ".join(f"{k}: {n}" for k, n in counts.items()))
    print(f"wrote {table}")
    if readme is not None:
        text = with_readme_figure(_read(readme), readme_figure(counts), str(readme))
        readme.write_text(text, encoding="utf-8")
        print(f"wrote the totals into {readme}")
    broken = [
        name
        for name, res in results.items()
        for c in res.get("checks", [])
        if c["name"] == "every run finished without error" and not c["passed"]
    ]
    if broken:
        print(f"mlsched: runs failed in {', '.join(broken)}", file=sys.stderr)
        return 1
    return 0


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError("--readme", str(path), f"a readable UTF-8 file ({err})") from None
