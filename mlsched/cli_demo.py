"""``mlsched demo`` on this machine for real: a controller and two agents train the demo's
job mix with one policy, after measuring its profile when ``--measure-profile`` asks."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from mlsched.core.errors import SpecError

if TYPE_CHECKING:
    from mlsched.trainers.cpu_share import DeviceSlices

__all__ = ["run_cluster_demo"]


def run_cluster_demo(args: argparse.Namespace) -> int:
    """``demo`` (not ``--simulated``): the job mix trained for real by a controller and two
    agents on this machine, with ``--policy``."""
    from mlsched.demo import demo_report
    from mlsched.demo import run_cluster_demo as run_demo
    from mlsched.engine.builder import check_policies

    if len(args.policy) > 1:
        raise SpecError("--policy", ",".join(args.policy), "one policy (several: --simulated)")
    policy = args.policy[0] if args.policy else "fifo"
    check_policies([policy])
    from mlsched.trainers.cpu_share import DeviceSlices

    try:
        slices = DeviceSlices.of(args.device_cores, args.ps_cores)
    except SpecError as err:  # named by its flag
        raise SpecError("--" + err.field.replace("_", "-"), err.value, err.expected) from None
    if args.measure_profile:
        _measure_demo_profile(args, policy, slices)
    statuses = run_demo(
        policy=policy,
        slots=args.slots,
        slot_seconds=args.slot_seconds,
        workdir=args.workdir,
        profile=args.profile,
        slices=slices,
    )
    print()
    print(demo_report(statuses))
    done = sum(1 for s in statuses.values() if s.state == "done")
    print(f"\n{done} of {len(statuses)} jobs done with policy {policy}.")
    return 0


def _measure_demo_profile(
    args: argparse.Namespace, policy: str, slices: DeviceSlices | None
) -> None:
    """The cells the demo's jobs need, measured into ``--profile`` as the demo's agents
    will run them (in their slices; a launcher per rank, as a job spread over the two
    agents starts)."""
    from mlsched.demo import PROFILE_SHAPE, demo_jobs
    from mlsched.profiling.grid import cells_for_jobs, run_grid
    from mlsched.profiling.measure import SLICED_STEPS, Settings

    if args.profile is None:
        raise SpecError("--measure-profile", True, "a --profile file to write")
    settings = Settings(
        steps=SLICED_STEPS if slices else 40, warmup=10, resume_steps=5, **PROFILE_SHAPE,
        device_cores=slices.device_cores if slices else None,
        ps_cores=slices.ps_cores if slices else None,
        ranks_per_node=1,
    )  # fmt: skip
    run = run_grid(cells_for_jobs(demo_jobs(policy)), settings, args.profile,
                   say=lambda s: print(s, flush=True))  # fmt: skip
    if run.failed:
        cell, why = run.failed[0]
        raise SpecError("--measure-profile", " ".join(map(str, cell)), f"a cell that runs ({why})")
