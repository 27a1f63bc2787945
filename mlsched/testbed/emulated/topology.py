"""What an emulated cluster is made of: hosts, racks, link rates, and every name and address.

Pure data, no system calls: :func:`plan_network` turns an :class:`EmulationSpec` and a
cluster id into a :class:`NetworkPlan` naming each namespace, interface and address, so the
builder, the state file and the tests agree on one plan.

The layout (docs/emulation.md draws it):

* one **fabric** namespace holds a bridge per rack, a ``core`` bridge joining the racks and a
  ``mgmt`` bridge for control traffic;
* each **host** namespace has ``eth0`` (data plane, on its rack's bridge, shaped at
  ``host_gbps`` both ways) and ``mgmt0`` (control plane, unshaped);
* each rack bridge reaches ``core`` over a veth pair shaped at ``rack_gbps`` both ways (and
  delayed by a quarter of ``rtt_ms`` each way, so a cross-rack round trip adds ``rtt_ms``);
* the root namespace gets one veth end on ``mgmt``: the controller's address.

Addresses come from the documentation ranges only (RFC 5737): the data plane uses
198.51.100.0/24 inside the cluster's own namespaces (never in the root namespace, so
concurrent clusters may reuse it); the control plane uses one /27 block of 203.0.113.0/24
or 192.0.2.0/24 per cluster, the block's first address in the root namespace. A block is
taken only where no route or address of the root namespace overlaps it (some machines use
a documentation range for their real network), so concurrent clusters, and the machine's
own links, never collide.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from mlsched.core.cluster import Topology
from mlsched.core.errors import SpecError

__all__ = [
    "DATA_NET",
    "MAX_HOSTS",
    "MGMT_BLOCKS",
    "EmulationSpec",
    "HostPlan",
    "NetworkPlan",
    "UplinkPlan",
    "mgmt_block",
    "plan_network",
]

DATA_NET = ipaddress.IPv4Network("198.51.100.0/24")  # TEST-NET-2
MGMT_NETS = (
    ipaddress.IPv4Network("203.0.113.0/24"),  # TEST-NET-3
    ipaddress.IPv4Network("192.0.2.0/24"),  # TEST-NET-1
)
MGMT_PREFIX = 27
_BLOCKS = tuple(b for net in MGMT_NETS for b in net.subnets(new_prefix=MGMT_PREFIX))
#: Control-plane blocks: at most as many emulated clusters may be up at once.
MGMT_BLOCKS = len(_BLOCKS)
#: A /27 holds 30 addresses: the controller and up to 29 hosts; 24 leaves headroom.
MAX_HOSTS = 24
_POOLS = ("worker", "ps", "both")


@dataclass(frozen=True)
class EmulationSpec:
    """The cluster to emulate. Hosts fill racks in order (4 hosts in 2 racks: h0, h1 in
    rack0 and h2, h3 in rack1). Each agent declares ``gpus`` stand-in GPUs of ``gpu_type``,
    ``cpus`` cores and ``mem_gb``; ``pools`` (one per host, optional) sets each agent's pool.
    ``isolate_cpu`` gives each host its own share of the machine's CPUs, ``host_cpus`` cores
    (default: 90 % of the machine's cores divided among the hosts, at least 0.1); see
    :mod:`mlsched.trainers.cpu_share`. ``device_cores`` makes each stand-in GPU a CPU slice:
    every task in a share of its own inside its host's, ``device_cores`` per training rank
    and ``ps_cores`` (default the same) per parameter server (``mlsched agent
    --device-cores``).
    """

    hosts: int = 4
    racks: int = 2
    host_gbps: float = 1.0
    rack_gbps: float = 0.2
    rtt_ms: float = 0.0
    gpus: int = 1
    gpu_type: str = "cpu"
    cpus: float = 2.0
    mem_gb: float = 4.0
    pools: tuple[str, ...] = field(default=())
    isolate_cpu: bool = True
    host_cpus: float | None = None
    device_cores: float | None = None
    ps_cores: float | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.hosts <= MAX_HOSTS:
            raise SpecError("hosts", self.hosts, f"an integer in 1..{MAX_HOSTS}")
        if not 1 <= self.racks <= self.hosts:
            raise SpecError("racks", self.racks, f"an integer in 1..hosts ({self.hosts})")
        # Rates below 1 Mbit/s make tbf's buffers meaningless; above 40 Gbit/s veth on one
        # machine cannot carry them anyway, so the shaping would be a fiction.
        for name, gbps in (("host_gbps", self.host_gbps), ("rack_gbps", self.rack_gbps)):
            if not 0.001 <= gbps <= 40.0:
                raise SpecError(name, gbps, "a rate in Gbit/s between 0.001 and 40")
        if not 0.0 <= self.rtt_ms <= 10_000.0:
            raise SpecError("rtt_ms", self.rtt_ms, "milliseconds between 0 and 10000")
        if self.gpus < 0:
            raise SpecError("gpus", self.gpus, "an integer >= 0")
        if not self.cpus > 0 or not self.mem_gb > 0:
            bad = "cpus" if not self.cpus > 0 else "mem_gb"
            raise SpecError(bad, getattr(self, bad), "a number > 0")
        if self.pools and len(self.pools) != self.hosts:
            raise SpecError("pools", list(self.pools), f"one pool per host ({self.hosts})")
        for i, pool in enumerate(self.pools):
            if pool not in _POOLS:
                raise SpecError(f"pools[{i}]", pool, f"one of {', '.join(_POOLS)}")
        if not isinstance(self.isolate_cpu, bool):
            raise SpecError("isolate_cpu", self.isolate_cpu, "true or false")
        if self.host_cpus is not None and not 0.1 <= self.host_cpus <= 1024:
            raise SpecError("host_cpus", self.host_cpus, "cores between 0.1 and 1024")
        for name in ("device_cores", "ps_cores"):
            value = getattr(self, name)
            if value is not None and not 0.1 <= value <= 1024:
                raise SpecError(name, value, "cores between 0.1 and 1024 (the kernel's floor)")
        if self.ps_cores is not None and self.device_cores is None:
            raise SpecError("ps_cores", self.ps_cores, "set only with device_cores")
        if self.device_cores is not None and self.gpus < 1:
            raise SpecError("device_cores", self.device_cores, "unset when hosts have no gpus")

    def cpu_share(self, cores: int) -> float:
        """Each host's CPU share on a machine of ``cores`` cores: ``host_cpus``, or 90 % of
        the cores divided among the hosts (the rest for the controller and the machine).
        SpecError when the shares would not fit: the hosts would no longer be isolated."""
        share = self.host_cpus if self.host_cpus is not None else 0.9 * cores / self.hosts
        if share < 0.1:  # the kernel's smallest quota per period
            raise SpecError(
                "host_cpus", share, "at least 0.1 core per host: fewer hosts, or isolate_cpu false"
            )
        if share * self.hosts > cores + 1e-9:
            raise SpecError(
                "host_cpus",
                share,
                f"at most {cores / self.hosts:.3g} cores per host ({cores} cores, "
                f"{self.hosts} hosts), or isolate_cpu false",
            )
        return share

    def rack_of(self, host: int) -> int:
        """Racks take contiguous runs of hosts, the first racks one more when uneven."""
        base, extra = divmod(self.hosts, self.racks)
        bound = 0
        for rack in range(self.racks):
            bound += base + (1 if rack < extra else 0)
            if host < bound:
                return rack
        raise SpecError("host", host, f"an index in 0..{self.hosts - 1}")

    def pool_of(self, host: int) -> str:
        return self.pools[host] if self.pools else "both"

    def link_topology(self) -> Topology:
        """The link speeds a controller should plan with: every rack's uplink at
        ``rack_gbps`` (hosts declare ``host_gbps`` as their NIC speed themselves)."""
        racks = sorted({f"rack{self.rack_of(h)}" for h in range(self.hosts)})
        return Topology(
            rack_core_gbps=self.rack_gbps, rack_uplink_gbps={r: self.rack_gbps for r in racks}
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "hosts": self.hosts,
            "racks": self.racks,
            "host_gbps": self.host_gbps,
            "rack_gbps": self.rack_gbps,
            "rtt_ms": self.rtt_ms,
            "gpus": self.gpus,
            "gpu_type": self.gpu_type,
            "cpus": self.cpus,
            "mem_gb": self.mem_gb,
            "pools": list(self.pools),
            "isolate_cpu": self.isolate_cpu,
            "host_cpus": self.host_cpus,
            "device_cores": self.device_cores,
            "ps_cores": self.ps_cores,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> EmulationSpec:
        """The inverse of :meth:`to_dict` (a state file's ``spec``)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise SpecError("spec", unknown, f"fields among {', '.join(sorted(known))}")
        data = dict(raw)
        data["pools"] = tuple(str(p) for p in data.get("pools") or ())
        return cls(**data)


@dataclass(frozen=True)
class HostPlan:
    index: int
    name: str  # the agent's name, h0, h1, ...
    netns: str
    rack: str  # rack0, rack1, ...
    pool: str
    data_addr: str  # eth0: the agent's --host, where its tasks' traffic goes
    mgmt_addr: str  # mgmt0: where it reaches the controller
    bridge: str  # its rack's bridge in the fabric namespace
    fabric_port: str  # eth0's peer in the fabric namespace, on the rack bridge
    mgmt_port: str  # mgmt0's peer, on the mgmt bridge


@dataclass(frozen=True)
class UplinkPlan:
    rack: str
    bridge: str  # the rack's bridge in the fabric namespace
    rack_end: str  # veth end on the rack bridge
    core_end: str  # its peer, on the core bridge


@dataclass(frozen=True)
class NetworkPlan:
    cluster_id: str
    spec: EmulationSpec
    fabric_ns: str
    root_link: str  # the root namespace's veth end (controller side)
    controller_addr: str
    mgmt_prefix: int
    data_prefix: int
    hosts: tuple[HostPlan, ...]
    uplinks: tuple[UplinkPlan, ...]

    @property
    def namespaces(self) -> tuple[str, ...]:
        return (self.fabric_ns, *(h.netns for h in self.hosts))

    def host(self, name: str) -> HostPlan:
        for h in self.hosts:
            if h.name == name:
                return h
        raise SpecError("host", name, f"one of {', '.join(h.name for h in self.hosts)}")


def mgmt_block(index: int) -> ipaddress.IPv4Network:
    """The ``index``-th /27 of the control-plane range."""
    if not 0 <= index < MGMT_BLOCKS:
        raise SpecError("mgmt_block", index, f"an index in 0..{MGMT_BLOCKS - 1}")
    return _BLOCKS[index]


def namespace_prefix(cluster_id: str) -> str:
    return f"mlsched-{cluster_id}"


def plan_network(spec: EmulationSpec, cluster_id: str, block: int) -> NetworkPlan:
    """Every name and address of cluster ``cluster_id`` (6 hex digits) on control-plane
    block ``block``. Names in the root namespace carry the id, so clusters never collide."""
    if len(cluster_id) != 6 or any(c not in "0123456789abcdef" for c in cluster_id):
        raise SpecError("cluster_id", cluster_id, "6 lowercase hex digits")
    prefix = namespace_prefix(cluster_id)
    mgmt = list(mgmt_block(block).hosts())
    data = list(DATA_NET.hosts())
    hosts = tuple(
        HostPlan(
            index=i,
            name=f"h{i}",
            netns=f"{prefix}-h{i}",
            rack=f"rack{spec.rack_of(i)}",
            pool=spec.pool_of(i),
            data_addr=str(data[i]),
            mgmt_addr=str(mgmt[i + 1]),
            bridge=f"r{spec.rack_of(i)}",
            fabric_port=f"h{i}",
            mgmt_port=f"m{i}",
        )
        for i in range(spec.hosts)
    )
    uplinks = (
        tuple(UplinkPlan(f"rack{r}", f"r{r}", f"u{r}", f"c{r}") for r in range(spec.racks))
        if spec.racks > 1
        else ()
    )
    return NetworkPlan(
        cluster_id=cluster_id,
        spec=spec,
        fabric_ns=f"{prefix}-fabric",
        root_link=f"mls{cluster_id}",  # 9 characters: within IFNAMSIZ
        controller_addr=str(mgmt[0]),
        mgmt_prefix=MGMT_PREFIX,
        data_prefix=DATA_NET.prefixlen,
        hosts=hosts,
        uplinks=uplinks,
    )
