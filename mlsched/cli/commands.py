"""Every ``mlsched`` command's parser, and the one :func:`get_args_parser` builds: the whole
parser, or one that knows only the command the arguments name (:func:`command_of`), which
is all a command needs to start."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from mlsched.cli.parser import (
    ENVIRONMENT_EPILOG,
    EnvDefault,
    EpilogHelpFormatter,
    Parser,
    VersionAction,
    add_executor_option,
    nonneg_float,
    positive_float,
    positive_int,
)
from mlsched.controller.cli import CLUSTER_COMMANDS, add_cluster_parsers
from mlsched.experiments.reproduce_cli import add_reproduce_parser
from mlsched.profiling.cli import add_profile_parser
from mlsched.testbed.cli import add_emulation_parser
from mlsched.workloads.traces import FORMATS as _TRACE_FORMATS
from mlsched.workloads.traces.cli import add_trace_parser

__all__ = ["COMMANDS", "LOG_LEVELS", "command_of", "get_args_parser"]


# (flags, type, default, help) of the workload and simulated-truth options.
_WORKLOAD_ARGS: tuple[tuple[tuple[str, ...], Any, Any, str], ...] = (
    (("--jobs",), positive_int, None, "number of jobs (a file keeps its first N)"),
    (("--horizon",), positive_int, None, "horizon in slots"),
    (("--slot-seconds",), positive_float, None, "slot length in seconds"),
    (("--cluster",), str, None, "cluster file (YAML/JSON) for a CSV or --trace-format trace"),
)
_TRUTH_ARGS: tuple[tuple[tuple[str, ...], Any, Any, str], ...] = (
    (("--truth-compute-scale",), positive_float, 1.0, "true / spec compute time"),
    (("--truth-comm-scale",), positive_float, 1.0, "true / nominal communication time"),
    (("--truth-noise",), nonneg_float, 0.0, "log-normal sigma of iteration-time noise"),
    (
        ("--restart-s",),
        nonneg_float,
        None,
        "seconds lost per checkpoint + restart (a resume or re-layout); default 30, or the "
        "profile's cell for the jobs it covers",
    ),
    (
        ("--startup-s",),
        nonneg_float,
        0.0,
        "seconds from a job's first launch to its first iteration, for jobs the profile "
        "does not cover",
    ),
    (
        ("--profile",),
        Path,
        None,
        "a measured profile (mlsched profile measure) as the truth: each job's iteration, "
        "start-up and restart from its cell (docs/fidelity.md)",
    ),
)


LOG_LEVELS = ("debug", "info", "warning", "error")


def command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names, read before parsing (its first word that is not an option
    or the log level's value); None where it names none, or asks for the whole help."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--log-level":
            skip = True
        elif word in ("-h", "--help", "--version"):
            return None
        elif not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def get_args_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``mlsched`` parser; with ``command``, one that knows that command only (building
    every command's options is most of a short command's start-up)."""
    parser = Parser(
        prog="mlsched",
        description="Online scheduling of distributed deep-learning jobs.",
        epilog=ENVIRONMENT_EPILOG,
        formatter_class=EpilogHelpFormatter,
    )
    parser.add_argument("--version", action=VersionAction)
    parser.add_argument(
        "--log-level",
        default=None,
        action=EnvDefault,
        choices=LOG_LEVELS,
        help="default: info for the controller and agent daemons, warning otherwise",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for names, add in _PARSERS:
        if command is None or command in names:
            add(sub)
    for choice in sub.choices.values():  # also after the command: mlsched status --log-level
        if "--log-level" not in choice._option_string_actions:
            choice.add_argument(
                "--log-level", default=argparse.SUPPRESS, choices=LOG_LEVELS,
                help="as before the command (env MLSCHED_LOG_LEVEL)",
            )  # fmt: skip
    return parser


def _add_simulate_parser(sub: Any) -> None:
    p = sub.add_parser(
        "simulate", help="run one or several policies on the same workload in the simulator"
    )
    p.add_argument("--workload", help="built-in workload name or a file (required)")
    p.add_argument(
        "--policy",
        action="append",
        help="registered policy (mlsched policies); several: a comma list or the flag "
        "repeated, each run on the same jobs (required)",
    )
    p.add_argument(
        "--replay",
        type=Path,
        metavar="STATE.db",
        help="instead: feed a testbed run's stored measurements (a controller's --db) to the "
        "engine with the run's policy and cluster, and compare its admissions and "
        "allocations with the recorded ones slot by slot (exit 1 where they differ)",
    )
    p.add_argument("--seed", type=int, default=0, action=EnvDefault, help="seed")
    p.add_argument(
        "--trace-format",
        choices=list(_TRACE_FORMATS),
        help="--workload is a public trace in this format, imported in the same process as "
        "`mlsched trace import` would (with --cluster; -W throughputs=FILE, tasks=FILE, "
        "ignore_gpu_type=true, skip_invalid=true as its options)",
    )
    for flags, kind, default, text in _WORKLOAD_ARGS:
        p.add_argument(*flags, type=kind, default=default, help=text)
    p.add_argument(
        "-W",
        "--workload-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="generator option, e.g. -W servers=10 (repeatable; values are YAML scalars)",
    )
    p.add_argument(
        "-P",
        "--set",
        "--policy-option",
        dest="policy_option",
        action="append",
        default=[],
        metavar="[POLICY.]KEY=VALUE",
        help="policy option, e.g. -P g_delta=0.8, or for one of several policies "
        "-P oasis.steady_slack=0 (repeatable; values are YAML scalars; docs/algorithms/ "
        "lists each policy's)",
    )
    g = p.add_argument_group("simulated truth (how reality departs from the job specs)")
    for flags, kind, default, text in _TRUTH_ARGS:
        g.add_argument(*flags, type=kind, default=default, help=text)
    p.add_argument("--out", type=Path, help="directory for summary.json and jobs.csv")
    p.add_argument(
        "--json", action="store_true", help="print the run summaries as JSON (notes on stderr)"
    )


def _add_experiment_parser(sub: Any) -> None:
    p = sub.add_parser("experiment", help="run a named comparison (results.json + plots)")
    p.add_argument("name", help="experiment name (mlsched experiments)")
    add_executor_option(p)
    p.add_argument("--out", type=Path, help="output directory (default results/NAME)")
    p.add_argument("--seeds", type=positive_int, help="number of seeds (default 3)")
    p.add_argument(
        "--scale",
        default="default",
        choices=["smoke", "default", "paper"],
        help="default: about a minute; paper: the spec's full size; smoke: for CI",
    )
    p.add_argument(
        "--no-strict",
        dest="strict",
        action="store_false",
        help="exit 0 even when a check fails (by default a failed check exits 1)",
    )
    p.add_argument(
        "--emulate", action="store_true", help="testbed: for real on an emulated cluster (root)"
    )
    p.add_argument(
        "--policy", action="append", default=[], help="testbed, fidelity: policies (a,b,c)"
    )
    p.add_argument(
        "--profile",
        type=Path,
        help="testbed: the simulator's truth for the comparison (a profile measured for the "
        "emulated hosts, e.g. profile measure --cpus 0.45); default: the job specs. "
        "fidelity: the profile to use (measured first, and written here, when absent)",
    )
    p.add_argument(
        "--ablate-isolation",
        action="store_true",
        help="fidelity: also run the first policy without CPU slices (about 3 min more)",
    )
    p.add_argument(
        "--profile-via",
        choices=("local", "agents"),
        default="local",
        help="fidelity: measure the profile here in the cluster's slices (local), or through "
        "the emulated cluster's agents, each cell in each shape its hosts give (agents)",
    )


def _add_demo_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="a controller and two agents on this machine train a ResNet/VGG mix for real",
        description="Start a controller and two agents on localhost, submit a small mix of "
        "ResNet/VGG parameter-server and all-reduce jobs, train them on the CPU over "
        "several slots with --policy, and print a per-job table. With --simulated: a "
        "few-second simulated comparison of the policies on the demo workload instead.",
    )
    p.add_argument(
        "--policy", action="append", default=[], help="policy (repeatable with --simulated)"
    )
    p.add_argument("--slots", type=positive_int, default=16, help="slots to run at most")
    p.add_argument("--slot-seconds", type=positive_float, default=10.0, help="slot length (s)")
    p.add_argument("--workdir", type=Path, help="keep state, logs and checkpoints here")
    p.add_argument("--simulated", action="store_true", help="simulated comparison instead")
    p.add_argument(
        "--emulate",
        action="store_true",
        help="on an emulated cluster: 4 hosts in 2 racks, shaped links (root; docs/emulation.md)",
    )
    p.add_argument("--seed", type=int, default=0, action=EnvDefault, help="seed (--simulated)")
    p.add_argument(
        "--profile",
        type=Path,
        help="a profile of this machine (mlsched profile measure): the controller's runtime "
        "model starts from it",
    )
    p.add_argument(
        "--device-cores",
        type=positive_float,
        help="each stand-in GPU a CPU slice of this many cores: every task in a share of its "
        "own (root; measure the profile with the same --device-cores)",
    )
    p.add_argument(
        "--ps-cores", type=positive_float, help="with --device-cores: a parameter server's share"
    )
    p.add_argument(
        "--measure-profile",
        action="store_true",
        help="first measure the cells the demo's jobs need into --profile, in the "
        "--device-cores slices (a few minutes; cells the file has are kept)",
    )


