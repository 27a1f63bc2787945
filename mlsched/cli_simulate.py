"""The ``simulate`` command's bodies: policies run on one workload, or a recorded testbed
run replayed (``--replay``). Split from :mod:`mlsched.cli`, which parses and dispatches."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from mlsched.core.errors import SpecError

if TYPE_CHECKING:
    from mlsched.cli_config import Config
    from mlsched.engine.engine import RunResult
    from mlsched.engine.summary import Summary
    from mlsched.experiments.base import ProgressFactory

__all__ = ["options_for", "run_replay", "run_simulate"]


def options_for(policy: str, options: Mapping[str, Any], policies: Sequence[str]) -> dict[str, Any]:
    """The options of ``policy``: unscoped keys (every policy) and ``policy.key`` ones."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        scope, dot, name = key.rpartition(".")
        if not dot:
            out[key] = value
            continue
        if scope not in policies:
            raise SpecError(
                f"--policy-option {key}", scope, f"one of the policies run ({', '.join(policies)})"
            )
        if scope == policy:
            out[name] = value
    return out


def run_replay(config: Config) -> int:
    """``simulate --replay STATE.db``: exit 1 where the replayed decisions differ."""
    from mlsched.controller.replay_state import replay_state

    assert config.replay is not None
    outcome = replay_state(config.replay)
    if config.json:
        print(
            json.dumps(
                {
                    "policy": outcome.policy,
                    "slots": outcome.slots,
                    "first_difference": outcome.first_difference,
                    "damaged_rows": outcome.damaged,
                    "recorded": [asdict(d) for d in outcome.recorded],
                    "replayed": [asdict(d) for d in outcome.replayed],
                },
                indent=1,
            )
        )
    else:
        print(outcome.describe())
    return 0 if outcome.first_difference is None else 1


def run_simulate(config: Config, progress: ProgressFactory) -> int:
    """``simulate``: every policy on the same workload; tables, files and plots."""
    from mlsched.engine.builder import SimulationConfig, check_policies, simulate
    from mlsched.engine.summary import job_rows, summarize
    from mlsched.experiments.comparison import write_comparison
    from mlsched.experiments.report import (
        run_footer,
        run_header,
        summary_table,
        to_json,
        truth_line,
        write_run,
    )
    from mlsched.scheduler.registry import create
    from mlsched.workloads import load_workload

    check_policies(config.policies)
    workload = load_workload(
        config.workload,
        seed=config.seed,
        jobs=config.jobs,
        horizon=config.horizon,
        slot_seconds=config.slot_seconds,
        options=config.options,
    )
    options = {p: options_for(p, config.policy_options, config.policies) for p in config.policies}
    for policy, opts in options.items():
        try:  # bad options fail here, named, before any slot runs
            create(policy, **opts)
        except ValueError as err:
            expected = f"options {policy} accepts ({err})"
            raise SpecError("--policy-option", opts, expected) from None
    # With --json, stdout carries only the JSON document; the notes go to stderr.
    note = sys.stderr if config.json else sys.stdout
    print(run_header(workload, config.seed), file=note)
    print(truth_line(config.truth, workload), file=note)
    runs: list[tuple[Summary, RunResult]] = []
    for policy in config.policies:
        sim = SimulationConfig(
            policy, seed=config.seed, truth=config.truth, policy_options=options[policy]
        )
        with progress(workload.horizon_slots, f"{policy} slots") as advance:
            result = simulate(workload, sim, progress=lambda slot: advance(1))
        runs.append((summarize(result), result))
    if config.json:
        print(json.dumps([to_json(s.to_dict()) for s, _ in runs], indent=2))
    else:
        print(summary_table([s for s, _ in runs]))
        for summary, _ in runs:
            print((f"{summary.policy}: " if len(runs) > 1 else "") + run_footer(summary))
    if config.out is None:
        return 0
    several = len(runs) > 1
    for summary, result in runs:
        paths = write_run(
            config.out / summary.policy if several else config.out,
            summary,
            job_rows(result),
            workload=workload,
            seed=config.seed,
            truth=config.truth.describe(),
        )
        print(f"wrote {paths[0]} and {paths[1]}", file=note)
    if several:
        written = write_comparison(
            config.out, runs, workload=workload, seed=config.seed, policy_options=options
        )
        print(f"wrote {written[0]} and {len(written) - 1} plots", file=note)
    return 0
