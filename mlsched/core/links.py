"""The directed links of a cluster's two-tier tree and the routes of ring hops (spec 003).

Substrate nodes are the servers, one switch per rack and one core switch (spec 003 A19:
switches host nothing). Every server has an up and a down link to its rack's switch at its
``uplink_gbps``; every rack switch an up and a down link to the core at the topology's
rack uplink. Links are directed because a ring sends one way: a hop from server a to
server b loads a's up link and b's down link (and, across racks, a's rack's up link and
b's rack's down link), never the reverse direction. Routes in a tree are unique.

A ring-all-reduce job that reserves ``hop_gbps`` (spec 003's b_i) reserves it on every link
of every inter-server hop of its ring, in ring order; hops between workers on one server are
free (A30). A ring visits each of its servers once, so each server's workers are adjacent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from mlsched.core.errors import SpecError

__all__ = ["Link", "Links", "ring_hops"]

CORE = "core"


@dataclass(frozen=True)
class Link:
    """One directed link: ``src`` and ``dst`` name servers, rack switches or the core."""

    src: str
    dst: str
    gbps: float

    @property
    def name(self) -> str:
        return f"{self.src}->{self.dst}"


def ring_hops(order: Sequence[int]) -> list[tuple[int, int]]:
    """The inter-server hops of a ring over ``order`` (each server once, in ring order):
    none for one server, both directions for two."""
    n = len(order)
    if n < 2:
        return []
    return [(order[i], order[(i + 1) % n]) for i in range(n)]


class Host(Protocol):
    """What the links need of a server (:class:`mlsched.core.cluster.Server` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def rack(self) -> str: ...
    @property
    def uplink_gbps(self) -> float: ...


class Links:
    """The links of one cluster, indexed: server i's up link is ``2 i``, its down link
    ``2 i + 1``; rack r's (``racks`` order) up link ``2 S + 2 r``, down ``2 S + 2 r + 1``.

    As a graph (for flow formulations): nodes ``0 .. S-1`` are the servers, ``S + r`` rack
    r's switch and ``S + R`` the core; ``ends[l]`` is link l's (tail, head).
    """

    def __init__(
        self,
        servers: Sequence[Host],
        racks: Sequence[str],
        rack_uplink: Callable[[str], float],
    ) -> None:
        n = len(servers)
        self._n_servers = n
        rack_index = {rack: i for i, rack in enumerate(racks)}
        self._rack_of = tuple(rack_index[s.rack] for s in servers)
        links: list[Link] = []
        ends: list[tuple[int, int]] = []
        core = n + len(racks)
        for i, s in enumerate(servers):
            switch = _switch(s.rack)
            links.append(Link(s.name, switch, s.uplink_gbps))
            links.append(Link(switch, s.name, s.uplink_gbps))
            ends += [(i, n + self._rack_of[i]), (n + self._rack_of[i], i)]
        for r, rack in enumerate(racks):
            gbps = rack_uplink(rack)
            links.append(Link(_switch(rack), CORE, gbps))
            links.append(Link(CORE, _switch(rack), gbps))
            ends += [(n + r, core), (core, n + r)]
        self.links: tuple[Link, ...] = tuple(links)
        #: (tail, head) node of each link; nodes: servers, then rack switches, then the core.
        self.ends: tuple[tuple[int, int], ...] = tuple(ends)
        #: Servers + rack switches + the core.
        self.node_count = core + 1
        #: Rack index (``cluster.racks`` order) of each server, as a tuple and an array.
        self.rack_of = self._rack_of
        self.rack_array = np.asarray(self._rack_of, dtype=int)
        self.rack_array.setflags(write=False)
        capacity = np.array([link.gbps for link in links], dtype=float)
        capacity.setflags(write=False)
        #: Capacity per link in Gbit/s, in link index order.
        self.capacity = capacity
        self._routes: dict[tuple[int, int], tuple[int, ...]] = {}

    def __len__(self) -> int:
        return len(self.links)

    def route(self, a: int, b: int) -> tuple[int, ...]:
        """The links a hop from server ``a`` to server ``b`` crosses (none when a == b)."""
        key = (a, b)
        route = self._routes.get(key)
        if route is None:
            route = self._route(a, b)
            self._routes[key] = route
        return route

    def _route(self, a: int, b: int) -> tuple[int, ...]:
        n = self._n_servers
        for s in (a, b):
            if not 0 <= s < n:
                raise SpecError("ring", s, f"a server index in 0..{n - 1}")
        if a == b:
            return ()
        ra, rb = self._rack_of[a], self._rack_of[b]
        if ra == rb:
            return (2 * a, 2 * b + 1)
        return (2 * a, 2 * n + 2 * ra, 2 * n + 2 * rb + 1, 2 * b + 1)

    def ring_load(self, order: Sequence[int], gbps: float) -> dict[int, float]:
        """Gbit/s a ring over ``order`` reserves per link: ``gbps`` per hop crossing it."""
        load: dict[int, float] = {}
        if gbps <= 0:
            return load
        for a, b in ring_hops(order):
            for link in self.route(a, b):
                load[link] = load.get(link, 0.0) + gbps
        return load

    def hops_over(self, order: Sequence[int]) -> np.ndarray:
        """How many hops of a ring over ``order`` cross each link."""
        count = np.zeros(len(self.links))
        for a, b in ring_hops(order):
            for link in self.route(a, b):
                count[link] += 1
        return count


def _switch(rack: str) -> str:
    return f"{rack}/switch"
