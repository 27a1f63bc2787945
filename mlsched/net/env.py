"""How every command finds its controller and credentials: a flag on the command line, else
its environment variable, else the selected context of the client configuration
(``net/contexts.py``), else the command's default (as kubectl's flags win over its
environment and kubeconfig). The agent reads the same as the user's commands; on an agent's
machine ``MLSCHED_TOKEN_FILE`` names the agent's own credential (``mlsched agent-token``).
"""

from __future__ import annotations

import argparse
import os

from mlsched.core.errors import SpecError

__all__ = ["VARIABLES", "add_connection_args", "from_env", "resolve", "token_of"]

#: Flag -> variable.
VARIABLES = {
    "--controller": "MLSCHED_CONTROLLER",
    "--token": "MLSCHED_TOKEN",
    "--token-file": "MLSCHED_TOKEN_FILE",
    "--tls-ca": "MLSCHED_TLS_CA",
    "--tls-cert": "MLSCHED_TLS_CERT",
    "--tls-key": "MLSCHED_TLS_KEY",
    "--context": "MLSCHED_CONTEXT",
}
_FROM_CONTEXT = ("--controller", "--tls-ca", "--tls-cert", "--tls-key")


def from_env(flag: str) -> str | None:
    """The variable of ``flag``, None where unset or empty."""
    return os.environ.get(VARIABLES[flag]) or None


def add_connection_args(
    p: argparse.ArgumentParser, *, default_controller: str | None, ca_help: str
) -> None:
    """``--context``, ``--controller``, the token and the TLS flags of a client of the
    controller; :func:`resolve` fills what is not given."""
    p.add_argument(
        "--context", default=None, help="context of the client configuration to use "
        "(env MLSCHED_CONTEXT; default its current one; mlsched context)",
    )  # fmt: skip
    tail = f"; default {default_controller})" if default_controller else ")"
    p.add_argument(
        "--controller", default=None, help=f"controller HOST:PORT (env MLSCHED_CONTROLLER{tail}"
    )
    p.add_argument("--token", default=None, help="shared token (env MLSCHED_TOKEN)")
    p.add_argument(
        "--token-file", default=None,
        help="file whose first line is the token (env MLSCHED_TOKEN_FILE)",
    )  # fmt: skip
    p.add_argument("--tls-ca", default=None, help=f"{ca_help} (env MLSCHED_TLS_CA)")
    p.add_argument(
        "--tls-cert", default=None,
        help="client certificate, PEM (mutual TLS; env MLSCHED_TLS_CERT)",
    )  # fmt: skip
    p.add_argument(
        "--tls-key", default=None, help="client private key, PEM (mutual TLS; env MLSCHED_TLS_KEY)"
    )
    p.set_defaults(connection_default=default_controller)


def resolve(args: argparse.Namespace) -> argparse.Namespace:
    """Fill each connection flag not given from its variable, else from the context; raise
    :class:`SpecError` where nothing names a controller."""
    from mlsched.net.contexts import load_config

    name = args.context or from_env("--context")
    config = load_config()
    context = config.context(name) if (name or config.current) else {}
    for flag in _FROM_CONTEXT:
        attr = flag[2:].replace("-", "_")
        if getattr(args, attr) is None:
            setattr(args, attr, from_env(flag) or context.get(flag[2:]))
    if args.controller is None:
        args.controller = args.connection_default
    if args.controller is None:
        raise SpecError(
            "--controller", None, "HOST:PORT (or MLSCHED_CONTROLLER, or a context's controller)"
        )
    args.context_token_file = context.get("token-file")
    return args


def token_of(args: argparse.Namespace) -> str | None:
    """The token: ``--token`` or ``--token-file`` when either is given, else
    ``MLSCHED_TOKEN`` or ``MLSCHED_TOKEN_FILE``, else the context's token file."""
    from mlsched.net.auth import read_token

    if args.token is not None or args.token_file is not None:
        return read_token(args.token, args.token_file)
    token, token_file = from_env("--token"), from_env("--token-file")
    if token is not None or token_file is not None:
        return read_token(token, token_file)
    return read_token(None, getattr(args, "context_token_file", None))
