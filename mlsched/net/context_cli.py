"""``mlsched context``: list, choose and write the named contexts of the client
configuration (:mod:`mlsched.net.contexts`)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_context_parser", "run_context"]


def add_context_parser(sub: Any) -> None:
    p = sub.add_parser(
        "context",
        help="named controllers and credentials for the client commands (as kubeconfig)",
        description="The client configuration (MLSCHED_CONFIG, default "
        "~/.config/mlsched/config.yaml) names contexts: a controller and the files that "
        "reach it. A flag or an MLSCHED_* variable wins over the context.",
    )
    csub = p.add_subparsers(dest="context_command", required=True)
    csub.add_parser("list", help="every context; * marks the current one")
    use = csub.add_parser("use", help="make NAME the current context")
    use.add_argument("name")
    put = csub.add_parser("set", help="create or change context NAME (and make it current)")
    put.add_argument("name")
    put.add_argument("--controller", default=None, help="HOST:PORT")
    put.add_argument("--token-file", default=None, help="file holding the token")
    put.add_argument("--tls-ca", default=None, help="the CA to trust (PEM)")
    put.add_argument("--tls-cert", default=None, help="client certificate (PEM)")
    put.add_argument("--tls-key", default=None, help="client key (PEM)")


def run_context(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mlsched.core.errors import SpecError
    from mlsched.core.ids import check_id
    from mlsched.net.contexts import FIELDS, load_config, save_config

    config = load_config()
    if args.context_command == "list":
        if not config.contexts:
            print(f"no contexts in {config.path} (mlsched context set NAME --controller ...)")
        for name, body in sorted(config.contexts.items()):
            mark = "*" if name == config.current else " "
            print(f"{mark} {name}: {body.get('controller', '(no controller)')}")
        return 0
    name = check_id(args.name, "name")
    if args.context_command == "use":
        if name not in config.contexts:
            raise SpecError("name", name, f"a context of {config.path}")
        config.current = name
        save_config(config)
        print(f"current context: {name}")
        return 0
    body = dict(config.contexts.get(name, {}))
    for key, is_path in FIELDS.items():
        value = getattr(args, key.replace("-", "_"))
        if value is None:
            continue
        if is_path:
            value = str(Path(value).expanduser().resolve())
        body[key] = value
    if "controller" not in body:
        raise SpecError("--controller", None, "HOST:PORT for a new context")
    config.contexts[name] = body
    config.current = name
    save_config(config)
    print(f"context {name} written to {config.path} (current)")
    return 0
