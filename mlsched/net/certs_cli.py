"""``mlsched certs``: the cluster's CA, the controller's certificate and client
certificates, in one directory (:mod:`mlsched.net.certs`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["add_certs_parser", "run_certs"]


def add_certs_parser(sub: Any) -> None:
    p = sub.add_parser(
        "certs",
        help="make TLS certificates: a CA, the controller's, and clients' (users, agents)",
        description="Make the cluster's CA in --dir (reused if there), then the controller's "
        "certificate for the names and addresses it is reached at (--dns, --ip) and a "
        "client certificate per --client (a user or an agent, for mutual TLS). Keys are "
        "written readable by their owner only. Run again to re-issue certificates under the "
        "same CA.",
    )
    p.add_argument("--dir", required=True, type=Path, help="directory for the files")
    p.add_argument(
        "--dns", action="append", default=[], metavar="NAME",
        help="a DNS name of the controller (repeatable; e.g. ctl.example.org, localhost)",
    )  # fmt: skip
    p.add_argument(
        "--ip", action="append", default=[], metavar="ADDR",
        help="an IP address of the controller (repeatable; e.g. 10.0.0.5, 127.0.0.1)",
    )  # fmt: skip
    p.add_argument(
        "--client", action="append", default=[], metavar="NAME",
        help="a client certificate NAME.pem/NAME.key (repeatable: users, agents by --name)",
    )  # fmt: skip
    p.add_argument("--days", type=int, default=None, help="certificates' lifetime (default 825)")
    p.add_argument("--cluster", default="mlsched", help="the CA's name (its common name)")


def run_certs(args: argparse.Namespace) -> int:
    from mlsched.net.certs import LEAF_DAYS, issue

    done = issue(
        args.dir,
        dns=args.dns,
        ips=args.ip,
        clients=args.client,
        days=LEAF_DAYS if args.days is None else args.days,
        cluster=args.cluster,
    )
    print(f"{'made' if done.ca_created else 'kept'} the CA: {done.ca_cert} (key {done.ca_key})")
    for path in done.written:
        print(f"wrote {path}")
    if not done.written:
        print("no certificate asked for: give --dns/--ip (the controller's) or --client NAME")
    return 0
