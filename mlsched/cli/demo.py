"""``mlsched demo``'s bodies: ``--simulated``, a short simulated comparison on the ``demo``
workload; otherwise the demo's job mix trained for real by a controller and two agents on
this machine (:mod:`mlsched.testbed.local`), after measuring its profile when
``--measure-profile`` asks. ``--emulate`` is the testbed's (:mod:`mlsched.testbed.cli`)."""

from __future__ import annotations

import argparse
import sys

from mlsched.cli.config import Config
from mlsched.core.errors import SpecError

__all__ = ["run_cluster_demo", "run_simulated_demo"]


def run_simulated_demo(config: Config) -> int:
    """``demo --simulated``: a short simulated comparison on the ``demo`` workload."""
    from mlsched.engine.builder import baseline_policies, check_policies, compare
    from mlsched.experiments.report import summary_table
    from mlsched.workloads import load_workload

    policies = list(config.policies) or baseline_policies()
    check_policies(policies)
    workload = load_workload("demo", seed=config.seed)
    print(f"demo: {workload.description}")
    summaries, failures = compare(workload, policies, seed=config.seed)
    print(summary_table(summaries))
    for failure in failures:
        print(f"warning: {failure.policy} failed: {failure.error}", file=sys.stderr)
    return 0 if summaries else 1


def run_cluster_demo(args: argparse.Namespace) -> int:
    """``demo`` (not ``--simulated``): the job mix trained for real by a controller and two
    agents on this machine, with ``--policy``."""
    from mlsched.engine.builder import check_policies
    from mlsched.testbed.local import demo_report, measure_demo_profile
    from mlsched.testbed.local import run_cluster_demo as run_demo

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
        if args.profile is None:
            raise SpecError("--measure-profile", True, "a --profile file to write")
        failed = measure_demo_profile(
            args.profile, policy, slices, say=lambda s: print(s, flush=True)
        )
        if failed:
            cell, why = failed[0]
            raise SpecError(
                "--measure-profile", " ".join(map(str, cell)), f"a cell that runs ({why})"
            )
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
