"""A measurement's one stored form: written by the controller after a slot, read back by a
restarted controller (its runtime model replays them) and by the emulation's report.

Plausible bugs this catches: a field dropped on the way into the store or out of it (bytes,
NIC rates, the measured communication throughput), a damaged row that stops a restart
instead of costing its sample, a layout read back onto the wrong servers, and a replay that
observes nothing (the restarted model predicts as if it had never measured).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mlsched.controller.measurement_rows import (
    measurement_from_row,
    measurement_row,
    replay,
    row_layout,
)
from mlsched.controller.runs import Layout
from mlsched.controller.store import Store
from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.perfmodel.base import Measurement, NicThroughput
from mlsched.perfmodel.estimator import RuntimeEstimator

NAMES = ("gpu0", "ps0")  # tiny_cluster's servers


def _placement_of(layout: Layout) -> Placement | None:
    index = {name: i for i, name in enumerate(NAMES)}
    if any(a not in index for a, _, _ in layout):
        return None
    return Placement(
        tuple((index[a], w) for a, w, _ in layout if w),
        tuple((index[a], p) for a, _, p in layout if p),
    )


LAYOUT: Layout = (("gpu0", 1, 0), ("ps0", 0, 1))


def _measurement(job: JobSpec, slot: int, iteration_s: float) -> Measurement:
    placement = _placement_of(LAYOUT)
    assert placement is not None
    return Measurement(
        job_id=job.job_id,
        slot=slot,
        placement=placement,
        iterations=40.0,
        iteration_time_s=iteration_s,
        compute_time_s=iteration_s * 0.75,
        comm_time_s=iteration_s * 0.25,
        bytes_sent=1.5e6,
        bytes_recv=2.5e6,
        comm_gbps=0.8,
        nic={"gpu0": NicThroughput(0.5, 0.25)},
    )


def _stored(tmp_path: Path, rows: list[tuple[int, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The rows as a real state file gives them back."""
    store = Store(tmp_path / "state.db")
    try:
        for slot, job_id, row in rows:
            store.add_measurement(slot, job_id, row)
        return store.measurements()
    finally:
        store.close()


def test_a_measurement_survives_the_state_file_whole(tmp_path: Path, ps_job: JobSpec) -> None:
    m = _measurement(ps_job, 7, 0.2)
    [row] = _stored(tmp_path, [(7, ps_job.job_id, measurement_row(m, LAYOUT, 0.15))])
    assert row["predicted_s"] == 0.15 and row_layout(row) == LAYOUT
    assert measurement_from_row(row, _placement_of) == m


def test_a_layout_naming_an_unknown_agent_places_nothing(tmp_path: Path, ps_job: JobSpec) -> None:
    m = _measurement(ps_job, 1, 0.2)
    row = measurement_row(m, (("gone", 1, 0), ("ps0", 0, 1)), None)
    [stored] = _stored(tmp_path, [(1, ps_job.job_id, row)])
    assert measurement_from_row(stored, _placement_of) is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("layout", []),
        ("layout", [["gpu0", -1, 0]]),
        ("layout", [["gpu0", 1]]),
        ("layout", "gpu0"),
        ("iterations", "many"),
        ("iteration_s", float("nan")),
        ("compute_s", -1.0),
        ("comm_s", None),
        ("bytes_sent", True),
        ("comm_gbps", "fast"),
        ("nic_gbps", ["gpu0"]),
        ("nic_gbps", {"gpu0": [1.0]}),
    ],
)
def test_a_damaged_row_is_refused_with_its_field_named(
    tmp_path: Path, ps_job: JobSpec, field: str, value: Any
) -> None:
    row = {**measurement_row(_measurement(ps_job, 2, 0.2), LAYOUT, None), field: value}
    [stored] = _stored(tmp_path, [(2, ps_job.job_id, row)])
    with pytest.raises(ValueError, match=field):
        measurement_from_row(stored, _placement_of)


def test_a_replay_teaches_the_model_and_skips_only_damaged_rows(
    tmp_path: Path, tiny_cluster: Cluster, ps_job: JobSpec
) -> None:
    placement = _placement_of(LAYOUT)
    assert placement is not None
    prior = sum(RuntimeEstimator(tiny_cluster).iteration_parts(ps_job, placement))
    measured = 5 * prior  # far from the prior: the replayed model must have moved to it
    good = [
        (s, ps_job.job_id, measurement_row(_measurement(ps_job, s, measured), LAYOUT, None))
        for s in range(4)
    ]
    damaged = (4, ps_job.job_id, {**good[0][2], "iteration_s": "slow"})
    other = (5, "not-restored", good[0][2])  # a job the restart does not know
    rows = _stored(tmp_path, [*good, damaged, other])
    runtime = RuntimeEstimator(tiny_cluster)
    assert replay(rows, {ps_job.job_id: ps_job}, _placement_of, runtime) == (4, 1)
    runtime.refit()
    learnt = sum(runtime.iteration_parts(ps_job, placement))
    assert abs(learnt - measured) < 0.1 * measured < abs(prior - measured)
