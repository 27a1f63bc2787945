"""``mlsched controller | submit | status | cancel | logs``: run the controller, talk to it.

Clients find the controller with ``--controller HOST:PORT`` (or ``MLSCHED_CONTROLLER``) and
authenticate with ``--token``/``--token-file`` (or ``MLSCHED_TOKEN``), TLS with ``--tls-ca``.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

from mlsched.cli.parser import key_values, positive_float, positive_int
from mlsched.core.errors import SpecError
from mlsched.core.server_gc import tune_for_serving
from mlsched.net.certs_cli import add_certs_parser
from mlsched.net.context_cli import add_context_parser
from mlsched.net.env import add_connection_args, resolve, token_of
from mlsched.net.users_cli import add_user_parser

T = TypeVar("T")

# gRPC, the generated stubs, YAML and the auth module are imported by the functions that use
# them: building the parser (mlsched --help, mlsched status --help) needs none of them.
if TYPE_CHECKING:
    from mlsched.core.cluster import Topology
    from mlsched.core.device_types import TypeCatalogue
    from mlsched.net.auth import ClientAuth
    from mlsched.v1 import jobs_pb2_grpc

__all__ = [
    "CLUSTER_COMMANDS",
    "add_cluster_parsers",
    "auth_args",
    "client_auth",
    "run_cluster_command",
]

log = logging.getLogger(__name__)

CLUSTER_COMMANDS = (
    "controller", "submit", "status", "cancel", "logs", "agent-token", "certs", "context",
    "user", "whoami", "audit", "describe",
)  # fmt: skip


def auth_args(p: argparse.ArgumentParser, *, server: bool) -> None:
    p.add_argument("--token", default=None, help="shared token (env MLSCHED_TOKEN)")
    p.add_argument("--token-file", default=None, help="file whose first line is the token")
    p.add_argument("--tls-cert", default=None, help="PEM certificate (TLS)")
    p.add_argument("--tls-key", default=None, help="PEM private key (TLS)")
    p.add_argument(
        "--tls-ca",
        default=None,
        help="PEM CA: clients of it are required (mutual TLS)" if server else "PEM CA to trust",
    )


def _client_args(p: argparse.ArgumentParser) -> None:
    add_connection_args(p, default_controller="127.0.0.1:50051", ca_help="PEM CA to trust")
    p.add_argument("--timeout", type=float, default=10.0, help="RPC deadline in seconds")


def add_cluster_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "controller",
        help="run the testbed controller (gRPC; agents connect to it)",
        description="Run a policy on wall-clock slots over the agents that register, "
        "keeping state in a SQLite file (a restart on the same --db resumes).",
    )
    p.add_argument("--listen", default="127.0.0.1:50051", help="HOST:PORT (port 0: any)")
    p.add_argument("--policy", default="fifo", help="policy name (mlsched policies)")
    p.add_argument("--policy-option", action="append", default=[], help="KEY=VALUE (repeatable)")
    p.add_argument("--slot-seconds", type=float, default=60.0, help="slot length (s)")
    p.add_argument("--db", default="mlsched.db", help="SQLite state file")
    p.add_argument(
        "--metrics-listen",
        default=None,
        metavar="HOST:PORT",
        help="serve Prometheus metrics over plain HTTP at /metrics (counts and timings, no "
        "job ids; off by default)",
    )
    p.add_argument(
        "--profile",
        default=None,
        metavar="FILE",
        help="a profile measured on these machines (mlsched profile measure): the runtime "
        "model's prior for the jobs it has cells for, before their first measurement",
    )
    p.add_argument(
        "--checkpoint-root",
        default="checkpoints",
        help="directory for job checkpoints, the same path on every agent (shared storage)",
    )
    p.add_argument(
        "--agent-secret-file",
        default=None,
        help="file holding the secret agents' credentials derive from (mlsched agent-token); "
        "required beside --token to listen beyond loopback",
    )
    p.add_argument(
        "--data-root",
        default="",
        help="directory that jobs' training.data_path is relative to, the same path on every "
        "agent (default: none, so jobs train on synthetic data only)",
    )
    p.add_argument(
        "--users-file",
        default=None,
        metavar="FILE",
        help="users, roles and quotas (mlsched user add): each user's token, jobs owned by "
        "their submitter; read again when it changes (default: one user, the --token's)",
    )
    p.add_argument("--heartbeat", type=float, default=1.0, help="agent heartbeat interval (s)")
    p.add_argument(
        "--agent-timeout", type=float, default=10.0, help="declare an agent lost after (s)"
    )
    p.add_argument("--lease", type=float, default=120.0, help="task lease without renewal (s)")
    p.add_argument("--min-agents", type=int, default=1, help="agents to wait for at start")
    p.add_argument(
        "--task-timeout", type=float, default=60.0, help="trainer communication timeout (s)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--topology",
        default=None,
        metavar="FILE",
        help="YAML/JSON link speeds the runtime model plans with: intra_server_gbps, "
        "rack_core_gbps, rack_uplink_gbps {rack: Gbit/s} (default: 100, 400, none)",
    )
    p.add_argument(
        "--types",
        default=None,
        metavar="FILE",
        help="YAML/JSON catalogue of worker and PS types: workers {name: {gpu_model, "
        "gpu, cpu, ...}}, ps {name: {cpu, ...}} (agents declare their GPU model with "
        "--gpu-type; default: none)",
    )
    auth_args(p, server=True)

    p = sub.add_parser(
        "submit",
        help="submit jobs (YAML/JSON file of job specs) to a controller",
        description="Submit jobs. Under a pricing policy (dps, bfp, top, random-price) each "
        "job is quoted a price when it arrives and runs only if its user accepts: the "
        "job's 'valuation' is its user's private budget (accept iff the price is within "
        "it); a job without one accepts any price.",
    )
    p.add_argument("file", help="job specs: a list, or {jobs: [...]}; '-' reads stdin")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="the controller validates the document (fields, ids, your quotas) and stores nothing",
    )
    p.add_argument(
        "--wait",
        action="store_true",
        help="wait until each job is decided and show its quote and the user's answer",
    )
    p.add_argument(
        "--wait-timeout",
        type=float,
        default=300.0,
        help="with --wait: give up after this many seconds (exit 1; default 300)",
    )
    _client_args(p)

    p = sub.add_parser("status", help="jobs, agents, allocations, progress and model error")
    p.add_argument("job", nargs="?", help="one job's status (default: everything)")
    p.add_argument(
        "-o", "--output", choices=("table", "wide", "json", "yaml"), default="table",
        help="table; wide: also arrival, admission, completion, utility, checkpoint; json, "
        "yaml: every field",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="the same as -o json")
    p.add_argument("--user", default=None, help="only this user's jobs")
    p.add_argument(
        "-w", "--watch", type=positive_float, nargs="?", const=2.0, default=None,
        metavar="SECONDS", help="refresh every SECONDS (2 when not given) until Ctrl-C",
    )  # fmt: skip
    p.add_argument(
        "--count", type=positive_int, default=None, metavar="N",
        help="with --watch: stop after N views",
    )  # fmt: skip
    _client_args(p)

    p = sub.add_parser(
        "describe",
        help="one job in full: spec, owner, decisions per slot, generations, measurements",
        description="Print one job's whole story from the controller's state: what was "
        "submitted and by whom, each slot's decision, allocations, progress and "
        "measurements (the newest --limit of each), its generations and failures, and its "
        "audit rows.",
    )
    p.add_argument("job")
    p.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text")
    p.add_argument(
        "--limit", type=positive_int, default=50, metavar="N",
        help="the newest N rows of each history (at most 1000)",
    )  # fmt: skip
    _client_args(p)

    p = sub.add_parser(
        "cancel", help="cancel a job (its processes stop and checkpoint; yours, or any: admin)"
    )
    p.add_argument("job")
    _client_args(p)

    p = sub.add_parser("whoami", help="the user and role your token is, and your quotas")
    _client_args(p)

    p = sub.add_parser(
        "audit",
        help="the audit record: submits, cancels and refusals (admin: everyone's)",
        description="Print the controller's append-only audit record, oldest first: who "
        "submitted or cancelled what, and every refusal (quota, permission, invalid "
        "document). A user reads their own rows; an admin reads everyone's (--user: one's).",
    )
    p.add_argument("--user", default=None, help="only this user's rows")
    p.add_argument("--job", default=None, help="only this job's rows")
    p.add_argument("--limit", type=int, default=100, help="the newest N rows (default 100)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _client_args(p)

    p = sub.add_parser(
        "logs",
        help="print a task's log, read by the agent that runs it",
        description="Print the log of one of JOB's tasks (default: its latest task that "
        "trains, worker or rank 0), read through the controller by the agent that runs or "
        "ran it, 64 KiB per request.",
    )
    p.add_argument("job")
    p.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="keep printing as the task writes, until it exits (without --task: until the "
        "job is final, moving on to its next generation's task) or Ctrl-C",
    )
    p.add_argument(
        "--task", default=None, help="one of the job's task ids (an unknown one: they are listed)"
    )
    p.add_argument("--tail", type=int, default=None, metavar="N", help="only the last N lines")
    _client_args(p)

    p = sub.add_parser(
        "agent-token",
        help="print the credential of one agent (its --token-file's content)",
        description="Derive agent NAME's credential from the controller's agent secret. "
        "It lets that agent, and only it, register and heartbeat; store it on the agent's "
        "machine in a file only the agent's user can read.",
    )
    p.add_argument("name", help="the agent's --name")
    p.add_argument("--agent-secret-file", required=True, help="the controller's agent secret")
    add_certs_parser(sub)
    add_context_parser(sub)
    add_user_parser(sub)


def client_auth(args: argparse.Namespace) -> ClientAuth:
    """How a client command reaches the controller: its token and TLS flags."""
    from mlsched.net.auth import ClientAuth

    return ClientAuth(
        token_of(args), tls_ca=args.tls_ca, tls_cert=args.tls_cert, tls_key=args.tls_key
    )


def run_cluster_command(args: argparse.Namespace) -> int:
    if args.command == "controller":
        return _controller(args)
    if args.command == "certs":
        from mlsched.net.certs_cli import run_certs

        return run_certs(args)
    if args.command == "context":
        from mlsched.net.context_cli import run_context

        return run_context(args)
    if args.command == "user":
        from mlsched.net.users_cli import run_user

        return run_user(args)
    import grpc

    from mlsched.core.ids import check_id
    from mlsched.net.auth import agent_token, client_channel, read_secret_file
    from mlsched.v1 import jobs_pb2_grpc

    if args.command == "agent-token":
        secret = read_secret_file(args.agent_secret_file, "agent_secret_file")
        print(agent_token(secret, check_id(args.name, "name")))
        return 0
    resolve(args)  # the controller and credentials: flags, else MLSCHED_*, else the context
    stub = jobs_pb2_grpc.JobServiceStub(client_channel(args.controller, client_auth(args)))
    try:
        if args.command == "submit":
            return _submit(stub, args)
        if args.command in ("status", "describe"):
            from mlsched.controller.status_client import run_describe, run_status

            return (run_status if args.command == "status" else run_describe)(stub, args)
        if args.command == "logs":
            from mlsched.controller.log_client import run_logs

            return run_logs(stub, args)
        if args.command in ("whoami", "audit"):
            from mlsched.controller.audit_client import run_audit, run_whoami

            return (run_whoami if args.command == "whoami" else run_audit)(stub, args)
        return _cancel(stub, args)
    except grpc.RpcError as err:
        code = err.code()
        print(f"mlsched {args.command}: {code.name}: {err.details()}", file=sys.stderr)
        return 2 if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND) else 1


def _controller(args: argparse.Namespace) -> int:
    from mlsched.controller.intake import warm_up
    from mlsched.controller.server import Controller, ControllerConfig
    from mlsched.net.auth import read_secret_file

    cfg = ControllerConfig(
        listen=args.listen,
        policy=args.policy,
        policy_options=key_values(args.policy_option, "--policy-option", "g_delta=0.8"),
        slot_seconds=args.slot_seconds,
        db=args.db,
        checkpoint_root=args.checkpoint_root,
        data_root=args.data_root,
        token=token_of(args),
        users_file=args.users_file,
        agent_secret=(
            read_secret_file(args.agent_secret_file, "agent_secret_file")
            if args.agent_secret_file
            else None
        ),
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_ca=args.tls_ca,
        heartbeat_s=args.heartbeat,
        agent_timeout_s=args.agent_timeout,
        lease_s=args.lease,
        min_agents=args.min_agents,
        task_timeout_s=args.task_timeout,
        seed=args.seed,
        metrics_listen=args.metrics_listen,
        topology=_topology(args.topology),
        types=_types(args.types),
        profile=args.profile,
    )
    warm_up()  # the first submission must not stall the heartbeats (intake.py)
    ctl = Controller(cfg).start()
    tune_for_serving()  # short, rare full collections with many agents (core/server_gc.py)
    print(f"mlsched controller listening on {ctl.address}", flush=True)

    def stop(signum: int, frame: FrameType | None) -> None:
        ctl._stop.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    ctl.wait()
    ctl.stop()
    return 0


def _topology(path: str | None) -> Topology | None:
    """The ``--topology`` file as a :class:`Topology` (an error names the file and field)."""
    from mlsched.core.cluster import Topology

    return None if path is None else _read_file(path, "topology", Topology.from_dict)


def _types(path: str | None) -> TypeCatalogue | None:
    """The ``--types`` file as a catalogue (an error names the file and field)."""
    from mlsched.core.device_types import TypeCatalogue

    return None if path is None else _read_file(path, "types", TypeCatalogue.from_dict)


def _read_file(path: str, option: str, parse: Callable[[Any], T]) -> T:
    """A YAML/JSON file given to ``--<option>``, parsed; errors name the file (and field)."""
    import yaml

    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise SpecError(option, path, f"a readable YAML/JSON file ({err})") from None
    try:
        return parse(raw)
    except SpecError as err:
        raise err.at(path) from None


def _submit(stub: jobs_pb2_grpc.JobServiceStub, args: argparse.Namespace) -> int:
    from mlsched.core.documents import decode
    from mlsched.core.limits import MAX_DOCUMENT_BYTES
    from mlsched.v1 import jobs_pb2

    if args.file == "-":
        raw = sys.stdin.buffer.read(MAX_DOCUMENT_BYTES + 1)
    else:
        try:
            with Path(args.file).open("rb") as fh:
                raw = fh.read(MAX_DOCUMENT_BYTES + 1)
        except OSError as err:
            raise SpecError("file", args.file, f"a readable job file ({err.strerror})") from None
    # Checked here as well as by the controller: a clear local error beats a gRPC size refusal.
    document = decode(raw, where=args.file)
    request = jobs_pb2.SubmitJobsRequest(document=document, dry_run=args.dry_run)
    resp = stub.SubmitJobs(request, timeout=args.timeout)
    for job_id in resp.job_ids:
        print(f"{'valid (dry run, not submitted)' if resp.dry_run else 'submitted'} {job_id}")
    if resp.dry_run or not args.wait:
        return 0
    return _wait_decided(stub, list(resp.job_ids), args)


def _wait_decided(
    stub: jobs_pb2_grpc.JobServiceStub, job_ids: list[str], args: argparse.Namespace
) -> int:
    """Poll until every job is admitted or final; print each one's quote and decision.
    (The state alone may show a launch before the admission is published.)"""
    import time

    from mlsched.controller.serde import job_status_from_proto
    from mlsched.controller.tables import decision_line
    from mlsched.v1 import jobs_pb2

    deadline = time.monotonic() + args.wait_timeout
    waiting = list(job_ids)
    while waiting:
        left: list[str] = []
        for job_id in waiting:
            reply = stub.GetJob(jobs_pb2.GetJobRequest(job_id=job_id), timeout=args.timeout)
            job = job_status_from_proto(reply.job)
            if job.admitted or job.state in ("done", "rejected", "failed", "cancelled"):
                print(decision_line(job), flush=True)
            else:
                left.append(job_id)
        waiting = left
        if waiting and time.monotonic() >= deadline:
            print(
                f"mlsched submit: still pending after {args.wait_timeout:g}s: "
                + ", ".join(waiting),
                file=sys.stderr,
            )
            return 1
        if waiting:
            time.sleep(0.5)
    return 0


def _cancel(stub: jobs_pb2_grpc.JobServiceStub, args: argparse.Namespace) -> int:
    from mlsched.v1 import jobs_pb2

    resp = stub.CancelJob(jobs_pb2.CancelJobRequest(job_id=args.job), timeout=args.timeout)
    print(f"{resp.job.job_id}: {resp.job.state} ({resp.job.reason})")
    return 0
