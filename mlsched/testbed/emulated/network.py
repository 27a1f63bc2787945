"""Build and remove the namespaces, bridges and shaped links of a :class:`NetworkPlan`.

Each namespace, root-namespace link and ``/etc/netns/NS`` directory is recorded in the
:class:`ClusterState` before it is created. Everything else (bridges, veth pairs,
addresses, qdiscs) lives inside the cluster's own namespaces and goes with them, so
removing what is recorded removes all of it. ``/etc/netns`` itself is shared: a cluster
that creates it leaves a marker, and whichever cluster leaves it empty removes it.
"""

from __future__ import annotations

import logging
import secrets
import shutil
import socket
from pathlib import Path

from mlsched.testbed.emulated.netns import (
    EmulationError,
    add_netns,
    add_veth,
    delete_link,
    delete_netns,
    ip,
    link_exists,
    netns_names,
    root_networks,
)
from mlsched.testbed.emulated.shaping import LinkShape, netem_available, shape_link
from mlsched.testbed.emulated.state import ClusterState, allocation_lock, lock_dir
from mlsched.testbed.emulated.topology import (
    MGMT_BLOCKS,
    EmulationSpec,
    HostPlan,
    NetworkPlan,
    mgmt_block,
    namespace_prefix,
    plan_network,
)

__all__ = ["build_network", "new_cluster_id", "remove_network"]

log = logging.getLogger(__name__)

MGMT_BRIDGE = "mgmt"
CORE_BRIDGE = "core"
CONTROLLER_PORT = "ctl"  # the root link's peer on the mgmt bridge
NETNS_ETC = Path("/etc/netns")  # `ip netns exec NS` mounts /etc/netns/NS/* over /etc/*


def _etc_marker() -> Path:
    return lock_dir() / "mlsched-emulation-made-etc-netns"


def new_cluster_id() -> str:
    """6 random hex digits no namespace or root link of this machine uses yet."""
    taken = netns_names()
    for _ in range(100):
        cid = secrets.token_hex(3)
        prefix = namespace_prefix(cid)
        if not any(n.startswith(prefix) for n in taken) and not link_exists(f"mls{cid}"):
            return cid
    raise EmulationError("no unused cluster id in 100 draws")


def _free_block() -> int:
    """The first control-plane /27 that no route or address of the root namespace overlaps
    (the default route aside): it must not capture traffic of the machine's own links."""
    used = root_networks()
    for index in range(MGMT_BLOCKS):
        block = mgmt_block(index)
        if not any(block.overlaps(net) for net in used):
            return index
    raise EmulationError(
        f"all {MGMT_BLOCKS} control-plane blocks (203.0.113.0/24, 192.0.2.0/24 in /27s) "
        "overlap a route of this machine or another emulated cluster: remove one first "
        "(mlsched cluster down)"
    )


def _bridge(ns: str, name: str) -> None:
    # No STP (the fabric is a tree) and no forwarding delay: ports forward at once.
    ip("link", "add", name, "type", "bridge", "stp_state", "0", "forward_delay", "0", ns=ns)
    ip("link", "set", name, "up", ns=ns)


def _port(ns: str, dev: str, bridge: str) -> None:
    ip("link", "set", dev, "master", bridge, ns=ns)
    ip("link", "set", dev, "up", ns=ns)


def build_network(spec: EmulationSpec, state: ClusterState) -> NetworkPlan:
    """Create the network of a new cluster whose state (not saved yet) is ``state``: its id
    and control-plane block are chosen here. On failure everything made so far is removed
    before the error propagates."""
    try:
        with allocation_lock():
            # The block is claimed by the root link's address, so choosing it and adding
            # the address happen under one lock.
            state.cluster_id = new_cluster_id()
            state.block = _free_block()
            state.save()
            plan = plan_network(spec, state.cluster_id, state.block)
            _fabric(plan, state)
        _hosts(plan, state)
        _uplinks(plan)
    except BaseException:
        remove_network(state)
        raise
    return plan


