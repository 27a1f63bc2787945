"""The ``mlsched`` command's argument parser: its parts, apart from the commands.

* every ``store`` option is single-valued: given twice it is an error, not the last value
  silently winning (:class:`StoreOnce`, registered by :class:`Parser` for the command and
  its subcommands);
* ``--help`` states each option's default where it has one (:class:`HelpFormatter`);
* :class:`EnvDefault` options read ``MLSCHED_<DEST>`` when the flag is absent;
* number types that name what they expect.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Sequence
from typing import Any

__all__ = [
    "ENVIRONMENT",
    "ENVIRONMENT_EPILOG",
    "EnvDefault",
    "EpilogHelpFormatter",
    "HelpFormatter",
    "Parser",
    "StoreOnce",
    "VersionAction",
    "key_values",
    "nonneg_float",
    "package_version",
    "positive_float",
    "positive_int",
]


def package_version() -> str:
    # importlib.metadata is imported when asked: it costs every command's start 20 ms.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mlsched")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


class VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when the option is given."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str = argparse.SUPPRESS,
        default: Any = argparse.SUPPRESS,
        help: str = "show the version and exit",
    ) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(f"{parser.prog} {package_version()}")
        parser.exit()


class StoreOnce(argparse._StoreAction):
    """argparse's ``store``, but a second occurrence of the option is an error: with the
    plain action ``--seed 1 --seed 2`` silently runs seed 2 alone."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        _once(self, parser, namespace, option_string)
        super().__call__(parser, namespace, values, option_string)


def _once(
    action: argparse.Action,
    parser: argparse.ArgumentParser,
    namespace: argparse.Namespace,
    option_string: str | None,
) -> None:
    """Refuse a single-value option given twice (positionals are called once anyway)."""
    if not option_string:
        return
    given: set[str] = namespace.__dict__.setdefault(_GIVEN, set())
    if action.dest in given:
        parser.error(f"{'/'.join(action.option_strings)} given more than once (it takes one value)")
    given.add(action.dest)


#: Namespace attribute holding the single-value options seen so far (removed after parsing).
_GIVEN = "_mlsched_given"


class HelpFormatter(argparse.HelpFormatter):
    """Help that states each option's default, where it has one worth stating."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or action.nargs == 0  # flags: their default is their absence
            or "%(default)" in text
            or default is None
            or default is argparse.SUPPRESS
            or default == []
            or default == ""  # nothing to state: the help says what its absence means
            or re.search(r"\([^)]*\bdefault\b[^)]*\)", text)  # "(...; default 300)": said
        ):
            return text
        return f"{text} (default: %(default)s)"


class EpilogHelpFormatter(argparse.RawDescriptionHelpFormatter, HelpFormatter):
    """:class:`HelpFormatter` that keeps the description's and epilog's lines as written."""


#: Every environment variable mlsched reads, for ``mlsched --help`` (a test keeps it whole).
ENVIRONMENT = (
    ("MLSCHED_CONTROLLER", "HOST:PORT of the controller (client commands, the agent)"),
    ("MLSCHED_TOKEN", "the user token (on an agent's machine: its credential)"),
    ("MLSCHED_TOKEN_FILE", "a file whose first line is that token"),
    ("MLSCHED_TLS_CA", "the CA to trust (TLS)"),
    ("MLSCHED_TLS_CERT", "the client's certificate (mutual TLS)"),
    ("MLSCHED_TLS_KEY", "the client's private key (mutual TLS)"),
    ("MLSCHED_CONTEXT", "the context to use (mlsched context list)"),
    ("MLSCHED_CONFIG", "the client configuration file (default ~/.config/mlsched/config.yaml)"),
    ("MLSCHED_LOG_LEVEL", "debug, info, warning or error (--log-level)"),
    ("MLSCHED_SEED", "--seed of simulate and demo"),
    ("MLSCHED_WORKERS", "worker processes of an experiment's pool (1: in this process)"),
    ("MLSCHED_EXECUTOR", "local or ray[:ADDRESS]: where an experiment's runs go (--executor)"),
    ("MLSCHED_RUN_CACHE", "a directory where experiments share simulated runs"),
    ("MLSCHED_SOLVE_MEMO", "a memo of MILP answers to read back, each checked (make reproduce)"),
    ("MLSCHED_SOLVE_MEMO_RECORD", "a directory that records every MILP answer (make solve-memo)"),
    ("MLSCHED_CLUSTER_STATE", "the emulated cluster's state file (mlsched cluster)"),
    ("MLSCHED_CPU_MOUNT", "the cpu cgroup mount to use first (set by an emulated cluster)"),
)
ENVIRONMENT_EPILOG = "environment (a flag given wins over its variable):\n" + "\n".join(
    f"  {name:<22} {what}" for name, what in ENVIRONMENT
)


class Parser(argparse.ArgumentParser):
    """Every ``store`` option of the command and its subcommands is single-valued, and
    ``--help`` states the defaults."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self.register("action", None, StoreOnce)
        self.register("action", "store", StoreOnce)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        ns, rest = super().parse_known_args(args, namespace)
        ns.__dict__.pop(_GIVEN, None)
        return ns, rest


