"""The testbed's commands: ``mlsched cluster up | down | show | probe`` (an emulated
cluster on this machine), ``demo --emulate``, and ``experiment testbed`` and ``experiment
fidelity`` (run on an emulated cluster for real).

``up`` builds the namespaces and shaped links, starts a controller in the root namespace and
an agent in each host namespace, waits until every agent has registered and returns,
leaving them running; ``down`` removes everything the state file lists (after a crash
too, and harmlessly twice). Exit status: 0, 1 when a step fails, 2 on bad flags or when
this machine cannot emulate (the message says what is missing).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlsched.cli.parser import nonneg_float, positive_float, positive_int

if TYPE_CHECKING:
    from mlsched.testbed.emulated.cluster import EmulatedCluster

__all__ = [
    "add_emulation_parser",
    "run_emulated_demo",
    "run_emulated_experiment",
    "run_emulation",
]

_REGISTER_TIMEOUT_S = 90.0


def _state_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--state",
        type=Path,
        default=None,
        help="the cluster's state file; its directory holds the credentials and, in a "
        "folder per cluster id, logs, the controller's database and checkpoints (env "
        "MLSCHED_CLUSTER_STATE; default ~/.cache/mlsched/cluster/state.json)",
    )


def add_emulation_parser(sub: Any) -> None:
    p = sub.add_parser(
        "cluster",
        help="an emulated multi-host cluster on this machine (namespaces, shaped links)",
        description="Agents in network namespaces joined by links shaped with tc, a "
        "controller in the root namespace (docs/emulation.md). Needs root or "
        "CAP_NET_ADMIN and CAP_SYS_ADMIN, and iproute2's ip and tc.",
    )
    csub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = csub.add_parser("up", help="build the cluster, start its controller and agents")
    up.add_argument("--hosts", type=positive_int, default=4, help="hosts (one agent each)")
    up.add_argument("--racks", type=positive_int, default=2, help="racks (hosts fill in order)")
    up.add_argument("--host-gbps", type=positive_float, default=1.0, help="host link Gbit/s")
    up.add_argument("--rack-gbps", type=positive_float, default=0.2, help="rack uplink Gbit/s")
    up.add_argument(
        "--rtt-ms", type=nonneg_float, default=0.0, help="round trip added between racks (netem)"
    )
    up.add_argument("--gpus", type=int, default=1, help="stand-in GPUs each agent declares")
    up.add_argument("--cpus", type=positive_float, default=2.0, help="cores each agent declares")
    up.add_argument("--mem-gb", type=positive_float, default=4.0, help="memory each declares")
    up.add_argument(
        "--host-cpus",
        type=positive_float,
        default=None,
        help="real cores each host may use (cgroup cpu quota; default: 90%% of the "
        "machine's cores divided among the hosts)",
    )
    up.add_argument(
        "--device-cores",
        type=positive_float,
        default=None,
        help="each stand-in GPU a CPU slice: every task in a share of its own inside its "
        "host's, this many cores per training rank",
    )
    up.add_argument(
        "--ps-cores",
        type=positive_float,
        default=None,
        help="with --device-cores: a parameter server's share (default: --device-cores)",
    )
    up.add_argument(
        "--no-isolate-cpu",
        dest="isolate_cpu",
        action="store_false",
        help="let the hosts share the machine's cores (a job's speed then depends on the others)",
    )
    up.add_argument("--policy", default="fifo", help="the controller's policy")
    up.add_argument("--slot-seconds", type=positive_float, default=10.0, help="slot length")
    up.add_argument("--json", action="store_true", help="print the cluster as JSON")
    _state_arg(up)
    down = csub.add_parser("down", help="stop its processes, remove its namespaces and links")
    _state_arg(down)
    show = csub.add_parser("show", help="hosts, addresses, racks, links and processes")
    show.add_argument("--json", action="store_true", help="the state file's content")
    _state_arg(show)
    probe = csub.add_parser("probe", help="measure each kind of link (TCP) against its rate")
    probe.add_argument("--seconds", type=positive_float, default=1.0, help="per measurement")
    _state_arg(probe)


def run_emulation(args: argparse.Namespace) -> int:
    from mlsched.core.errors import SpecError
    from mlsched.testbed.emulated.netns import EmulationError, EmulationUnavailable
    from mlsched.testbed.emulated.state import default_state_path

    path: Path = (args.state or default_state_path()).absolute()
    try:
        if args.action == "up":
            return _up(args, path)
        if not path.exists():
            if args.action == "down":
                print(f"mlsched cluster down: nothing to remove (no {path})")
                return 0
            raise SpecError("state", str(path), "the state file of a cluster that is up")
        if args.action == "down":
            return _down(path)
        if args.action == "show":
            return _show(path, as_json=args.json)
        return _probe(path, args.seconds)
    except EmulationUnavailable as err:
        print(f"mlsched cluster {args.action}: error: {err}", file=sys.stderr)
        return 2
    except EmulationError as err:
        print(f"mlsched cluster {args.action}: error: {err}", file=sys.stderr)
        return 1
    except SpecError as err:
        print(f"mlsched cluster {args.action}: error: {err}", file=sys.stderr)
        return 2


def _up(args: argparse.Namespace, path: Path) -> int:
    from mlsched.engine.builder import check_policies
    from mlsched.testbed.emulated.cluster import EmulatedCluster
    from mlsched.testbed.emulated.topology import EmulationSpec

    check_policies([args.policy])
    spec = EmulationSpec(
        hosts=args.hosts,
        racks=args.racks,
        host_gbps=args.host_gbps,
        rack_gbps=args.rack_gbps,
        rtt_ms=args.rtt_ms,
        gpus=args.gpus,
        cpus=args.cpus,
        mem_gb=args.mem_gb,
        isolate_cpu=args.isolate_cpu,
        host_cpus=args.host_cpus,
        device_cores=args.device_cores,
        ps_cores=args.ps_cores,
    )
    cluster = EmulatedCluster.create(spec, path)
    try:
        address = cluster.start_controller(
            ["--policy", args.policy, "--slot-seconds", f"{args.slot_seconds:g}"]
        )
        cluster.start_agents(address)
        _wait_registered(cluster, address)
        cluster.state.phase = "up"
        cluster.state.save()
    except BaseException:
        cluster.close(grace_s=5.0)
        raise
    if args.json:
        print(json.dumps(_description(cluster), indent=2))
    else:
        print(_summary(cluster))
    return 0


def _wait_registered(cluster: EmulatedCluster, address: str) -> None:
    """Until the controller lists every agent alive (or a process died, or the timeout)."""
    import grpc

    from mlsched.net.auth import ClientAuth, client_channel
    from mlsched.testbed.emulated.netns import EmulationError
    from mlsched.v1 import jobs_pb2, jobs_pb2_grpc

    token, _ = cluster.credentials()
    channel = client_channel(address, ClientAuth(token))
    stub = jobs_pb2_grpc.JobServiceStub(channel)
    deadline = time.monotonic() + _REGISTER_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            dead = [p for p in cluster.state.processes if not p.alive()]
            if dead:
                raise EmulationError(
                    f"{dead[0].role} {dead[0].name} exited at start (log: {dead[0].log})"
                )
            try:
                status = stub.GetClusterStatus(jobs_pb2.GetClusterStatusRequest(), timeout=2.0)
                if sum(1 for a in status.agents if a.alive) >= cluster.spec.hosts:
                    return
            except grpc.RpcError:
                pass  # not listening yet
            time.sleep(0.3)
    finally:
        channel.close()
    raise EmulationError(
        f"the agents did not all register within {_REGISTER_TIMEOUT_S:.0f} s "
        f"(logs in {cluster.files / 'logs'})"
    )


def _description(cluster: EmulatedCluster) -> dict[str, Any]:
    plan, state = cluster.plan, cluster.state
    return {
        "cluster_id": plan.cluster_id,
        "state": str(state.path),
        "spec": plan.spec.to_dict(),
        "controller": state.controller,
        "token_file": str(cluster.run_dir / "token"),
        "files": str(cluster.files),
        "namespaces": list(state.namespaces),
        "root_links": list(state.root_links),
        "cpu_isolation": state.cpu_isolation,
        "cpu_groups": dict(state.cpu_groups),
        "hosts": [
            {k: getattr(h, k) for k in ("name", "rack", "pool", "netns", "data_addr", "mgmt_addr")}
            for h in plan.hosts
        ],
        "processes": [
            {"role": p.role, "name": p.name, "pid": p.pid, "alive": p.alive(), "log": p.log}
            for p in state.processes
        ],
    }


def _summary(cluster: EmulatedCluster) -> str:
    plan, spec, state = cluster.plan, cluster.spec, cluster.state
    token = cluster.run_dir / "token"
    client = f"--controller {state.controller} --token-file {token}"
    lines = [
        f"cluster {plan.cluster_id}: {spec.hosts} hosts in {spec.racks} racks, "
        f"{spec.host_gbps:g} Gbit/s host links, {spec.rack_gbps:g} Gbit/s rack uplinks"
        + (f", {spec.rtt_ms:g} ms added round trip between racks" if spec.rtt_ms else ""),
        f"CPUs: {state.cpu_isolation or 'not isolated'}",
    ]
    for h in plan.hosts:
        alive = any(p.name == h.name and p.alive() for p in state.processes)
        lines.append(
            f"  {h.name:<4} {h.rack:<6} {h.data_addr:<15} netns {h.netns}"
            f"{'' if alive else '  (agent not running)'}"
        )
    lines += [
        f"controller {state.controller or '(none)'}",
        f"  mlsched submit JOBS.yaml {client}",
        f"  mlsched status {client}",
        f"logs, database, checkpoints: {cluster.files}",
        f"state {state.path}; mlsched cluster down --state {state.path} removes it all",
    ]
    return "\n".join(lines)


def _down(path: Path) -> int:
    from mlsched.testbed.emulated.cluster import teardown
    from mlsched.testbed.emulated.netns import require_emulation
    from mlsched.testbed.emulated.state import ClusterState

    require_emulation()
    state = ClusterState.load(path)
    removed = teardown(state)
    print(
        f"cluster {state.cluster_id} removed: {', '.join(removed) if removed else 'nothing left'}"
    )
    return 0


def _show(path: Path, *, as_json: bool) -> int:
    from mlsched.testbed.emulated.cluster import EmulatedCluster

    cluster = EmulatedCluster.attach(path)
    print(json.dumps(_description(cluster), indent=2) if as_json else _summary(cluster))
    return 0


def _probe(path: Path, seconds: float) -> int:
    from mlsched.testbed.emulated.cluster import EmulatedCluster
    from mlsched.testbed.emulated.netns import require_emulation

    require_emulation()
    cluster = EmulatedCluster.attach(path)
    hosts, spec = cluster.plan.hosts, cluster.spec
    first = hosts[0]
    for kind, rate in (("in-rack", spec.host_gbps), ("cross-rack", spec.rack_gbps)):
        peer = next((h for h in hosts[1:] if (h.rack == first.rack) == (kind == "in-rack")), None)
        if peer is None:
            print(f"{kind}: no such pair of hosts")
            continue
        gbps = cluster.measure_gbps(first.name, peer.name, seconds)
        print(
            f"{kind} {first.name}->{peer.name}: {gbps:.3f} Gbit/s measured, {rate:g} shaped "
            f"({100 * (gbps - rate) / rate:+.1f}%)"
        )
        if kind == "cross-rack" and spec.rtt_ms:
            rtt = cluster.measure_rtt_ms(first.name, peer.name)
            print(f"cross-rack round trip: {rtt:.2f} ms (added {spec.rtt_ms:g})")
    return 0


def run_emulated_demo(args: argparse.Namespace) -> int:
    """``mlsched demo --emulate``: the demo's mix on an emulated cluster
    (testbed/emulated/demo.py)."""
    from mlsched.core.errors import SpecError
    from mlsched.engine.builder import check_policies
    from mlsched.testbed.emulated.netns import (
        EmulationError,
        EmulationUnavailable,
        require_emulation,
    )

    if args.simulated:
        raise SpecError("--emulate", "with --simulated", "one of --emulate and --simulated")
    if len(args.policy) > 1:
        raise SpecError("--policy", ",".join(args.policy), "one policy (several: --simulated)")
    policy = args.policy[0] if args.policy else "fifo"
    check_policies([policy])
    try:
        require_emulation()
    except EmulationUnavailable as err:
        print(f"mlsched demo --emulate: error: {err}", file=sys.stderr)
        return 2
    from mlsched.testbed.emulated.demo import demo_summary
    from mlsched.testbed.emulated.demo import run_emulated_demo as run_demo
    from mlsched.testbed.local import demo_report

    try:
        result = run_demo(
            policy=policy, slots=args.slots, slot_seconds=args.slot_seconds, workdir=args.workdir
        )
    except EmulationError as err:
        print(f"mlsched demo --emulate: error: {err}", file=sys.stderr)
        return 1
    print()
    print(demo_report(result.statuses))
    print()
    print(demo_summary(result))
    done = sum(1 for s in result.statuses.values() if s.state == "done")
    print(f"\n{done} of {len(result.statuses)} jobs done with policy {policy}.")
    return 0


def run_emulated_experiment(args: argparse.Namespace, policies: tuple[str, ...]) -> int:
    """``mlsched experiment testbed --emulate --policy a,b``: testbed/experiment.py."""
    from mlsched.core.errors import SpecError
    from mlsched.engine.builder import check_policies
    from mlsched.testbed.emulated.netns import (
        EmulationError,
        EmulationUnavailable,
        require_emulation,
    )

    if args.name != "testbed":
        raise SpecError("--emulate", args.name, "experiment testbed (the others are simulated)")
    if not args.emulate:
        raise SpecError("experiment", "testbed", "--emulate (it runs on an emulated cluster)")
    check_policies(policies)
    try:
        require_emulation()
    except EmulationUnavailable as err:
        print(f"mlsched experiment testbed: error: {err}", file=sys.stderr)
        return 2
    from mlsched.engine.simulator import TruthConfig
    from mlsched.perfmodel.profile import load_profile
    from mlsched.testbed.experiment import fidelity_table, run_testbed_experiment

    out = args.out or Path("results") / "testbed"
    profile = load_profile(args.profile) if args.profile else None
    try:
        results = run_testbed_experiment(policies, out=out, truth=TruthConfig(profile=profile))
    except EmulationError as err:
        print(f"mlsched experiment testbed: error: {err}", file=sys.stderr)
        return 1
    for policy, summary in results["summaries"].items():
        jct = summary.get("avg_jct_s")
        print(
            f"{policy}: {summary.get('completed')} of {summary.get('jobs')} jobs done, mean JCT "
            + ("-" if jct is None else f"{jct:.1f} s")
        )
    print(fidelity_table(results))
    print(f"wrote {out / 'results.json'} and {len(results['plots'])} plots")
    return 0


#: The experiments that run for real on an emulated cluster (root), beside the registered
#: simulated ones: ``mlsched experiments`` lists them too.
EMULATED_EXPERIMENTS = {
    "fidelity": "the simulator against the testbed: 8 jobs of 3 kinds under fifo/drf/las2d "
    "for real on an emulated cluster with device slices vs simulated with its measured "
    "profile; per-job and per-policy errors, ranking, ablation (root, ~40 min on 2 cores)",
    "testbed": "policies for real on an emulated cluster (--emulate, root): 4 small jobs, "
    "JCT measured beside simulated",
}


def run_fidelity_experiment(args: argparse.Namespace, policies: tuple[str, ...]) -> int:
    """``mlsched experiment fidelity``: testbed/fidelity/experiment.py."""
    from mlsched.core.errors import SpecError
    from mlsched.engine.builder import check_policies
    from mlsched.testbed.emulated.netns import (
        EmulationError,
        EmulationUnavailable,
        require_emulation,
    )

    if args.scale not in ("smoke", "default"):
        raise SpecError("--scale", args.scale, "smoke or default (fidelity has no paper scale)")
    if policies:
        check_policies(policies)
        if len(policies) < 2:
            raise SpecError("--policy", ",".join(policies), "two or more (the ranking compares)")
    try:
        require_emulation()
    except EmulationUnavailable as err:
        print(f"mlsched experiment fidelity: error: {err}", file=sys.stderr)
        return 2
    from mlsched.testbed.fidelity.experiment import run_fidelity
    from mlsched.testbed.fidelity.report import fidelity_report

    out = args.out or Path("results") / "fidelity"
    try:
        results = run_fidelity(
            out=out, scale=args.scale, policies=policies or None, profile_path=args.profile,
            ablate_isolation=args.ablate_isolation, profile_via=args.profile_via,
            say=lambda s: print(s, flush=True),
        )  # fmt: skip
    except (EmulationError, RuntimeError) as err:
        print(f"mlsched experiment fidelity: error: {err}", file=sys.stderr)
        return 1
    print(fidelity_report(results))
    prof = results["profile"]
    print(
        f"profile: {prof['cells']} cells, measured in {prof['measured_s']:.0f} s "
        f"({prof['path']}); experiment {results['wall_s']:.0f} s in all"
    )
    print(f"wrote {out / 'results.json'} and {len(results['plots'])} plots")
    failed = [c for c in results["checks"] if not c["passed"]]
    return 1 if failed and args.strict else 0
