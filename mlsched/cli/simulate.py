"""The ``simulate`` command's bodies: policies run on one workload, or a recorded testbed
run replayed (``--replay``). Split from :mod:`mlsched.cli.entry`, which parses and dispatches."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from mlsched.core.errors import SpecError

if TYPE_CHECKING:
    from mlsched.cli.config import Config
    from mlsched.engine.engine import RunResult
    from mlsched.engine.summary import Summary
    from mlsched.experiments.progress import ProgressFactory

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
    from mlsched.core.errors import PolicyError
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
    from mlsched.scheduler.registry import create, ring_placement_for
    from mlsched.workloads import load_workload

    check_policies(config.policies)
    workload = load_workload(
        config.workload,
        seed=config.seed,
        jobs=config.jobs,
        horizon=config.horizon,
        slot_seconds=config.slot_seconds,
        options=config.options,
        trace_format=config.trace_format,
    )
    options = {p: options_for(p, config.policy_options, config.policies) for p in config.policies}
    ringed = []
    for policy in config.policies:
        ring = ring_placement_for(policy, options[policy], workload.jobs)
        if ring is not None:
            options[policy] = ring
            ringed.append(policy)
    for policy, opts in options.items():
        try:  # bad options fail here, named, before any slot runs
            create(policy, **opts)
        except ValueError as err:
            expected = f"options {policy} accepts ({err})"
            raise SpecError("--policy-option", opts, expected) from None
    # With --json, stdout carries only the JSON document; the notes go to stderr.
    note = sys.stderr if config.json else sys.stdout
    if config.trace_format is not None:  # what the import assumed, as `trace import` says
        from mlsched.workloads.traces.cli import summary_lines

        print("\n".join(summary_lines(workload.notes, has_cluster=True)), file=note)
    print(run_header(workload, config.seed), file=note)
    print(truth_line(config.truth, workload), file=note)
    if ringed:
        print(
            f"{', '.join(ringed)}: ring placement, reserving hop bandwidth (the workload's "
            "jobs reserve it; -P POLICY.placement=default to override)",
            file=note,
        )
    runs: list[tuple[Summary, RunResult]] = []
    # One policy's error (an allocation the engine refuses) is reported beside the other
    # policies' results, never instead of them.
    failed: list[tuple[str, str]] = []
    for policy in config.policies:
        sim = SimulationConfig(
            policy, seed=config.seed, truth=config.truth, policy_options=options[policy]
        )
        with progress(workload.horizon_slots, f"{policy} slots") as advance:
            try:
                result = simulate(workload, sim, progress=lambda slot: advance(1))
            except PolicyError as err:
                failed.append((policy, str(err)))
                continue
        runs.append((summarize(result), result))
    if config.json:
        failures = [{"policy": p, "failed": why} for p, why in failed]
        print(json.dumps([to_json(s.to_dict()) for s, _ in runs] + failures, indent=2))
    else:
        if runs:
            print(summary_table([s for s, _ in runs]))
        for summary, _ in runs:
            print((f"{summary.policy}: " if len(runs) > 1 else "") + run_footer(summary))
        for policy, why in failed:
            print(f"{policy}: FAILED, no results: {why}")
    status = 1 if failed else 0
    if config.out is None:
        return status
    if failed:
        config.out.mkdir(parents=True, exist_ok=True)
        path = config.out / "failed.json"
        rows = [{"policy": p, "failed": why} for p, why in failed]
        path.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path}", file=note)
    several = len(config.policies) > 1  # each in its own folder, whichever failed
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
    if len(runs) > 1:
        written = write_comparison(
            config.out, runs, workload=workload, seed=config.seed, policy_options=options
        )
        print(f"wrote {written[0]} and {len(written) - 1} plots", file=note)
    return status
