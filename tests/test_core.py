"""The domain model: resources, cluster/job/utility loading, and the allocation types.

Every bad input must raise :class:`SpecError` naming the field (with the location prefix a
loader adds), so the tables below list (input, expected field) pairs.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from mlsched.core import (
    Admission,
    Allocation,
    Arch,
    Cluster,
    Decision,
    JobSpec,
    JobState,
    Placement,
    Plan,
    Pool,
    Quote,
    RejectKind,
    ResourceVector,
    Server,
    SpecError,
    SyncMode,
    Topology,
    Utility,
    UtilityKind,
)
from mlsched.scheduler.placement import EmptyFit, can_ever_run, pack
from mlsched.scheduler.view import CapacityLedger


# Resources -----------------------------------------------------------------------------
def test_resource_vector_reads_missing_names_as_zero_and_drops_zeros() -> None:
    v = ResourceVector({"gpu": 2, "cpu": 0, "mem_gb": 8})
    assert v["gpu"] == 2.0 and v["cpu"] == 0.0 and v["bw_gbps"] == 0.0
    assert "cpu" not in v and list(v) == ["gpu", "mem_gb"]
    assert v == {"mem_gb": 8, "gpu": 2}
    assert hash(v) == hash(ResourceVector({"mem_gb": 8.0, "gpu": 2.0}))


@pytest.mark.parametrize(
    ("a", "b", "op", "want"),
    [
        pytest.param({"cpu": 2}, {"cpu": 1, "gpu": 1}, "add", {"cpu": 3, "gpu": 1}, id="add"),
        pytest.param({"cpu": 2}, {"cpu": 3, "gpu": 1}, "sub", {}, id="sub-clips-at-zero"),
        pytest.param({"cpu": 2, "gpu": 1}, {"gpu": 1}, "sub", {"cpu": 2}, id="sub"),
        pytest.param({"cpu": 2, "gpu": 1}, 3, "mul", {"cpu": 6, "gpu": 3}, id="mul"),
    ],
)
def test_resource_vector_arithmetic(
    a: dict[str, float], b: Any, op: str, want: dict[str, float]
) -> None:
    left = ResourceVector(a)
    right = b if isinstance(b, int) else ResourceVector(b)
    got = getattr(operator, op)(left, right)
    assert got == ResourceVector(want)


@pytest.mark.parametrize(
    ("demand", "capacity", "fits"),
    [
        pytest.param({"gpu": 1, "cpu": 4}, {"gpu": 1, "cpu": 4}, True, id="exact"),
        pytest.param({"gpu": 2}, {"gpu": 1, "cpu": 4}, False, id="too-many-gpus"),
        pytest.param({"storage_gb": 1}, {"cpu": 4}, False, id="resource-absent"),
        pytest.param({}, {}, True, id="empty"),
    ],
)
def test_fits_in(demand: dict[str, float], capacity: dict[str, float], fits: bool) -> None:
    assert ResourceVector(demand).fits_in(capacity) is fits


def test_to_array_follows_the_given_order() -> None:
    v = ResourceVector({"gpu": 2, "cpu": 4})
    np.testing.assert_array_equal(v.to_array(("cpu", "bw_gbps", "gpu")), [4.0, 0.0, 2.0])


@pytest.mark.parametrize(
    ("amounts", "field"),
    [
        pytest.param({"GPU": 1}, "worker", id="not-lowercase"),
        pytest.param({"gpu": -1}, "worker.gpu", id="negative"),
        pytest.param({"gpu": "many"}, "worker.gpu", id="not-a-number"),
        pytest.param({"gpu": math.nan}, "worker.gpu", id="nan"),
        pytest.param({"gpu": math.inf}, "worker.gpu", id="inf"),
    ],
)
def test_resource_vector_errors_name_the_field(amounts: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as err:
        ResourceVector(amounts, field="worker")
    assert err.value.field == field
    assert f"'{field}'" in str(err.value)


def test_parse_refuses_a_non_mapping() -> None:
    with pytest.raises(SpecError, match="'capacity'"):
        ResourceVector.parse([1, 2], field="capacity")


# Cluster -------------------------------------------------------------------------------
def _server(name: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "capacity": {"cpu": 4}, **kw}


CLUSTER_ERRORS = [
    pytest.param({"servers": []}, "servers", id="no-servers"),
    pytest.param({"servers": "s0"}, "servers", id="servers-not-a-list"),
    pytest.param({"servers": [_server("a"), _server("a")]}, "servers[1].name", id="dup-name"),
    pytest.param(
        {"servers": [_server("a", capacity={"cpu": -1})]},
        "servers[0].capacity.cpu",
        id="negative-capacity",
    ),
    pytest.param({"servers": [_server("a", pool="gpu")]}, "servers[0].pool", id="bad-pool"),
    pytest.param({"servers": [_server("a", gpu_type=3)]}, "servers[0].gpu_type", id="bad-gpu-type"),
    pytest.param(
        {"servers": [_server("a", uplink_gbps=0)]}, "servers[0].uplink_gbps", id="zero-uplink"
    ),
    pytest.param({"servers": [_server("a", count=0)]}, "servers[0].count", id="zero-count"),
    pytest.param({"servers": [_server("a", cnt=2)]}, "servers[0].cnt", id="typo-key"),
    pytest.param({"servers": [{"capacity": {"cpu": 1}}]}, "servers[0].name", id="no-name"),
    pytest.param(
        {"servers": [_server("a")], "topology": {"rack_core_gbps": 0}},
        "topology.rack_core_gbps",
        id="zero-core",
    ),
    pytest.param(
        {"servers": [_server("a")], "topology": {"rack_uplink_gbps": {"r": -1}}},
        "topology.rack_uplink_gbps.r",
        id="negative-rack-uplink",
    ),
    pytest.param({"servers": [_server("a")], "extra": 1}, "extra", id="unknown-top-key"),
]


@pytest.mark.parametrize(("raw", "field"), CLUSTER_ERRORS)
def test_cluster_errors_name_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as err:
        Cluster.from_dict(raw)
    assert err.value.field == field


def test_cluster_from_dict_expands_counts_and_orders_resources() -> None:
    cluster = Cluster.from_dict(
        {
            "topology": {"intra_server_gbps": 50, "rack_uplink_gbps": {"r1": 20}},
            "servers": [
                {
                    "name": "gpu",
                    "count": 2,
                    "capacity": {"gpu": 4, "cpu": 8},
                    "gpu_type": "V100",
                    "pool": "worker",
                    "rack": "r1",
                },
                {"name": "ps", "capacity": {"cpu": 16, "bw_gbps": 10}, "pool": "ps"},
            ],
        }
    )
    assert [s.name for s in cluster.servers] == ["gpu-0", "gpu-1", "ps"]
    assert cluster.resource_names == ("bw_gbps", "cpu", "gpu")
    np.testing.assert_array_equal(cluster.capacity, [[0, 8, 4], [0, 8, 4], [10, 16, 0]])
    assert cluster.worker_servers == (0, 1) and cluster.ps_servers == (2,)
    assert not cluster.capacity.flags.writeable
    # Paths: same server, same rack (the NIC), across racks (rack uplink caps it).
    assert cluster.path_gbps(0, 0) == 50
    assert cluster.path_gbps(0, 1) == 10
    assert cluster.path_gbps(0, 2) == 10
    assert Cluster.from_dict(cluster.to_dict()) == cluster


def test_cluster_to_dict_writes_runs_of_equal_servers_as_counts() -> None:
    gpu = {"capacity": {"gpu": 1}}
    cluster = Cluster.from_dict(
        {
            "servers": [
                {"name": "a", "count": 3, **gpu},
                {"name": "a-3", **gpu},  # continues the run a-0 .. a-2
                {"name": "b-0", **gpu},  # a run of one stays as named
                {"name": "c-0", **gpu},
                {"name": "c-1", "capacity": {"gpu": 2}},  # named as a run, not equal
            ]
        }
    )
    entries = cluster.to_dict()["servers"]
    assert [(e["name"], e.get("count")) for e in entries] == [
        ("a", 4),
        ("b-0", None),
        ("c-0", None),
        ("c-1", None),
    ]
    assert Cluster.from_dict(cluster.to_dict()) == cluster


def test_cluster_offers_gpus_only_when_some_server_has_them() -> None:
    cpu_only = Cluster((Server("a", ResourceVector({"cpu": 4})),))
    assert not cpu_only.offers(ResourceVector({"gpu": 1}))
    assert cpu_only.offers(ResourceVector({"cpu": 1, "storage_gb": 5}))
    # Untracked resources drop out of the demand array.
    np.testing.assert_array_equal(
        cpu_only.demand_array(ResourceVector({"cpu": 1, "storage_gb": 5})), [1.0]
    )


def test_rack_uplink_caps_cross_rack_paths() -> None:
    cluster = Cluster(
        (
            Server("a", ResourceVector({"cpu": 1}), rack="r0", uplink_gbps=40),
            Server("b", ResourceVector({"cpu": 1}), rack="r1", uplink_gbps=40),
        ),
        Topology(rack_core_gbps=25, rack_uplink_gbps={"r1": 5}),
    )
    assert cluster.path_gbps(0, 1) == 5


# Jobs ----------------------------------------------------------------------------------
JOB_ERRORS = [
    pytest.param({"epochs": 1}, "job_id", id="no-job-id"),
    pytest.param({"epochs": 0}, "epochs", id="zero-epochs"),
    pytest.param({"epochs": True}, "epochs", id="bool-epochs"),
    pytest.param({"batch_size": 1.5}, "batch_size", id="fractional-batch"),
    pytest.param({"arrival_slot": -1}, "arrival_slot", id="negative-arrival"),
    pytest.param({"arch": "mpi"}, "arch", id="bad-arch"),
    pytest.param({"sync": "bsp"}, "sync", id="bad-sync"),
    pytest.param({"epoch": 2}, "epoch", id="typo-key"),
    pytest.param({"chunks": 2, "min_workers": 3}, "min_workers", id="min-above-max"),
    pytest.param({"requested_workers": 2}, "requested_workers", id="request-above-max"),
    pytest.param({"worker": {"bw_gbps": 1}}, "ps.bw_gbps", id="worker-bw-without-ps-bw"),
    pytest.param({"worker": {"gpu": -1}}, "worker.gpu", id="negative-demand"),
    pytest.param(
        {"worker_types": {"V100": {"gpu": "x"}}}, "worker_types.V100.gpu", id="bad-typed-bundle"
    ),
    pytest.param({"compute_s": 0}, "compute_s", id="zero-compute"),
    # Integers beyond float range: refused by their bound, not an OverflowError.
    pytest.param({"epochs": 10**400}, "epochs", id="huge-int-epochs"),
    pytest.param({"compute_s": 10**400}, "compute_s", id="huge-int-compute"),
    pytest.param(
        {"compute_s_by_type": {"V100": 10**400}}, "compute_s_by_type.V100", id="huge-typed-compute"
    ),
    pytest.param(
        {"compute_s_by_type": {"V100": -1}}, "compute_s_by_type.V100", id="negative-typed-compute"
    ),
    pytest.param({"valuation": 0}, "valuation", id="zero-valuation"),
    pytest.param({"gpu_type": 5}, "gpu_type", id="numeric-gpu-type"),
    pytest.param({"utility": {"kind": "nope"}}, "utility.kind", id="bad-utility-kind"),
    pytest.param(
        {"utility": {"kind": "sigmoid", "priority": 1, "decay": 1}},
        "utility.target",
        id="missing-utility-param",
    ),
    pytest.param(
        {"utility": {"kind": "linear", "value": 1, "deadline": 0}},
        "utility.deadline",
        id="zero-deadline",
    ),
    pytest.param(
        {"utility": {"kind": "constant", "value": -1}}, "utility.value", id="negative-utility"
    ),
]


@pytest.mark.parametrize(("fields", "field"), JOB_ERRORS)
def test_job_errors_name_the_field_with_its_location(fields: dict[str, Any], field: str) -> None:
    raw = {"job_id": "j", **fields} if field != "job_id" else fields
    with pytest.raises(SpecError) as err:
        JobSpec.from_dict(raw, "jobs[3]")
    assert err.value.field == f"jobs[3].{field}"
    assert f"'jobs[3].{field}'" in str(err.value)


def test_job_must_be_a_mapping() -> None:
    with pytest.raises(SpecError) as err:
        JobSpec.from_dict("resnet", "jobs[0]")
    assert err.value.field == "jobs[0]"


def test_job_round_trips_and_derives_its_quantities() -> None:
    job = JobSpec.from_dict(
        {
            "job_id": "j",
            "arch": "ps",
            "epochs": 2,
            "chunks": 3,
            "batches_per_chunk": 5,
            "worker": {"gpu": 1, "bw_gbps": 4},
            "ps": {"cpu": 1, "bw_gbps": 10},
            "ps_ratio": 2,
            "gradient_mb": 25,
            "valuation": 7,
            "utility": {"kind": "sigmoid", "priority": 5, "decay": 0.5, "target": 4},
        }
    )
    assert job.total_work == 30 and job.worker_cap == 3 and job.uses_ps
    assert job.sync is SyncMode.ASYNC and job.gradient_bytes == 25e6
    # PSs: bandwidth cover ceil(W b / B) and ratio ceil(W / 2).
    assert [job.ps_needed(w) for w in (0, 1, 2, 3, 5)] == [0, 1, 1, 2, 3]
    assert JobSpec.from_dict(job.to_dict()) == job
    assert job.public().valuation is None and job.valuation == 7


def test_allreduce_jobs_are_synchronous_and_need_no_ps() -> None:
    job = JobSpec("r", arch=Arch.ALLREDUCE, sync=SyncMode.ASYNC)
    assert job.sync is SyncMode.SYNC and not job.uses_ps and job.ps_needed(8) == 0


def test_unknown_worker_type_names_the_field() -> None:
    job = JobSpec("j", worker_types={"V100": ResourceVector({"gpu": 1})})
    assert job.worker_demand("V100") == {"gpu": 1}
    with pytest.raises(SpecError, match="'worker_type'"):
        job.worker_demand("K80")


# Utilities -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("utility", "x", "want"),
    [
        pytest.param(Utility.sigmoid(10, 1, 5), 5, 5.0, id="sigmoid-at-target"),
        pytest.param(Utility.sigmoid(10, 0, 5), 100, 5.0, id="sigmoid-no-decay"),
        pytest.param(Utility.sigmoid(10, 5, 0), 1000, 0.0, id="sigmoid-underflow"),
        pytest.param(Utility.constant(3), 1e6, 3.0, id="constant"),
        pytest.param(Utility(UtilityKind.LINEAR, {"value": 4, "deadline": 8}), 2, 3.0, id="linear"),
        pytest.param(
            Utility(UtilityKind.STEP, {"value": 4, "deadline": 8}), 9, 0.0, id="step-after-deadline"
        ),
        pytest.param(Utility(UtilityKind.SQRT, {"scale": 2}), 9, 6.0, id="sqrt"),
        # value 4, cost 0.5: 4 x - x^2 / 2, peak 8 at x = 4, flat after.
        pytest.param(Utility(UtilityKind.ENERGY, {"value": 4, "cost": 0.5}), 2, 6.0, id="energy"),
        pytest.param(
            Utility(UtilityKind.ENERGY, {"value": 4, "cost": 0.5}), 10, 8.0, id="energy-past-peak"
        ),
        pytest.param(
            Utility(UtilityKind.ENERGY, {"value": 3, "cost": 0}), 5, 15.0, id="energy-free"
        ),
    ],
)
def test_utility_values(utility: Utility, x: float, want: float) -> None:
    assert utility(x) == pytest.approx(want)


def test_sigmoid_log_value_is_finite_where_the_value_underflows() -> None:
    u = Utility.sigmoid(10, 5, 0)
    assert u(1000) == 0.0
    assert u.log_value(1000) == pytest.approx(math.log(10) - 5000)
    assert u.log_value(0) == pytest.approx(math.log(5))


def test_utility_from_dict_names_its_location() -> None:
    with pytest.raises(SpecError) as err:
        Utility.from_dict({"kind": "constant", "value": 1, "extra": 2}, "jobs[1].utility")
    assert err.value.field == "jobs[1].utility.extra"


# Placements, allocations, admissions ---------------------------------------------------
def test_placement_merges_duplicates_and_drops_zero_counts() -> None:
    p = Placement(((2, 1), (0, 2), (2, 1), (1, 0)), ((3, 1),))
    assert p.workers == ((0, 2), (2, 2)) and p.ps == ((3, 1),)
    assert p.n_workers == 4 and p.n_ps == 1 and p.servers == {0, 2, 3}
    assert not p.colocated and not p.is_empty
    assert p == Placement.of({0: 2, 2: 2}, {3: 1})
    assert Placement(((1, 2),), ((1, 1),)).colocated


def test_negative_task_count_names_the_field() -> None:
    with pytest.raises(SpecError, match="'ps'"):
        Placement(((0, 1),), ((0, -1),))
    with pytest.raises(SpecError, match="'workers'"):  # one group alone is checked too
        Placement(((0, -2),))


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        (((3, 2),), ((3, 2),)),
        (((3, 0),), ()),
        (((np.int64(3), np.int64(2)),), ((3, 2),)),
        (((True, 1),), ((1, 1),)),
        ([(3, 2)], ((3, 2),)),
    ],
)
def test_a_single_task_group_is_kept_as_plain_ints(given: Any, kept: Any) -> None:
    """One (server, count) pair, the common placement: a zero count is dropped, numpy or
    bool numbers become ints, a list becomes a tuple, as for any other placement."""
    p = Placement(given)
    assert p.workers == kept
    assert all(type(x) is int for pair in p.workers for x in pair)
    assert p.n_workers == sum(c for _, c in kept)


def test_usage_sums_worker_and_ps_demands_per_server(tiny_cluster: Cluster) -> None:
    job = JobSpec(
        "j",
        chunks=4,
        worker=ResourceVector({"gpu": 1, "cpu": 2}),
        ps=ResourceVector({"cpu": 3, "mem_gb": 1}),
    )
    usage = Placement(((0, 2),), ((0, 1), (1, 1))).usage(job, tiny_cluster)
    names = tiny_cluster.resource_names  # cpu, gpu, mem_gb
    assert names == ("cpu", "gpu", "mem_gb")
    np.testing.assert_array_equal(usage[0], [2 * 2 + 3, 2, 1])
    np.testing.assert_array_equal(usage[1], [3, 0, 1])


def test_allocation_drops_empty_placements() -> None:
    alloc = Allocation(4, {"a": Placement(((0, 1),)), "b": Placement(())})
    assert alloc.slot == 4 and list(alloc) == ["a"] and len(alloc) == 1
    assert "b" not in alloc


def test_plan_reports_its_first_and_last_used_slots() -> None:
    plan = Plan({3: Placement(((0, 1),)), 5: Placement(((0, 2),)), 7: Placement(())})
    assert plan.first_slot == 3 and plan.completion_slot == 5
    assert plan.at(5) == Placement(((0, 2),)) and plan.at(4) is None
    assert Plan({}).completion_slot is None


@pytest.mark.parametrize(
    ("build", "error"),
    [
        pytest.param(
            lambda: Admission(Decision.ADMIT, reject_kind=RejectKind.CAPACITY),
            "admitted job cannot carry a reject_kind",
            id="admit-with-kind",
        ),
        pytest.param(
            lambda: Admission(Decision.REJECT, plan=Plan({})),
            "rejected job cannot carry a plan",
            id="reject-with-plan",
        ),
        pytest.param(lambda: Quote(-1.0), "'quote.total'", id="negative-quote"),
        pytest.param(lambda: Quote(math.nan), "'quote.total'", id="nan-quote"),
    ],
)
def test_admission_and_quote_invariants(build: Callable[[], object], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        build()


def test_admission_queries() -> None:
    assert Admission.admit(quote=Quote(2.0)).is_admitted()
    rejected = Admission(Decision.REJECT)
    assert not rejected.is_admitted() and rejected.reject_kind is RejectKind.CAPACITY
    assert Admission.reject(RejectKind.INFEASIBLE).reject_kind is RejectKind.INFEASIBLE


@pytest.mark.parametrize("state", list(JobState), ids=lambda s: s.value)
def test_job_states_are_final_or_active_or_pending(state: JobState) -> None:
    final = state in (JobState.DONE, JobState.REJECTED, JobState.FAILED, JobState.CANCELLED)
    assert state.is_final is final
    assert state.is_active is (not final and state is not JobState.PENDING)


def test_spec_error_at_prefixes_location_and_field() -> None:
    err = SpecError("epochs", 0, "an integer >= 1").at("jobs.yaml:3", field_prefix="jobs[2]")
    assert err.field == "jobs[2].epochs"
    assert str(err).startswith("jobs.yaml:3: field 'jobs[2].epochs'")


# Placement helpers (admission checks and ledgers) ----------------------------------------
def test_ledger_place_is_all_or_nothing(tiny_cluster: Cluster) -> None:
    job = JobSpec("j", chunks=8, worker=ResourceVector({"gpu": 1}), ps=ResourceVector({"cpu": 1}))
    ledger = CapacityLedger(tiny_cluster)
    assert ledger.place(job, Placement(((0, 3),), ((1, 1),)))
    before = ledger.free.copy()
    assert not ledger.place(job, Placement(((0, 2),), ((1, 1),)))  # 2 GPUs, 1 left
    np.testing.assert_array_equal(ledger.free, before)
    ledger.release(job, Placement(((0, 3),), ((1, 1),)))
    np.testing.assert_array_equal(ledger.free, tiny_cluster.capacity)


def test_ledger_fits_and_counts_exactly_at_the_edge(tiny_cluster: Cluster) -> None:
    """Half-GPU tasks on a 4-GPU server: 8 fit, the 9th does not, and after 7 are taken one
    more fits. A slack of a whole unit in either check would place a task on capacity that
    is not there."""
    demand = ResourceVector({"gpu": 0.5, "cpu": 1}).to_array(tiny_cluster.resource_names)
    ledger = CapacityLedger(tiny_cluster)
    assert ledger.fits(0, demand, 8) and not ledger.fits(0, demand, 9)
    assert ledger.max_count(0, demand) == 8
    ledger.take(0, demand, 7)
    assert ledger.fits(0, demand) and not ledger.fits(0, demand, 2)
    assert ledger.max_count(0, demand) == 1
    ledger.take(0, demand)
    assert not ledger.fits(0, demand) and ledger.max_count(0, demand) == 0


@pytest.mark.parametrize(
    ("job", "ever"),
    [
        pytest.param(JobSpec("fits", worker=ResourceVector({"gpu": 2})), True, id="fits"),
        pytest.param(
            JobSpec("gpu-type", worker=ResourceVector({"gpu": 1}), gpu_type="K80"),
            False,
            id="no-such-gpu-type",
        ),
        pytest.param(
            JobSpec("big", worker=ResourceVector({"gpu": 5})), False, id="too-big-for-any-server"
        ),
        pytest.param(
            JobSpec("min", chunks=5, min_workers=5, worker=ResourceVector({"gpu": 1})),
            False,
            id="min-workers-exceed-gpus",
        ),
    ],
)
def test_can_ever_run(tiny_cluster: Cluster, job: JobSpec, ever: bool) -> None:
    assert can_ever_run(job, tiny_cluster) is ever
    assert EmptyFit()(job, tiny_cluster) is ever


def test_empty_fit_answers_per_shape_and_per_cluster(tiny_cluster: Cluster) -> None:
    """The memo keys on everything the answer depends on: a job of another count or GPU
    type, or a new cluster (agents joined), is checked anew, not given a stale answer."""
    fits = EmptyFit()
    four = JobSpec("a", chunks=4, min_workers=4, worker=ResourceVector({"gpu": 1}))
    assert fits(four, tiny_cluster)
    assert not fits(four, tiny_cluster, 5)  # 5 workers on 4 GPUs
    assert fits(
        JobSpec("b", chunks=4, min_workers=4, worker=ResourceVector({"gpu": 1})), tiny_cluster
    )
    assert not fits(
        JobSpec("c", chunks=4, min_workers=4, worker=ResourceVector({"gpu": 1}), gpu_type="K80"),
        tiny_cluster,
    )
    smaller = Cluster(
        (
            Server("g", ResourceVector({"gpu": 2, "cpu": 16, "mem_gb": 64}), pool=Pool.WORKER),
            *tiny_cluster.servers[1:],
        ),
        tiny_cluster.topology,
    )
    assert not fits(four, smaller)
    assert fits(four, tiny_cluster)


def test_pack_honours_pools(tiny_cluster: Cluster) -> None:
    """PSs go only to servers that host PSs, workers only to worker servers."""
    job = JobSpec(
        "j", chunks=2, worker=ResourceVector({"gpu": 1, "cpu": 1}), ps=ResourceVector({"cpu": 1})
    )
    placement = pack(job, 2, 1, CapacityLedger(tiny_cluster))
    assert placement is not None
    hosts_ps = {i for i, s in enumerate(tiny_cluster.servers) if s.pool is not Pool.WORKER}
    hosts_workers = {i for i, s in enumerate(tiny_cluster.servers) if s.pool is not Pool.PS}
    assert {s for s, _ in placement.ps} <= hosts_ps
    assert {s for s, _ in placement.workers} <= hosts_workers
