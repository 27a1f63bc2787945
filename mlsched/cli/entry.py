"""The ``mlsched`` command: parse -> config -> run, so tests call :func:`main` with a list.

Subcommands: ``simulate`` (one policy on one workload), ``policies``, ``workloads`` and
``experiments`` (what is registered), ``experiment NAME`` (a named comparison with
``results.json`` and plots), ``train`` (one job on this machine), the testbed's
``controller``, ``agent``, ``submit``, ``status`` and ``cancel``, ``cluster`` (an emulated
multi-host cluster on this machine), and ``demo`` (a controller and two agents training
for real; ``--simulated``: a simulated comparison; ``--emulate``: on an emulated cluster).
Bad input (unknown names, bad files, bad values) prints one line naming the problem and
exits with status 2; a failing policy exits with 1.
Options that read ``MLSCHED_<NAME>`` take a flag over the environment over the default.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlsched.cli.commands import command_of, get_args_parser
from mlsched.cli.config import Config
from mlsched.cli.demo import run_cluster_demo, run_simulated_demo
from mlsched.cli.parser import EnvDefault, key_values
from mlsched.cli.simulate import run_replay, run_simulate
from mlsched.controller.cli import CLUSTER_COMMANDS, run_cluster_command
from mlsched.core.errors import PolicyError, SpecError
from mlsched.experiments.reproduce_cli import run_reproduce
from mlsched.profiling.cli import run_profile
from mlsched.testbed.cli import (
    EMULATED_EXPERIMENTS,
    run_emulated_demo,
    run_emulated_experiment,
    run_emulation,
    run_fidelity_experiment,
)
from mlsched.workloads.traces.cli import run_trace

# The simulator, policies, experiments, plots (numpy, scipy, matplotlib) and YAML are
# imported by the functions that run a command, so that building the parser stays cheap:
# `mlsched --help` and `mlsched status` should not pay a second of imports. The agent's and
# the trainers' options (sockets, the training settings) are imported with their commands
# (mlsched.cli.commands builds the parsers).
if TYPE_CHECKING:
    from mlsched.experiments.progress import ProgressFactory

__all__ = ["Config", "EnvDefault", "config_from_args", "get_args_parser", "main", "run"]

log = logging.getLogger(__name__)


def _refuse_testbed_options(args: argparse.Namespace) -> None:
    """A simulated experiment compares the policies its paper names: an option only the
    testbed and fidelity experiments read is refused, not silently ignored."""
    given = {
        "--policy": args.policy, "--profile": args.profile,
        "--ablate-isolation": args.ablate_isolation,
        "--profile-via": args.profile_via != "local",
    }  # fmt: skip
    for flag, value in given.items():
        if value:
            raise SpecError(
                flag, value, f"no {flag} for experiment {args.name} (it runs the policies and "
                "settings of its paper): only testbed, fidelity or --emulate read it",
            )  # fmt: skip


# Config ---------------------------------------------------------------------------------
def _policy_list(values: Sequence[str]) -> tuple[str, ...]:
    """``--policy a,b --policy c`` -> (a, b, c); empty names and repeats are refused."""
    names = [n.strip() for v in values for n in v.split(",")]
    for name in names:
        if not name:
            raise SpecError("--policy", ",".join(values), "policy names separated by commas")
        if names.count(name) > 1:
            raise SpecError("--policy", name, "each policy once")
    return tuple(names)


def _options(pairs: Sequence[str], cluster: str | None) -> dict[str, Any]:
    out = key_values(pairs, "--workload-option", "servers=10")
    if cluster is not None:
        out["cluster"] = cluster
    return out


def _progress_enabled() -> bool:
    """Progress bars only for a person watching: stderr is a terminal and not CI."""
    return sys.stderr.isatty() and not os.environ.get("CI")


def config_from_args(args: argparse.Namespace) -> Config:
    cmd = args.command
    if cmd == "simulate" and args.replay is not None:
        others = [f"--{n}" for n in ("workload", "policy", "profile") if getattr(args, n)]
        if others:
            raise SpecError(others[0], "given", "nothing beside --replay (the run names it)")
        return Config("replay", replay=args.replay, json=args.json)
    if cmd == "simulate":
        from mlsched.engine.simulator import DEFAULT_RESTART_S, TruthConfig

        for name in ("workload", "policy"):
            if not getattr(args, name):
                raise SpecError(f"--{name}", None, "given (or --replay STATE.db)")

        profile = None
        if args.profile is not None:  # imported only then: the truth mostly comes from specs
            from mlsched.perfmodel.profile import load_profile

            profile = load_profile(args.profile)
        truth = TruthConfig(
            compute_scale=args.truth_compute_scale,
            comm_scale=args.truth_comm_scale,
            noise=args.truth_noise,
            restart_s=DEFAULT_RESTART_S if args.restart_s is None else args.restart_s,
            startup_s=args.startup_s,
            profile=profile,
        )
        return Config(
            cmd,
            workload=args.workload,
            policies=_policy_list(args.policy),
            seed=args.seed,
            jobs=args.jobs,
            horizon=args.horizon,
            slot_seconds=args.slot_seconds,
            options=_options(args.workload_option, args.cluster),
            trace_format=args.trace_format,
            policy_options=key_values(args.policy_option, "--policy-option", "g_delta=0.8"),
            truth=truth,
            out=args.out,
            json=args.json,
            progress=_progress_enabled(),
        )
    if cmd == "experiment":
        if args.ablate_isolation:
            raise SpecError("--ablate-isolation", True, "only with experiment fidelity")
        if args.profile_via != "local":
            raise SpecError("--profile-via", args.profile_via, "only with experiment fidelity")
        if args.profile is not None:
            raise SpecError(
                "--profile",
                str(args.profile),
                "only with experiment testbed --emulate or fidelity (the paper experiments' "
                "jobs are the "
                "papers' synthetic ones, which no measured profile covers)",
            )
        out = args.out or Path("results") / args.name
        return Config(
            cmd,
            experiment=args.name,
            out=out,
            seeds=args.seeds,
            scale=args.scale,
            strict=args.strict,
            progress=_progress_enabled(),
        )
    if cmd == "demo":
        return Config(cmd, policies=tuple(args.policy), seed=args.seed)  # --simulated
    if cmd == "train":
        from mlsched.trainers.cli import train_config

        return Config(cmd, train=train_config(args))
    if cmd in ("policies", "workloads", "experiments"):
        return Config(cmd, json=args.json)
    return Config(cmd)


# Run ------------------------------------------------------------------------------------
def run(config: Config) -> int:
    from mlsched.scheduler.registry import available
    from mlsched.workloads import builtin_workloads

    handler: dict[str, Callable[[Config], int]] = {
        "simulate": lambda c: run_simulate(c, _progress(c)),
        "replay": run_replay,
        "policies": lambda c: _print_names(available(), json_out=c.json, extra=_policy_facts),
        "workloads": lambda c: _print_names(builtin_workloads(), _FILES_NOTE, json_out=c.json),
        "experiments": _list_experiments,
        "experiment": _experiment,
        "demo": run_simulated_demo,
        "train": _train,
    }
    if config.command in ("simulate", "experiment"):
        from mlsched.core.batch_gc import batch_gc, no_exit_collection

        no_exit_collection()
        with batch_gc():  # loading thousands of jobs, then the runs
            return handler[config.command](config)
    return handler[config.command](config)


def _train(config: Config) -> int:
    from mlsched.trainers.cli import run_train

    return run_train(config.train) if config.train else 2


_FILES_NOTE = "(or a workload file: .yaml, .json, or .csv with --cluster; docs/workloads.md)"


def _policy_facts(name: str) -> dict[str, Any]:
    from mlsched.scheduler.registry import BUILTIN, policy_class, policy_options

    cls = policy_class(name)
    return {
        "archs": sorted(a.value for a in cls.archs),
        "class": f"{cls.__module__}:{cls.__qualname__}",
        "builtin": name in BUILTIN,
        "options": [o.to_dict() for o in policy_options(cls)],
    }


def _print_names(
    names: dict[str, str],
    note: str = "",
    *,
    json_out: bool = False,
    extra: Callable[[str], dict[str, Any]] | None = None,
) -> int:
    if json_out:
        rows = [
            {"name": n, "description": d, **(extra(n) if extra else {})} for n, d in names.items()
        ]
        print(json.dumps(rows, indent=2))
        return 0
    width = max((len(n) for n in names), default=0)
    for name, description in names.items():
        print(f"{name.ljust(width)}  {description}")
    if note:
        print(note)
    return 0


@contextmanager
def _tqdm(total: int | None, desc: str) -> Iterator[Callable[[int], None]]:
    from tqdm import tqdm

    with tqdm(total=total, desc=desc, leave=False, file=sys.stderr) as bar:

        def advance(n: int = 1) -> None:
            bar.update(n)

        yield advance


def _list_experiments(config: Config) -> int:
    from mlsched.experiments import experiments  # the registry imports every experiment

    listed = dict(sorted({**experiments(), **EMULATED_EXPERIMENTS}.items()))
    return _print_names(listed, json_out=config.json)


def _progress(config: Config) -> ProgressFactory:
    from mlsched.experiments.progress import no_progress

    return _tqdm if config.progress else no_progress


def _experiment(config: Config) -> int:
    from mlsched.experiments import run_experiment
    from mlsched.experiments.report import experiment_report

    out = config.out or Path("results") / config.experiment
    results = run_experiment(
        config.experiment,
        out_dir=out,
        scale=config.scale,
        seeds=config.seeds,
        progress=_progress(config),
    )
    print(experiment_report(results))
    for failure in results.get("failures", []):
        print(f"warning: {failure['policy']} failed: {failure['error']}", file=sys.stderr)
    print(f"wrote {out / 'results.json'} and {len(results.get('plots', []))} plots")
    failed = [c["name"] for c in results.get("checks", []) if not c.get("passed")]
    if failed and config.strict:
        print(
            f"mlsched: {len(failed)} check(s) failed: {'; '.join(failed)} "
            "(--no-strict exits 0 all the same)",
            file=sys.stderr,
        )
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mlsched`` console script; returns the exit status."""
    try:
        words = sys.argv[1:] if argv is None else list(argv)
        args = get_args_parser(command_of(words)).parse_args(words)
    except SystemExit as exc:  # argparse's own usage errors (2) and --help (0)
        return exc.code if isinstance(exc.code, int) else 2
    daemon = args.command in ("controller", "agent")
    level = getattr(logging, (args.log_level or ("info" if daemon else "warning")).upper())
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format=("%(asctime)s " if daemon else "") + "%(levelname)s %(name)s: %(message)s",
    )
    executor = getattr(args, "executor", None)
    if executor is not None:  # the experiments' run pool reads it (nested Runners too)
        os.environ["MLSCHED_EXECUTOR"] = executor
    try:
        if args.command in CLUSTER_COMMANDS:
            return run_cluster_command(args)
        if args.command == "trace":
            return run_trace(args)
        if args.command == "profile":
            return run_profile(args)
        if args.command == "reproduce":
            return run_reproduce(args)
        if args.command == "agent":
            from mlsched.agent.cli import run_agent

            return run_agent(args)
        if args.command == "cluster":
            return run_emulation(args)
        if args.command == "demo" and args.emulate:
            return run_emulated_demo(args)
        if args.command == "experiment" and args.name == "fidelity":
            return run_fidelity_experiment(args, _policy_list(args.policy))
        if args.command == "experiment" and (args.emulate or args.name == "testbed"):
            return run_emulated_experiment(args, _policy_list(args.policy or ["fifo,drf"]))
        if args.command == "experiment":
            _refuse_testbed_options(args)
        if args.command == "demo" and not args.simulated:
            return run_cluster_demo(args)
        return run(config_from_args(args))
    except SpecError as err:
        print(f"mlsched: error: {err}", file=sys.stderr)
        return 2
    except PolicyError as err:
        print(f"mlsched: policy error: {err}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`| head`): nothing to say. Point stdout at devnull so the
        # interpreter's final flush does not raise again (the Python docs' recipe).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except OSError as err:
        print(f"mlsched: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mlsched: interrupted", file=sys.stderr)
        return 130