def _fabric(plan: NetworkPlan, state: ClusterState) -> None:
    fab = plan.fabric_ns
    state.add_namespace(fab)
    add_netns(fab)
    if plan.spec.rtt_ms > 0:
        netem_available(fab)
    for bridge in (MGMT_BRIDGE, *sorted({h.bridge for h in plan.hosts})):
        _bridge(fab, bridge)
    if not NETNS_ETC.exists():
        # Shared by every cluster (and other users of ip netns): the marker says we made
        # it, so the last cluster removed takes it away once it is empty.
        NETNS_ETC.mkdir(mode=0o755)
        _etc_marker().touch()
    state.add_root_link(plan.root_link)
    add_veth(plan.root_link, None, CONTROLLER_PORT, fab)
    _port(fab, CONTROLLER_PORT, MGMT_BRIDGE)
    ip("addr", "add", f"{plan.controller_addr}/{plan.mgmt_prefix}", "dev", plan.root_link)
    ip("link", "set", plan.root_link, "up")


def _hosts(plan: NetworkPlan, state: ClusterState) -> None:
    fab = plan.fabric_ns
    host_shape = LinkShape(plan.spec.host_gbps)
    for h in plan.hosts:
        state.add_namespace(h.netns)
        add_netns(h.netns)
        state.add_dir(str(NETNS_ETC / h.netns))
        _hosts_file(plan, h)
        add_veth("eth0", h.netns, h.fabric_port, fab)
        add_veth("mgmt0", h.netns, h.mgmt_port, fab)
        _port(fab, h.fabric_port, h.bridge)
        _port(fab, h.mgmt_port, MGMT_BRIDGE)
        for dev, addr, prefix in (
            ("eth0", h.data_addr, plan.data_prefix),
            ("mgmt0", h.mgmt_addr, plan.mgmt_prefix),
        ):
            ip("addr", "add", f"{addr}/{prefix}", "dev", dev, ns=h.netns)
            ip("link", "set", dev, "up", ns=h.netns)
        shape_link(h.netns, "eth0", host_shape)  # host -> rack
        shape_link(fab, h.fabric_port, host_shape)  # rack -> host


def _uplinks(plan: NetworkPlan) -> None:
    if not plan.uplinks:
        return
    fab = plan.fabric_ns
    _bridge(fab, CORE_BRIDGE)
    # A cross-rack path crosses two uplinks each way: a quarter of the RTT on each end.
    shape = LinkShape(plan.spec.rack_gbps, plan.spec.rtt_ms / 4)
    for u in plan.uplinks:
        add_veth(u.rack_end, fab, u.core_end, fab)
        _port(fab, u.rack_end, u.bridge)
        _port(fab, u.core_end, CORE_BRIDGE)
        shape_link(fab, u.rack_end, shape)  # rack -> core
        shape_link(fab, u.core_end, shape)  # core -> rack


def _hosts_file(plan: NetworkPlan, host: HostPlan) -> None:
    """``/etc/netns/NS/hosts``, which ``ip netns exec`` mounts over /etc/hosts for the
    processes of namespace NS: there, as on a real machine, this machine's name resolves to
    the host's own address (libraries that find their address by the host name, such as
    Gloo in Horovod's process sets, would otherwise advertise loopback), and every host's
    name (h0, h1, ...) to its data address."""
    path = NETNS_ETC / host.netns / "hosts"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["127.0.0.1 localhost", f"{host.data_addr} {socket.gethostname()} {host.name}"]
    lines += [f"{h.data_addr} {h.name}" for h in plan.hosts if h is not host]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def remove_network(state: ClusterState) -> list[str]:
    """Remove every namespace and root link ``state`` records (idempotent); what was
    still there. The processes inside must be gone first (cluster.stop_processes)."""
    removed: list[str] = []
    existing = netns_names()
    for ns in reversed(state.namespaces):
        if ns in existing:
            delete_netns(ns)
            removed.append(ns)
    for path in state.dirs:
        if Path(path).parent == NETNS_ETC and Path(path).name in state.namespaces:
            shutil.rmtree(path, ignore_errors=True)  # a namespace's own /etc: the cluster's
    with allocation_lock():
        marker = _etc_marker()
        if marker.exists() and NETNS_ETC.is_dir() and not any(NETNS_ETC.iterdir()):
            NETNS_ETC.rmdir()
            marker.unlink()
    for link in state.root_links:
        # Normally gone with its peer's namespace; a crash between the two steps leaves it.
        if link_exists(link):
            delete_link(link)
            removed.append(link)
    return removed
