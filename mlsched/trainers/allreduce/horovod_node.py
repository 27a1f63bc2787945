"""Start one node's Horovod ranks over Gloo, without horovodrun's ssh launch.

``python -m mlsched.trainers.allreduce.horovod_node --node-rank R --node-sizes 2,1 -- ARGS``
runs ``node_sizes[R]`` processes of ``python -m mlsched.trainers ARGS`` with the environment
horovodrun would give them (``HOROVOD_RANK``, ``HOROVOD_SIZE``, local and cross ranks, the
rendezvous address). Ranks are numbered node by node, the same order as torchrun and the
direct launch. Node 0 also runs the job's Horovod rendezvous server (Horovod's own HTTP
key-value store, initialised with the whole job's slot plan) at the trainer's
``--rendezvous`` host:port, bound to that address only.

Like torchrun, it waits for its ranks: once one fails it stops the others (SIGTERM, then
SIGKILL after the grace period) and exits 1; SIGTERM/SIGINT are passed on to the ranks,
which stop at a common step and checkpoint, and it exits 0 once they have.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from types import FrameType
from typing import Any

from mlsched.core.errors import SpecError
from mlsched.trainers.launch import wait_all

__all__ = ["main", "rank_env", "slot_plan"]

log = logging.getLogger(__name__)


def slot_plan(node_sizes: Sequence[int]) -> list[Any]:
    """Horovod's ``SlotInfo`` of every rank: nodes ``node0``, ``node1``, ... in order."""
    from horovod.runner.common.util.hosts import HostInfo, get_host_assignments

    hosts = [HostInfo(f"node{i}", n) for i, n in enumerate(node_sizes)]
    total = sum(node_sizes)
    return list(get_host_assignments(hosts, total, total))


def rank_env(slot: Any, host: str, port: int, iface: str, timeout_s: float) -> dict[str, str]:
    """What horovodrun's Gloo launch sets for one rank (``gloo_run.create_run_env_vars`` and
    ``create_slot_env_vars``)."""
    env = {
        "HOROVOD_HOSTNAME": slot.hostname,
        "HOROVOD_RANK": str(slot.rank),
        "HOROVOD_SIZE": str(slot.size),
        "HOROVOD_LOCAL_RANK": str(slot.local_rank),
        "HOROVOD_LOCAL_SIZE": str(slot.local_size),
        "HOROVOD_CROSS_RANK": str(slot.cross_rank),
        "HOROVOD_CROSS_SIZE": str(slot.cross_size),
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": host,
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port),
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_GLOO_TIMEOUT_SECONDS": str(max(1, int(timeout_s))),
        "PYTHONUNBUFFERED": "1",
    }
    if iface:
        env["HOROVOD_GLOO_IFACE"] = iface
    return env


def _start_server(host: str, port: int, plan: list[Any]) -> Any:
    from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer
    from horovod.runner.util.threads import in_thread

    server = RendezvousHTTPServer((host, port), RendezvousHandler, 0)
    server.init(plan)
    in_thread(target=server.serve_forever)
    return server


def _parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="python -m mlsched.trainers.allreduce.horovod_node")
    parser.add_argument("--node-rank", type=int, required=True)
    parser.add_argument("--node-sizes", required=True, help="ranks per node, e.g. 2,1")
    parser.add_argument("--grace", type=float, default=30.0, help="SIGKILL after (s)")
    argv = list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    return args, argv[split + 1 :]


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    args, trainer_args = _parse(sys.argv[1:] if argv is None else argv)
    from mlsched.trainers.__main__ import build_parser, config_from_args

    try:
        sizes = [int(n) for n in args.node_sizes.split(",")]
        if not sizes or min(sizes) < 1 or not 0 <= args.node_rank < len(sizes):
            raise SpecError("node_sizes", args.node_sizes, "counts >= 1 covering --node-rank")
        cfg = config_from_args(build_parser().parse_args(trainer_args))
        if sum(sizes) != cfg.num_workers:
            raise SpecError("node_sizes", args.node_sizes, f"counts summing to {cfg.num_workers}")
    except (SpecError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    host, port = cfg.master
    plan = slot_plan(sizes)
    server = _start_server(host, port, plan) if args.node_rank == 0 else None
    iface = os.environ.get("GLOO_SOCKET_IFNAME", "")
    mine = [s for s in plan if s.hostname == f"node{args.node_rank}"]
    cmd = [sys.executable, "-m", "mlsched.trainers", *trainer_args]
    procs = [
        subprocess.Popen(cmd, env={**os.environ, **rank_env(s, host, port, iface, cfg.timeout_s)})
        for s in mine
    ]

    def forward(signum: int, frame: FrameType | None) -> None:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    try:
        codes = wait_all(procs, args.grace)
    finally:
        if server is not None:
            server.shutdown()
    failed = [c for c in codes if c != 0]
    if failed:
        log.error("node %d: ranks exited %s", args.node_rank, codes)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
