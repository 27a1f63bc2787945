"""Servers, pools, racks and the two-tier topology of a cluster.

A cluster is a list of :class:`Server` (capacity vector, pool, GPU type, rack, NIC uplink)
plus a :class:`Topology`: every server hangs off its rack's switch through its uplink, and
every rack hangs off one core switch (spec 003's two-tier tree). Intra-server traffic runs
at ``intra_server_gbps``. Resource amounts are kept as a numpy matrix (servers x resources)
in :attr:`Cluster.capacity` for the hot paths.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import Any

import numpy as np

from mlsched.core.device_types import TypeCatalogue
from mlsched.core.errors import SpecError
from mlsched.core.fields import (
    check_keys,
    req_float,
    req_int,
    req_mapping,
    req_str,
)
from mlsched.core.links import Links
from mlsched.core.resources import ResourceVector

__all__ = ["Cluster", "Pool", "Server", "Topology"]


class Pool(str, Enum):
    """Which tasks a server may host: workers, parameter servers, or both."""

    WORKER = "worker"
    PS = "ps"
    BOTH = "both"

    def hosts_workers(self) -> bool:
        return self is not Pool.PS

    def hosts_ps(self) -> bool:
        return self is not Pool.WORKER


@dataclass(frozen=True)
class Server:
    """One machine. ``uplink_gbps`` is its NIC link to the rack switch."""

    name: str
    capacity: ResourceVector
    pool: Pool = Pool.BOTH
    gpu_type: str | None = None
    rack: str = "rack0"
    uplink_gbps: float = 10.0

    def __post_init__(self) -> None:
        if not self.name:
            raise SpecError("name", self.name, "a non-empty server name")
        if not isinstance(self.capacity, ResourceVector):
            object.__setattr__(
                self, "capacity", ResourceVector.parse(self.capacity, field="capacity")
            )
        if not isinstance(self.pool, Pool):
            try:
                object.__setattr__(self, "pool", Pool(self.pool))
            except ValueError:
                raise SpecError("pool", self.pool, "one of worker, ps, both") from None
        if self.uplink_gbps <= 0:
            raise SpecError("uplink_gbps", self.uplink_gbps, "a number > 0")

    @classmethod
    def from_dict(cls, raw: Any, field_name: str, *, name: str | None = None) -> Server:
        data = req_mapping(raw, field_name)
        check_keys(
            data,
            ("name", "capacity", "pool", "gpu_type", "rack", "uplink_gbps", "count"),
            field_name,
        )
        pool = req_str(data, "pool", field_name, choices=[p.value for p in Pool], default="both")
        gpu_type = data.get("gpu_type")
        if gpu_type is not None and (not isinstance(gpu_type, str) or not gpu_type):
            raise SpecError(f"{field_name}.gpu_type", gpu_type, "a GPU type name such as V100")
        return cls(
            name=name or req_str(data, "name", field_name),
            capacity=ResourceVector.parse(data.get("capacity"), field=f"{field_name}.capacity"),
            pool=Pool(pool),
            gpu_type=gpu_type,
            rack=req_str(data, "rack", field_name, default="rack0"),
            uplink_gbps=req_float(
                data, "uplink_gbps", field_name, minimum=0, exclusive_min=True, default=10.0
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "capacity": self.capacity.as_dict(),
            "pool": self.pool.value,
            "rack": self.rack,
            "uplink_gbps": self.uplink_gbps,
        }
        if self.gpu_type:
            out["gpu_type"] = self.gpu_type
        return out


@dataclass(frozen=True)
class Topology:
    """Link speeds of the two-tier tree; ``rack_uplink_gbps`` overrides per rack."""

    intra_server_gbps: float = 100.0
    rack_core_gbps: float = 400.0
    rack_uplink_gbps: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.intra_server_gbps <= 0:
            raise SpecError("topology.intra_server_gbps", self.intra_server_gbps, "a number > 0")
        if self.rack_core_gbps <= 0:
            raise SpecError("topology.rack_core_gbps", self.rack_core_gbps, "a number > 0")
        for rack, gbps in self.rack_uplink_gbps.items():
            if gbps <= 0:
                raise SpecError(f"topology.rack_uplink_gbps.{rack}", gbps, "a number > 0")

    def rack_uplink(self, rack: str) -> float:
        return float(self.rack_uplink_gbps.get(rack, self.rack_core_gbps))

    @classmethod
    def from_dict(cls, raw: Any) -> Topology:
        if raw is None:
            return cls()
        data = req_mapping(raw, "topology")
        check_keys(data, ("intra_server_gbps", "rack_core_gbps", "rack_uplink_gbps"), "topology")
        uplinks = data.get("rack_uplink_gbps") or {}
        req_mapping(uplinks, "topology.rack_uplink_gbps")
        return cls(
            intra_server_gbps=req_float(
                data, "intra_server_gbps", "topology", minimum=0, exclusive_min=True, default=100.0
            ),
            rack_core_gbps=req_float(
                data, "rack_core_gbps", "topology", minimum=0, exclusive_min=True, default=400.0
            ),
            rack_uplink_gbps={
                str(k): req_float(
                    uplinks, k, "topology.rack_uplink_gbps", minimum=0, exclusive_min=True
                )
                for k in uplinks
            },
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "intra_server_gbps": self.intra_server_gbps,
            "rack_core_gbps": self.rack_core_gbps,
            "rack_uplink_gbps": dict(self.rack_uplink_gbps),
        }


@dataclass(frozen=True)
class Cluster:
    """An immutable set of servers with a topology and a fixed resource order."""

    servers: tuple[Server, ...]
    topology: Topology = field(default_factory=Topology)
    #: Worker and PS types (empty: none declared; jobs' typed bundles run on any server).
    types: TypeCatalogue = field(default_factory=TypeCatalogue)

    def __post_init__(self) -> None:
        servers = tuple(self.servers)
        if not servers:
            raise SpecError("servers", [], "at least one server")
        seen: set[str] = set()
        for i, s in enumerate(servers):
            if s.name in seen:
                raise SpecError(f"servers[{i}].name", s.name, "a server name used only once")
            seen.add(s.name)
        object.__setattr__(self, "servers", servers)

    def __len__(self) -> int:
        return len(self.servers)

    @cached_property
    def resource_names(self) -> tuple[str, ...]:
        """Every resource any server offers, sorted: the column order of :attr:`capacity`."""
        names: set[str] = set()
        for s in self.servers:
            names.update(s.capacity)
        return tuple(sorted(names))

    @cached_property
    def capacity(self) -> np.ndarray:
        """(servers x resources) capacity matrix; read-only."""
        cap = np.array([s.capacity.to_array(self.resource_names) for s in self.servers])
        cap.setflags(write=False)
        return cap

    @cached_property
    def index(self) -> dict[str, int]:
        return {s.name: i for i, s in enumerate(self.servers)}

    @cached_property
    def worker_servers(self) -> tuple[int, ...]:
        return tuple(i for i, s in enumerate(self.servers) if s.pool.hosts_workers())

    @cached_property
    def ps_servers(self) -> tuple[int, ...]:
        return tuple(i for i, s in enumerate(self.servers) if s.pool.hosts_ps())

    @cached_property
    def racks(self) -> tuple[str, ...]:
        return tuple(sorted({s.rack for s in self.servers}))

    @cached_property
    def total(self) -> np.ndarray:
        return self.capacity.sum(axis=0)

    def demand_array(self, demand: ResourceVector) -> np.ndarray:
        """A demand vector over this cluster's resource order.

        Resources the cluster does not track (say ``storage_gb`` on a cluster that declares
        none) are unconstrained and drop out; :meth:`offers` catches the one that must not
        (GPUs).
        """
        arrays = self._demand_arrays
        array = arrays.get(demand)
        if array is None:
            # Read-only and kept: a few distinct demands are asked for again and again.
            array = demand.to_array(self.resource_names)
            array.setflags(write=False)
            if len(arrays) < 4096:
                arrays[demand] = array
        return array

    @cached_property
    def _demand_arrays(self) -> dict[ResourceVector, np.ndarray]:
        return {}

    def offers(self, demand: ResourceVector) -> bool:
        """False when the demand needs GPUs and no server has any."""
        return demand["gpu"] <= 0 or "gpu" in self.resource_names

    @cached_property
    def links(self) -> Links:
        """The directed links of the two-tier tree and ring-hop routes over them."""
        return Links(self.servers, self.racks, self.topology.rack_uplink)

    def path_gbps(self, a: int, b: int) -> float:
        """Bottleneck bandwidth of the path between servers a and b (intra, rack or core)."""
        if a == b:
            return self.topology.intra_server_gbps
        sa, sb = self.servers[a], self.servers[b]
        bottleneck = min(sa.uplink_gbps, sb.uplink_gbps)
        if sa.rack != sb.rack:
            bottleneck = min(
                bottleneck, self.topology.rack_uplink(sa.rack), self.topology.rack_uplink(sb.rack)
            )
        return bottleneck

    # Loading --------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, raw: Any) -> Cluster:
        """Load ``{topology: {...}, servers: [...], types: {...}}``; an entry with
        ``count: n`` expands into n servers named ``<name>-0 .. <name>-(n-1)``; ``types`` is
        the catalogue of worker and PS types (:mod:`mlsched.core.device_types`)."""
        data = req_mapping(raw, "cluster")
        check_keys(data, ("servers", "topology", "types"), "")
        raw_servers = data.get("servers")
        if not isinstance(raw_servers, Sequence) or isinstance(raw_servers, (str, bytes)):
            raise SpecError("servers", raw_servers, "a list of servers")
        servers: list[Server] = []
        for i, entry in enumerate(raw_servers):
            fname = f"servers[{i}]"
            entry_map = req_mapping(entry, fname)
            count = req_int(entry_map, "count", fname, minimum=1, default=1)
            base = req_str(entry_map, "name", fname)
            if count == 1 and "count" not in entry_map:
                servers.append(Server.from_dict(entry_map, fname))
            else:
                servers.extend(
                    Server.from_dict(entry_map, fname, name=f"{base}-{j}") for j in range(count)
                )
        types = (
            TypeCatalogue() if data.get("types") is None else TypeCatalogue.from_dict(data["types"])
        )
        return cls(tuple(servers), Topology.from_dict(data.get("topology")), types)

    def to_dict(self) -> dict[str, Any]:
        """The form :meth:`from_dict` reads; a run of equal servers named ``<name>-0``,
        ``<name>-1``, ... is written back as one entry with ``count`` (a 108-server cluster
        is a few lines, not hundreds)."""
        entries: list[dict[str, Any]] = []
        run_base, run_rest, run_len = "", None, 0
        for server in self.servers:
            d = server.to_dict()
            name = d.pop("name")
            if run_len and name == f"{run_base}-{run_len}" and d == run_rest:
                run_len += 1
                entries[-1]["count"] = run_len
                entries[-1]["name"] = run_base
                continue
            entries.append({"name": name, **d})
            base, _, index = name.rpartition("-")
            run_base, run_rest, run_len = (base, d, 1) if base and index == "0" else ("", None, 0)
        out: dict[str, Any] = {"topology": self.topology.to_dict(), "servers": entries}
        if self.types:
            out["types"] = self.types.to_dict()
        return out

    def scaled(self, factor: float = 1.0, *, links: float = 1.0) -> Cluster:
        """The same cluster with every server capacity multiplied by ``factor`` and every
        link (server uplinks, rack uplinks; not intra-server) by ``links`` (for sweeps such
        as spec 003's node- and edge-capacity scales)."""
        for name, value in (("factor", factor), ("links", links)):
            if not value > 0:
                raise SpecError(name, value, "a scale > 0")
        topology = self.topology
        if links != 1.0:
            topology = Topology(
                topology.intra_server_gbps,
                topology.rack_core_gbps * links,
                {rack: gbps * links for rack, gbps in topology.rack_uplink_gbps.items()},
            )
        return Cluster(
            tuple(
                Server(
                    s.name, s.capacity * factor, s.pool, s.gpu_type, s.rack, s.uplink_gbps * links
                )
                for s in self.servers
            ),
            topology,
            self.types,
        )
