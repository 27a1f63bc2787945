"""Directed links, ring-hop routes and the engine's link reservations (spec 003).

The cluster: two racks, two servers each (a0, a1 in rack a; b0, b1 in rack b), 10 Gbit/s
server uplinks, 4 Gbit/s rack uplinks. Routes are checked by link name, loads by the
engine's own ledger with the real simulator running the slots.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from engine_helpers import make_engine

from mlsched.controller.runs import placement_layout
from mlsched.core import (
    Admission,
    Allocation,
    Arch,
    Cluster,
    JobSpec,
    JobState,
    Placement,
    PolicyError,
    ResourceVector,
    Server,
    SpecError,
    Topology,
)
from mlsched.core.links import ring_hops
from mlsched.engine.engine import Engine
from mlsched.perfmodel.paths import ring_bottleneck_gbps
from mlsched.scheduler import ClusterView, Policy

A0, A1, B0, B1 = 0, 1, 2, 3


@pytest.fixture
def cluster() -> Cluster:
    cap = ResourceVector({"gpu": 4, "cpu": 16})
    servers = tuple(
        Server(name, cap, rack=rack, uplink_gbps=10.0)
        for name, rack in (("a0", "a"), ("a1", "a"), ("b0", "b"), ("b1", "b"))
    )
    return Cluster(servers, Topology(intra_server_gbps=100.0, rack_core_gbps=4.0))


def names(cluster: Cluster, links: tuple[int, ...]) -> list[str]:
    return [cluster.links.links[i].name for i in links]


def ring_job(job_id: str, hop_gbps: float | None = 3.0, **kw: object) -> JobSpec:
    fields: dict[str, object] = {
        "arch": Arch.ALLREDUCE,
        "chunks": 8,
        "batches_per_chunk": 10_000,
        "worker": ResourceVector({"gpu": 1, "cpu": 1}),
        "hop_gbps": hop_gbps,
    }
    fields.update(kw)
    return JobSpec(job_id, **fields)  # type: ignore[arg-type]


class Scripted(Policy):
    name = "scripted-links"
    description = "test double: returns a scripted allocation"

    def __init__(self, allocate: Callable[[int], dict[str, Placement]]) -> None:
        super().__init__()
        self._allocate = allocate

    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        return Admission.admit()

    def allocate(self, slot: int, view: ClusterView) -> Allocation:
        return Allocation(slot, self._allocate(slot))


def engine_for(cluster: Cluster, allocate: Callable[[int], dict[str, Placement]]) -> Engine:
    return make_engine(cluster, Scripted(allocate), slot_seconds=10.0)


def ring(*servers: int, per: int = 1) -> Placement:
    return Placement(tuple((s, per) for s in servers), ring=servers)


# The link list and routes ----------------------------------------------------------------
def test_links_are_an_up_and_a_down_link_per_server_and_per_rack(cluster: Cluster) -> None:
    links = cluster.links
    assert len(links) == 2 * 4 + 2 * 2
    assert names(cluster, (0, 1)) == ["a0->a/switch", "a/switch->a0"]
    assert names(cluster, (8, 9)) == ["a/switch->core", "core->a/switch"]
    assert list(links.capacity) == [10.0] * 8 + [4.0] * 4
    # As a graph: servers 0-3, switches 4 (a) and 5 (b), the core 6.
    assert links.node_count == 7
    assert links.ends[:2] == ((0, 4), (4, 0)) and links.ends[10:] == ((5, 6), (6, 5))
    # Every route is a path: each link's head is the next one's tail.
    route = links.route(A1, B0)
    assert [links.ends[i] for i in route] == [(1, 4), (4, 6), (6, 5), (5, 2)]


def test_routes_follow_the_tree_one_way(cluster: Cluster) -> None:
    links = cluster.links
    assert links.route(A0, A0) == ()
    assert names(cluster, links.route(A0, A1)) == ["a0->a/switch", "a/switch->a1"]
    assert names(cluster, links.route(A1, B0)) == [
        "a1->a/switch",
        "a/switch->core",
        "core->b/switch",
        "b/switch->b0",
    ]
    # The reverse hop uses the other direction of every link: no link in common.
    assert not set(links.route(A1, B0)) & set(links.route(B0, A1))
    with pytest.raises(SpecError, match="server index"):
        links.route(A0, 9)


def test_ring_hops_close_the_cycle() -> None:
    assert ring_hops([5]) == []
    assert ring_hops([1, 2]) == [(1, 2), (2, 1)]
    assert ring_hops([0, 2, 1]) == [(0, 2), (2, 1), (1, 0)]


def test_a_cross_rack_ring_loads_each_rack_uplink_once_per_direction(cluster: Cluster) -> None:
    """a0 -> a1 -> b0 -> b1 -> a0 crosses the core twice (a1->b0 and b1->a0); ordered
    a0 -> b0 -> a1 -> b1 it would cross it four times."""
    load = cluster.links.ring_load((A0, A1, B0, B1), 2.0)
    up_a, up_b = 8, 10  # a/switch->core, b/switch->core
    assert load[up_a] == 2.0 and load[up_b] == 2.0
    assert all(v == 2.0 for v in load.values())
    interleaved = cluster.links.hops_over((A0, B0, A1, B1))
    assert interleaved[up_a] == 2 and interleaved[up_b] == 2
    assert cluster.links.ring_load((A0, A1), 0.0) == {}


def test_scaled_scales_links_apart_from_servers(cluster: Cluster) -> None:
    both = cluster.scaled(2.0, links=0.5)
    assert both.capacity[0, both.resource_names.index("gpu")] == 8
    assert list(both.links.capacity) == [5.0] * 8 + [2.0] * 4
    assert both.topology.intra_server_gbps == cluster.topology.intra_server_gbps
    assert list(cluster.scaled(3.0).links.capacity) == list(cluster.links.capacity)
    with pytest.raises(SpecError, match="links"):
        cluster.scaled(links=0)


# The job field ---------------------------------------------------------------------------
def test_hop_gbps_is_checked_and_kept() -> None:
    job = JobSpec.from_dict({"job_id": "r", "arch": "allreduce", "hop_gbps": 2.5})
    assert job.hop_gbps == 2.5 and JobSpec.from_dict(job.to_dict()) == job
    with pytest.raises(SpecError, match="hop_gbps"):
        JobSpec.from_dict({"job_id": "r", "arch": "allreduce", "hop_gbps": -1})
    with pytest.raises(SpecError, match=r"jobs\[0\]\.hop_gbps"):
        JobSpec.from_dict({"job_id": "p", "arch": "ps", "hop_gbps": 1}, "jobs[0]")
    assert "hop_gbps" not in JobSpec("plain").to_dict()


def test_the_runtime_model_sees_the_reserved_rate(cluster: Cluster) -> None:
    fast = ring_job("r", hop_gbps=None)
    slow = ring_job("r", hop_gbps=1.5)
    p = ring(A0, B0)
    assert ring_bottleneck_gbps(fast, p, cluster) == 4.0  # the rack uplinks
    assert ring_bottleneck_gbps(slow, p, cluster) == 1.5


# The engine ----------------------------------------------------------------------------
def test_the_engine_reserves_and_releases_hop_bandwidth(cluster: Cluster) -> None:
    """Slot 0: job x on a0-b0 (3 Gbit/s on both rack uplinks); slot 1: x moves inside rack
    a, freeing the core; slot 2: x leaves. A ledger that forgot to release would keep 3 on
    the rack uplinks."""
    plan = {0: ring(A0, B0), 1: ring(A0, A1)}
    engine = engine_for(cluster, lambda t: {"x": plan[t]} if t in plan else {})
    engine.submit(ring_job("x", chunks=2))
    engine.step()
    used = engine.link_used
    assert used[8] == 3.0 and used[11] == 3.0  # a up to core, core down to b
    assert used.sum() == pytest.approx(3.0 * 8)
    engine.step()
    used = engine.link_used
    assert used[8:].sum() == 0 and used.sum() == pytest.approx(3.0 * 4)
    engine.step()
    assert not np.any(engine.link_used)


def test_over_reserving_a_link_is_a_policy_error_naming_it(cluster: Cluster) -> None:
    """Two 3-Gbit/s rings across the 4-Gbit/s rack uplinks: the second does not fit. Each
    alone fits, so a ledger that checked jobs one by one would let both through."""
    both = {"x": ring(A0, B0), "y": ring(A1, B1)}
    engine = engine_for(cluster, lambda t: both)
    engine.submit(ring_job("x"))
    engine.submit(ring_job("y"))
    with pytest.raises(PolicyError, match="link a/switch->core over-reserved: 6 of 4 Gbit/s"):
        engine.step()


def test_rings_inside_one_rack_share_no_rack_link(cluster: Cluster) -> None:
    engine = engine_for(cluster, lambda t: {"x": ring(A0, A1), "y": ring(B0, B1)})
    engine.submit(ring_job("x", hop_gbps=10.0))
    engine.submit(ring_job("y", hop_gbps=10.0))
    engine.step()
    assert engine.records["x"].state is JobState.RUNNING
    assert engine.link_used[8:].sum() == 0


def test_jobs_without_a_reservation_are_not_counted(cluster: Cluster) -> None:
    engine = engine_for(cluster, lambda t: {"x": ring(A0, B0)})
    engine.submit(ring_job("x", hop_gbps=None))
    engine.step()
    assert not np.any(engine.link_used)


@pytest.mark.parametrize(
    ("placement", "message"),
    [
        pytest.param(
            Placement(((A0, 1), (A1, 1)), ring=(A0, A1, A0)),
            "must list each of its worker servers [0, 1] exactly once",
            id="server-twice",
        ),
        pytest.param(
            Placement(((A0, 1), (A1, 1)), ring=(A0, B0)),
            "must list each of its worker servers",
            id="server-without-workers",
        ),
        pytest.param(
            Placement(((A0, 1), (A1, 1), (B0, 1)), ring=(A0, A1)),
            "must list each of its worker servers",
            id="server-left-out",
        ),
    ],
)
def test_an_invalid_ring_is_a_policy_error(
    cluster: Cluster, placement: Placement, message: str
) -> None:
    engine = engine_for(cluster, lambda t: {"x": placement})
    engine.submit(ring_job("x"))
    with pytest.raises(PolicyError, match="slot 0: job 'x': ring") as err:
        engine.step()
    assert message in str(err.value)


def test_a_ring_order_for_a_ps_job_is_a_policy_error(cluster: Cluster) -> None:
    job = JobSpec("p", worker=ResourceVector({"gpu": 1}), chunks=2)
    engine = engine_for(cluster, lambda t: {"p": Placement(((A0, 1),), ((A1, 1),), ring=(A0,))})
    engine.submit(job)
    with pytest.raises(PolicyError, match="parameter-server job got a ring order"):
        engine.step()


# The testbed -----------------------------------------------------------------------------
def test_ranks_follow_the_ring_order() -> None:
    """The cluster executor numbers ranks along its layout; with a ring the layout is the
    ring's order: server 2's worker is rank 0, server 0's two workers ranks 1 and 2."""
    layout = placement_layout(Placement(((0, 2), (1, 1), (2, 1)), ring=(2, 0, 1)), str)
    assert [agent for agent, _, _ in layout] == ["2", "0", "1"]
    assert [w for _, w, _ in layout] == [1, 2, 1]
    plain = placement_layout(Placement(((2, 1), (0, 2))), str)
    assert [agent for agent, _, _ in plain] == ["0", "2"]


def test_a_finished_job_frees_its_links(cluster: Cluster) -> None:
    """x finishes within slot 0 on a cross-rack ring; y, which needs the same rack uplink,
    runs from slot 1. A ledger that kept a finished job's hops would refuse y."""
    plan = {0: {"x": ring(A0, B0)}, 1: {"y": ring(A1, B1)}}
    engine = engine_for(cluster, lambda t: plan.get(t, {}))
    engine.submit(ring_job("x", chunks=1, max_workers=2, batches_per_chunk=1))
    engine.submit(ring_job("y", arrival_slot=1))
    engine.step()
    assert engine.records["x"].state is JobState.DONE
    assert not np.any(engine.link_used)
    engine.step()
    assert engine.records["y"].state is JobState.RUNNING
    assert engine.link_used[8] == 3.0
