"""``mlsched agent``: run the node agent of this machine until SIGTERM or Ctrl-C.

Exit status: 0 after a shutdown, 1 when the controller refuses the agent (a wrong token),
2 on bad flags (the message names the flag).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from mlsched.core.errors import SpecError
from mlsched.net.env import add_connection_args, resolve, token_of
from mlsched.net.ports import DEFAULT_PORTS

if TYPE_CHECKING:
    from mlsched.agent.daemon import Agent

__all__ = ["add_agent_args", "agent_from_args", "parse_ports", "run_agent"]

log = logging.getLogger(__name__)


def add_agent_args(parser: argparse.ArgumentParser) -> None:
    add_connection_args(parser, default_controller=None, ca_help="CA certificate (PEM): use TLS")
    parser.add_argument("--name", default=None, help="agent name (default: host name)")
    parser.add_argument("--host", default=None, help="address peers reach this machine at")
    parser.add_argument(
        "--gpus",
        default=None,
        help="the GPUs to use: a count N (the first N; more than there are: stand-ins on a "
        "CPU machine) or NVML indices, e.g. 0,2 (default: all, within an inherited "
        "CUDA_VISIBLE_DEVICES)",
    )
    parser.add_argument(
        "--gpu-uuids",
        default=None,
        metavar="UUID,...",
        help="the GPUs to use by UUID: GPU-... for a whole GPU, MIG-... for a MIG instance "
        "(nvidia-smi -L lists them)",
    )
    parser.add_argument(
        "--gpu-type",
        default=None,
        help="the GPU type to declare, e.g. V100 (default: the GPUs' model from NVML)",
    )
    parser.add_argument("--cpus", type=float, default=None, help="declared CPU cores")
    parser.add_argument("--mem-gb", type=float, default=None, help="declared memory (GB)")
    parser.add_argument("--nic-gbps", type=float, default=None, help="declared NIC speed")
    parser.add_argument("--pool", default="both", choices=["worker", "ps", "both"])
    parser.add_argument("--rack", default="", help="rack name (placement locality)")
    parser.add_argument(
        "--checkpoint-root", default="", help="where this machine sees shared checkpoints"
    )
    parser.add_argument(
        "--workdir", default=None, help="task logs and metrics (default: TMPDIR/mlsched-agent-NAME)"
    )
    parser.add_argument(
        "--ports",
        default=f"{DEFAULT_PORTS[0]}-{DEFAULT_PORTS[1]}",
        help="ports LO-HI this machine's tasks may listen on (rendezvous stores)",
    )
    parser.add_argument(
        "--grace", type=float, default=30.0, help="seconds between SIGTERM and SIGKILL"
    )
    parser.add_argument(
        "--warmup", type=int, default=2, help="iterations per task left out of timing sums"
    )
    parser.add_argument(
        "--device-cores",
        type=float,
        default=None,
        help="stand-in devices on a CPU machine: each task in a CPU share of its own, this "
        "many cores per training rank (the cgroup cpu controller; root)",
    )
    parser.add_argument(
        "--ps-cores",
        type=float,
        default=None,
        help="with --device-cores: a parameter server's share (default: --device-cores)",
    )


def parse_ports(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition("-")
    expected = "LO-HI with 1 <= LO <= HI <= 65535, e.g. 29500-29999"
    if not sep or not lo.strip().isdigit() or not hi.strip().isdigit():
        raise SpecError("--ports", text, expected)
    ports = int(lo), int(hi)
    if not 1 <= ports[0] <= ports[1] <= 65535:
        raise SpecError("--ports", text, expected)
    return ports


def _check(ok: bool, flag: str, value: object, expected: str) -> None:
    if not ok:
        raise SpecError(flag, value, expected)


def agent_from_args(args: argparse.Namespace) -> Agent:
    """The agent the flags describe; raises :class:`SpecError` naming a bad flag."""
    # Imported here, not at the top: building the parser (mlsched --help) needs none of it.
    from mlsched.agent.daemon import Agent
    from mlsched.agent.discovery import discover
    from mlsched.agent.gpus import parse_gpus
    from mlsched.net.auth import ClientAuth, client_channel
    from mlsched.trainers.cpu_share import DeviceSlices, cpu_control

    resolve(args)  # the controller and credentials: flags, else MLSCHED_*, else the context
    host, sep, port = args.controller.rpartition(":")
    _check(bool(sep and host and port.isdigit()), "--controller", args.controller, "HOST:PORT")
    ports = parse_ports(args.ports)
    gpus = parse_gpus(args.gpus)
    uuids = [u.strip() for u in args.gpu_uuids.split(",")] if args.gpu_uuids else []
    _check(all(uuids), "--gpu-uuids", args.gpu_uuids, "UUIDs separated by commas")
    _check(args.cpus is None or args.cpus > 0, "--cpus", args.cpus, "a number > 0")
    _check(args.mem_gb is None or args.mem_gb > 0, "--mem-gb", args.mem_gb, "a number > 0")
    _check(
        args.nic_gbps is None or args.nic_gbps >= 0, "--nic-gbps", args.nic_gbps, "a number >= 0"
    )
    _check(args.grace >= 0, "--grace", args.grace, "seconds >= 0")
    _check(args.warmup >= 0, "--warmup", args.warmup, "an integer >= 0")
    _check(
        (args.tls_cert is None) == (args.tls_key is None),
        "--tls-cert" if args.tls_cert is None else "--tls-key",
        None,
        "both --tls-cert and --tls-key (mutual TLS)",
    )
    _check(
        args.tls_cert is None or args.tls_ca is not None,
        "--tls-ca",
        None,
        "a CA certificate when --tls-cert is given",
    )
    try:
        slices = DeviceSlices.of(args.device_cores, args.ps_cores)
    except SpecError as err:  # named by its flag
        raise SpecError("--" + err.field.replace("_", "-"), err.value, err.expected) from None
    if slices is not None:
        control, why = cpu_control()
        _check(control is not None, "--device-cores", args.device_cores, f"a machine whose "
               f"cgroup cpu controller is writable ({why})")  # fmt: skip
    token = token_of(args)
    node = discover(
        controller=args.controller,
        name=args.name,
        host=args.host,
        gpus=gpus,
        gpu_uuids=uuids,
        inherited=os.environ.get("CUDA_VISIBLE_DEVICES"),  # a launcher's choice for us
        gpu_type=args.gpu_type,
        cpus=args.cpus,
        mem_gb=args.mem_gb,
        nic_gbps=args.nic_gbps,
        pool=args.pool,
        rack=args.rack,
        ports=ports,
        checkpoint_root=args.checkpoint_root,
    )
    if token is not None and token.startswith("agent:"):
        bound = token.removeprefix("agent:").rpartition(":")[0]
        _check(
            bound == node.name,
            "--name",
            node.name,
            f"{bound!r}, the agent its credential belongs to (or another mlsched agent-token)",
        )
    import tempfile  # only the agent needs it: every other command starts without it

    workdir = Path(args.workdir or Path(tempfile.gettempdir()) / f"mlsched-agent-{node.name}")
    auth = ClientAuth(token, tls_ca=args.tls_ca, tls_cert=args.tls_cert, tls_key=args.tls_key)
    client_channel(args.controller, auth).close()  # unreadable TLS files fail here, by flag
    return Agent(
        args.controller,
        node,
        workdir=workdir,
        auth=auth,
        grace_s=args.grace,
        warmup=args.warmup,
        slices=slices,
    )


def run_agent(args: argparse.Namespace) -> int:
    """Run the agent until SIGTERM/SIGINT; returns the exit status."""
    from mlsched.agent.daemon import AgentError

    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s"
    )
    try:
        agent = agent_from_args(args)
    except SpecError as err:
        print(f"mlsched agent: error: {err}", file=sys.stderr)
        return 2
    previous: dict[int, object] = {}
    if threading.current_thread() is threading.main_thread():

        def stop(signum: int, frame: FrameType | None) -> None:
            # A second signal while the tasks checkpoint: kill them instead of waiting.
            agent.shutdown(force=agent.stopping)

        previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        agent.run()
    except AgentError as err:
        print(f"mlsched agent: error: {err}", file=sys.stderr)
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
    return 0
