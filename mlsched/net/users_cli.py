"""``mlsched user add | list | remove``: the controller's users file (:mod:`mlsched.net.users`).

Run on the controller's machine by its operator; a running controller reads the file again
when it changes. ``add`` prints the new user's token once (or writes it, owner-only, to
``--token-out``): the file keeps only its SHA-256.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["add_user_parser", "run_user"]


def add_user_parser(sub: Any) -> None:
    p = sub.add_parser(
        "user",
        help="add, list or remove the controller's users (--users-file: names, roles, quotas)",
        description="Edit the controller's users file. Each user has a token of their own "
        "(given once, by add), owns the jobs they submit, may cancel and read the logs of "
        "those only (an admin: of every job), and may have quotas checked at submission.",
    )
    verbs = p.add_subparsers(dest="verb", required=True, metavar="{add,list,remove}")
    add = verbs.add_parser("add", help="add a user with a new token")
    add.add_argument("name", help="the user's name (letters, digits, '.', '_', '-')")
    add.add_argument("--admin", action="store_true", help="may act on every user's jobs")
    add.add_argument(
        "--gpus", type=int, default=None, metavar="N",
        help="quota: GPUs the user's unfinished jobs may hold together, each at its largest",
    )  # fmt: skip
    add.add_argument(
        "--queued", type=int, default=None, metavar="N",
        help="quota: the user's jobs waiting to run (pending, admitted, paused)",
    )  # fmt: skip
    add.add_argument(
        "--token-out", type=Path, default=None, metavar="FILE",
        help="write the token to FILE (readable by its owner only) instead of printing it",
    )  # fmt: skip
    verbs.add_parser("list", help="the users, their roles and quotas (never tokens)")
    rm = verbs.add_parser("remove", help="remove a user: their token stops working")
    rm.add_argument("name")
    for q in (add, verbs.choices["list"], rm):
        q.add_argument(
            "--users-file", required=True, type=Path, metavar="FILE",
            help="the file the controller's --users-file names (created by add)",
        )  # fmt: skip


def run_user(args: argparse.Namespace) -> int:
    from mlsched.net.auth import write_private_file
    from mlsched.net.users import Quota, add_user, load_users, remove_user

    if args.verb == "add":
        token = add_user(
            args.users_file, args.name, admin=args.admin,
            quota=Quota(gpus=args.gpus, queued=args.queued),
        )  # fmt: skip
        if args.token_out is not None:
            write_private_file(args.token_out, f"{token}\n".encode())
            print(f"added {args.name}; token in {args.token_out}")
        else:
            print(f"added {args.name}; token (shown once): {token}")
        return 0
    if args.verb == "remove":
        remove_user(args.users_file, args.name)
        print(f"removed {args.name}")
        return 0
    users = load_users(args.users_file)
    print(f"{'user':<24} {'role':<6} {'gpus':>6} {'queued':>7}")
    for name in users.names():
        user = users.by_name(name)
        assert user is not None
        q = user.quota
        gpus = "-" if q.gpus is None else str(q.gpus)
        queued = "-" if q.queued is None else str(q.queued)
        print(f"{name:<24} {user.role:<6} {gpus:>6} {queued:>7}")
    return 0
