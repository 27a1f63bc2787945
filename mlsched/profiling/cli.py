"""``mlsched profile``: measure a profile, show one, and convert Gavel's throughput table."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from mlsched.controller.cli import auth_args
from mlsched.core.errors import SpecError

__all__ = ["add_profile_parser", "run_profile"]


def _csv(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in _csv(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: integers separated by commas") from None


def add_profile_parser(sub: Any) -> None:
    p = sub.add_parser(
        "profile",
        help="measure what jobs cost on this machine (the simulator's truth, the model's prior)",
        description="Measured profiles (docs/profiles.md): per model, kind and worker count, "
        "compute and communication seconds per iteration, bytes moved, start-up, checkpoint "
        "save/load and restart seconds.",
    )
    psub = p.add_subparsers(dest="profile_command", metavar="ACTION", required=True)
    m = psub.add_parser(
        "measure",
        help="run the grid's jobs here and write (or complete) a profile file",
        description="Each cell runs its job twice for real (fresh, then resumed from its "
        "checkpoint). The file is written after every cell; run again to resume.",
    )
    m.add_argument("--out", type=Path, required=True, help="profile file (JSON) to write")
    m.add_argument(
        "--models", type=_csv, default=None, help="models (default resnet20,vgg11-narrow,mlp)"
    )
    m.add_argument(
        "--kinds", type=_csv, default=None, help="ps_async,ps_sync,ring,horovod (default all)"
    )
    m.add_argument("--workers", type=_ints, default=None, help="worker counts (default 1,2)")
    m.add_argument(
        "--cells",
        type=_cells,
        default=None,
        help="instead of a grid: these cells only, MODEL:KIND:WORKERS,... "
        "(e.g. resnet20:ps_async:2,vgg11-narrow:ring:2)",
    )
    m.add_argument("--steps", type=int, default=20, help="steps of each fresh run")
    m.add_argument("--warmup", type=int, default=3, help="first steps left out of the means")
    m.add_argument("--resume-steps", type=int, default=5, help="steps of each resumed run")
    m.add_argument("--batch-size", type=int, default=32)
    m.add_argument("--image-size", type=int, default=32)
    m.add_argument(
        "--image-size-of",
        action="append",
        default=[],
        metavar="MODEL=PX",
        help="measure MODEL at another image size (repeatable; e.g. vgg11-narrow=32)",
    )
    m.add_argument(
        "--cpus",
        type=float,
        default=None,
        help="measure every cell inside a share of this many cores (the cgroup cpu "
        "controller; root): what a job costs on an emulated host of that share",
    )
    m.add_argument(
        "--device-cores",
        type=float,
        default=None,
        help="stand-in devices: each training rank in a share of this many cores, each "
        "parameter server in --ps-cores (root), as `mlsched agent --device-cores` runs them",
    )
    m.add_argument(
        "--ps-cores",
        type=float,
        default=None,
        help="a parameter server's share (default: --device-cores)",
    )
    m.add_argument(
        "--ranks-per-node",
        type=int,
        default=None,
        help="all-reduce: a launcher per this many ranks (1: as agents of one-device hosts "
        "run a job spread over them; default: one launcher for all ranks)",
    )
    m.add_argument(
        "--controller",
        default=None,
        metavar="HOST:PORT",
        help="measure through the agents of this running controller's cluster, on their "
        "devices and across their links (an idle cluster: its slot loop holds per cell)",
    )
    m.add_argument(
        "--placements",
        type=_csv,
        default=None,
        help="with --controller: the shapes each cell is measured in, of host,rack,racks "
        "(default all three; a shape the cluster cannot give is skipped)",
    )
    m.add_argument(
        "--probe-timeout", type=float, default=600.0, help="with --controller: s per phase"
    )
    m.add_argument(
        "--probe-seconds",
        type=float,
        default=10.0,
        help="with --controller: measure each cell for this long at least (a running job's "
        "periodic checkpoints and CPU-quota periods included), as well as --steps",
    )
    auth_args(m, server=False)
    m.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    m.add_argument(
        "--device-type", default=None, help="the cells' device type (default: the device's)"
    )
    s = psub.add_parser("show", help="a profile's cells as a table")
    s.add_argument("file", type=Path)
    s.add_argument("--json", action="store_true", help="the checked file as JSON")
    gi = psub.add_parser("import-gavel", help="a Gavel throughput table as a profile file")
    gi.add_argument("table", type=Path, help="Gavel's simulation_throughputs.json")
    gi.add_argument("--out", type=Path, required=True)
    gi.add_argument("--kind", default="ring", help="the kind its jobs are taken as (default ring)")
    ge = psub.add_parser("export-gavel", help="a profile's cells as Gavel's throughput table")
    ge.add_argument("file", type=Path)
    ge.add_argument("--out", type=Path, required=True)
    ge.add_argument("--kind", default="ring", help="which kind's cells (default ring)")


def run_profile(args: argparse.Namespace) -> int:
    from mlsched.perfmodel.profile import Profile, from_gavel, load_profile, merge, to_gavel

    action = args.profile_command
    if action == "measure":
        return _measure(args)
    if action == "show":
        profile = load_profile(args.file)
        if args.json:
            print(json.dumps(profile.to_dict(), indent=1))
        else:
            print(profile_table(profile))
        return 0
    if action == "import-gavel":
        try:
            table = json.loads(args.table.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise SpecError("table", str(args.table), f"a readable JSON file ({err})") from None
        cells, left_out = from_gavel(table, kind=args.kind, where=str(args.table))
        source = {"imported_from": str(args.table), "format": "gavel"}
        profile = merge(Profile({}, {"type": "gavel"}, source), cells)
        profile.save(args.out)
        print(f"{len(cells)} cells from {args.table} -> {args.out}")
        if left_out:
            print(
                f"left out {len(left_out)} with throughput 0 (not runnable): {', '.join(left_out)}"
            )
        return 0
    profile = load_profile(args.file)
    table = to_gavel(profile, kind=args.kind)
    args.out.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(f"{sum(len(v) for v in table.values())} {args.kind} cells -> {args.out}")
    return 0


def _cells(text: str) -> tuple[tuple[str, str, int], ...]:
    out = []
    for item in text.split(","):
        model, kind, workers = ([*item.strip().split(":"), "", ""])[:3]
        if not model or not kind or not workers.isdigit():
            raise argparse.ArgumentTypeError(
                f"{item!r}: MODEL:KIND:WORKERS, e.g. resnet20:ps_async:2"
            )
        out.append((model, kind, int(workers)))
    return tuple(out)


def _model_sizes(pairs: list[str]) -> tuple[tuple[str, int], ...]:
    out = []
    for pair in pairs:
        model, sep, size = pair.partition("=")
        if not sep or not model or not size.strip().isdigit():
            raise SpecError("--image-size-of", pair, "MODEL=PIXELS, e.g. vgg11-narrow=32")
        out.append((model.strip(), int(size)))
    return tuple(sorted(out))


def _measure(args: argparse.Namespace) -> int:
    from mlsched.profiling.grid import CellList, Grid, run_grid
    from mlsched.profiling.measure import Settings

    grid_args = {k: getattr(args, k) for k in ("models", "kinds", "workers") if getattr(args, k)}
    if args.cells is not None and grid_args:
        flag = "--" + next(iter(grid_args))
        raise SpecError(flag, str(grid_args[flag[2:]]), "unset with --cells (one or the other)")
    grid: Grid | CellList = CellList(args.cells) if args.cells is not None else Grid(**grid_args)
    settings = Settings(
        steps=args.steps,
        warmup=args.warmup,
        resume_steps=args.resume_steps,
        batch_size=args.batch_size,
        image_size=args.image_size,
        device=args.device,
        image_sizes=_model_sizes(args.image_size_of),
        cpus=args.cpus,
        device_cores=args.device_cores,
        ps_cores=args.ps_cores,
        ranks_per_node=args.ranks_per_node,
    )
    if args.controller is not None:
        run = _through_agents(args, grid, settings)
    else:
        if args.placements is not None:
            raise SpecError("--placements", ",".join(args.placements), "unset without --controller")
        run = run_grid(
            grid,
            settings,
            args.out,
            device_type=args.device_type,
            say=lambda s: print(s, flush=True),
        )
    print(profile_table(run.profile))
    for cell, why in run.skipped:
        print(f"skipped {' '.join(map(str, cell))}: {why}")
    for cell, why in run.failed:
        print(f"failed {' '.join(map(str, cell))}: {why}", file=sys.stderr)
    return 1 if run.failed else 0


def _through_agents(args: argparse.Namespace, grid: Any, settings: Any) -> Any:
    from mlsched.controller.cli import client_auth
    from mlsched.net.auth import client_channel
    from mlsched.perfmodel.profile import PLACEMENTS
    from mlsched.profiling.cluster import run_cluster_grid

    # What the agents decide (their slices, launchers, devices) is not this command's.
    for flag in ("cpus", "device_cores", "ps_cores", "ranks_per_node", "device_type"):
        if getattr(args, flag) is not None:
            name = "--" + flag.replace("_", "-")
            raise SpecError(name, getattr(args, flag), "unset with --controller (the agents' own)")
    if args.device != "cpu":
        raise SpecError("--device", args.device, "unset with --controller (the agents' own)")
    channel = client_channel(args.controller, client_auth(args))
    try:
        return run_cluster_grid(
            args.controller,
            channel,
            grid,
            settings,
            args.out,
            placements=args.placements or PLACEMENTS,
            say=lambda s: print(s, flush=True),
            timeout_s=args.probe_timeout,
            seconds=args.probe_seconds,
        )
    finally:
        channel.close()


def profile_table(profile: Any) -> str:
    head = (
        f"{'model':<14} {'kind':<9} {'w':>2} {'where':<5} {'device':<8} {'s/it':>8} {'compute':>8} "
        f"{'comm':>8} {'MB/it':>7} {'start':>6} {'save':>6} {'load':>6} {'restart':>7}"
    )
    lines = [head, "-" * len(head)]

    def f(v: float | None, scale: float = 1.0, digits: int = 4) -> str:
        return "-" if v is None else f"{v * scale:.{digits}f}"

    for c in sorted(profile.cells, key=lambda c: c.key):
        lines.append(
            f"{c.model:<14} {c.kind:<9} {c.workers:>2} {c.placement or '-':<5} {c.device_type:<8} "
            f"{f(c.iteration_s):>8} "
            f"{f(c.compute_s):>8} {f(c.comm_s):>8} {f(c.bytes_per_iteration, 1e-6, 2):>7} "
            f"{f(c.startup_s, digits=2):>6} {f(c.checkpoint_save_s, digits=3):>6} "
            f"{f(c.checkpoint_load_s, digits=3):>6} {f(c.restart_s, digits=2):>7}"
        )
    return "\n".join(lines)