class EnvDefault(StoreOnce):
    """An option whose default comes from ``MLSCHED_<DEST>`` when that is set.

    Example: ``MLSCHED_SEED=3 mlsched simulate ...`` runs with seed 3 unless ``--seed`` is
    given; ``MLSCHED_LOG_LEVEL=debug`` turns on debug logging. argparse applies the
    option's ``type`` to the environment's string.
    """

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        default: Any = None,
        required: bool = False,
        **kwargs: Any,
    ) -> None:
        env_name = f"MLSCHED_{dest.upper()}"
        default = os.environ.get(env_name, default)
        if default is not None:
            required = False
        help_text = kwargs.pop("help", "") or ""
        kwargs["help"] = f"{help_text} (env {env_name})".strip()
        super().__init__(option_strings, dest, default=default, required=required, **kwargs)


def parse_executor(text: str, field: str) -> tuple[str, str | None]:
    """``(kind, address)`` of an executor named ``local``, ``ray`` or ``ray:HOST:PORT``;
    SpecError naming ``field`` otherwise."""
    from mlsched.core.errors import SpecError

    value = text.strip()
    if value in ("", "local"):
        return "local", None
    if value == "ray":
        return "ray", None
    if value.startswith("ray:"):
        address = value[4:]
        host, sep, port = address.rpartition(":")
        if sep and host and port.isdigit() and 0 < int(port) < 65536:
            return "ray", address
    raise SpecError(field, text, "local, ray, or ray:HOST:PORT (a Ray cluster's address)")


def executor_arg(text: str) -> str:
    """``--executor``: ``local``, ``ray`` or ``ray:HOST:PORT`` (checked here, used by the
    experiments' run pool through ``MLSCHED_EXECUTOR``)."""
    from mlsched.core.errors import SpecError

    try:
        parse_executor(text, "--executor")
    except SpecError as err:
        raise argparse.ArgumentTypeError(f"{text!r}: expected {err.expected}") from None
    return text.strip()


def add_executor_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--executor",
        type=executor_arg,
        default="local",
        action=EnvDefault,
        help="where the runs go: this machine's cores (local), or a Ray cluster (ray: "
        "RAY_ADDRESS's or a new local one; ray:HOST:PORT); needs the ray extra",
    )


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def positive_float(text: str) -> float:
    value = nonneg_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {value}")
    return value


def nonneg_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def key_values(pairs: Sequence[str], flag: str, example: str) -> dict[str, Any]:
    """``KEY=VALUE`` options as a mapping, each value read as a YAML scalar (``0.8`` a
    number, ``true`` a boolean); a malformed pair is refused naming ``flag``."""
    if not pairs:
        return {}
    import yaml

    from mlsched.core.errors import SpecError

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SpecError(flag, pair, f"KEY=VALUE, e.g. {example}")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise SpecError(f"{flag} {key}", value, "a YAML scalar") from None
    return out