def _add_list_parser(sub: Any, name: str, text: str) -> None:
    sub.add_parser(name, help=text).add_argument(
        "--json", action="store_true", help="a JSON list of {name, description, ...}"
    )


def _add_train_parser(sub: Any) -> None:
    from mlsched.trainers.cli import add_train_parser

    add_train_parser(sub)


def _add_agent_parser(sub: Any) -> None:
    from mlsched.agent.cli import add_agent_args

    p = sub.add_parser(
        "agent",
        help="run a node agent (launches the trainers the controller assigns)",
        description="Register this machine with a controller and run the tasks it assigns.",
    )
    add_agent_args(p)


#: Each command's parser: the commands it adds, and how (in ``mlsched --help``'s order).
_PARSERS: tuple[tuple[tuple[str, ...], Callable[[Any], None]], ...] = (
    (("simulate",), _add_simulate_parser),
    *(
        ((name,), partial(_add_list_parser, name=name, text=f"list the {what}"))
        for name, what in (("policies", "registered policies"), ("workloads", "built-in workloads"),
                           ("experiments", "registered experiments"))
    ),
    (("experiment",), _add_experiment_parser),
    (("demo",), _add_demo_parser),
    (("reproduce",), add_reproduce_parser),
    (("train",), _add_train_parser),
    (("trace",), add_trace_parser),
    (("profile",), add_profile_parser),
    (CLUSTER_COMMANDS, add_cluster_parsers),
    (("cluster",), add_emulation_parser),
    (("agent",), _add_agent_parser),
)  # fmt: skip
#: Every command (:func:`main` reads which one before it builds that command's parser).
COMMANDS = tuple(name for names, _ in _PARSERS for name in names)
