"""How every command finds its controller and credentials in the environment: each flag has
a variable, and a flag given on the command line wins over it (as kubectl's flags win over
its environment). The agent reads the same variables as the user's commands; on an agent's
machine ``MLSCHED_TOKEN_FILE`` names the agent's own credential (``mlsched agent-token``).
"""

from __future__ import annotations

import argparse
import os

__all__ = ["VARIABLES", "add_connection_args", "from_env", "token_of"]

#: Flag -> variable.
VARIABLES = {
    "--controller": "MLSCHED_CONTROLLER",
    "--token": "MLSCHED_TOKEN",
    "--token-file": "MLSCHED_TOKEN_FILE",
    "--tls-ca": "MLSCHED_TLS_CA",
    "--tls-cert": "MLSCHED_TLS_CERT",
    "--tls-key": "MLSCHED_TLS_KEY",
}


def from_env(flag: str) -> str | None:
    """The variable of ``flag``, None where unset or empty."""
    return os.environ.get(VARIABLES[flag]) or None


def add_connection_args(
    p: argparse.ArgumentParser, *, default_controller: str | None, ca_help: str
) -> None:
    """``--controller``, the token and the TLS flags of a client of the controller, each
    defaulting to its variable; ``--controller`` is required where neither it nor its
    variable nor ``default_controller`` gives one."""
    controller = from_env("--controller") or default_controller
    p.add_argument(
        "--controller",
        default=controller,
        required=controller is None,
        help="controller HOST:PORT (env MLSCHED_CONTROLLER"
        + (f"; default {default_controller})" if default_controller else ")"),
    )
    p.add_argument("--token", default=None, help="shared token (env MLSCHED_TOKEN)")
    p.add_argument(
        "--token-file",
        default=None,
        help="file whose first line is the token (env MLSCHED_TOKEN_FILE)",
    )
    p.add_argument("--tls-ca", default=from_env("--tls-ca"), help=f"{ca_help} (env MLSCHED_TLS_CA)")
    p.add_argument(
        "--tls-cert",
        default=from_env("--tls-cert"),
        help="client certificate, PEM (mutual TLS; env MLSCHED_TLS_CERT)",
    )
    p.add_argument(
        "--tls-key",
        default=from_env("--tls-key"),
        help="client private key, PEM (mutual TLS; env MLSCHED_TLS_KEY)",
    )


def token_of(args: argparse.Namespace) -> str | None:
    """The token: ``--token`` or ``--token-file`` when either is given, else the
    environment's ``MLSCHED_TOKEN`` or ``MLSCHED_TOKEN_FILE``."""
    from mlsched.net.auth import read_token

    if args.token is not None or args.token_file is not None:
        return read_token(args.token, args.token_file)
    return read_token(from_env("--token"), from_env("--token-file"))
