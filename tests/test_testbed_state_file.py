"""A state file with rows that no longer load (damaged JSON, a spec this release refuses, a
run that does not parse): the controller starts, quarantines them with a reason, keeps every
other job, and a bad submission never reaches the file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import grpc
import pytest
import yaml
from cluster_helpers import controller, mlp_job, stub

from mlsched.controller.store import Store
from mlsched.core.errors import SpecError
from mlsched.v1 import jobs_pb2


def _seed(db: Path) -> None:
    store = Store(db)
    good = mlp_job("good", arch="ps")
    store.add_job("good", good, submitted_at=1.0)
    store.add_job("old-spec", {**good, "job_id": "old-spec", "batch_size": 1e20}, submitted_at=2.0)
    store.add_job("escape", {**good, "job_id": "../../x"}, submitted_at=3.0)
    store.add_job("torn", good, submitted_at=4.0)
    store.add_job("bad-state", {**good, "job_id": "bad-state"}, submitted_at=5.0)
    store.update_job("bad-state", {"state": "running", "progress": "lots"})
    store.add_job("bad-steps", {**good, "job_id": "bad-steps"}, submitted_at=5.5)
    store.update_job("bad-steps", {"state": "running", "iterations": "many"})
    store.add_job("bad-run", {**good, "job_id": "bad-run"}, submitted_at=6.0)
    store.save_run("bad-run", {"step": 1})
    store.close()
    with sqlite3.connect(db) as conn:  # damage that JSON cannot carry
        conn.execute("UPDATE jobs SET spec = '{\"job_id\": ' WHERE job_id = 'torn'")
        conn.execute("UPDATE runs SET run = '[[[' WHERE job_id = 'bad-run'")


def test_rows_that_no_longer_load_are_quarantined_not_fatal(tmp_path: Path) -> None:
    _seed(tmp_path / "state.db")
    ctl = controller(tmp_path)
    try:
        assert [j.job_id for j in ctl.jobs()] == ["good"]
        moved = {q["job_id"]: q["reason"] for q in ctl.store.quarantined()}
        assert set(moved) == {"old-spec", "escape", "torn", "bad-state", "bad-steps", "bad-run"}
        assert "iterations" in moved["bad-steps"]
        assert "batch_size" in moved["old-spec"]
        assert "job_id" in moved["escape"]
        assert "JSON" in moved["torn"] and "run" in moved["bad-run"]
        # The quarantined rows keep what was stored, for the operator to inspect.
        torn = next(q for q in ctl.store.quarantined() if q["job_id"] == "torn")
        assert torn["spec"] == '{"job_id": '
        # Their ids are free again: nothing else remembers them.
        assert ctl.submit(yaml.safe_dump([mlp_job("old-spec", arch="ps")])) == ["old-spec"]
    finally:
        ctl.stop()
    again = controller(tmp_path)  # and the next restart is clean
    try:
        assert sorted(j.job_id for j in again.jobs()) == ["good", "old-spec"]
        assert len(again.store.quarantined()) == 6
    finally:
        again.stop()


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"batches_per_chunk": 1e20}, "jobs[0].batches_per_chunk"),
        ({"chunks": 1e308}, "jobs[0].chunks"),
        ({"job_id": "a\x00b"}, "jobs[0].job_id"),
        ({"job_id": "x" * 1_000_000}, "jobs[0].job_id"),
    ],
)
def test_specs_that_once_poisoned_the_state_file_never_reach_it(
    tmp_path: Path, patch: dict[str, object], field: str
) -> None:
    ctl = controller(tmp_path)
    try:
        document = json.dumps([{**mlp_job("a", arch="ps"), **patch}])
        with pytest.raises(grpc.RpcError) as info:
            stub(ctl.address).SubmitJobs(jobs_pb2.SubmitJobsRequest(document=document), timeout=10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert field in (info.value.details() or "")
        assert len(info.value.details() or "") < 1000
        assert ctl.store.jobs() == []
        with pytest.raises(SpecError):
            ctl.submit(document)
    finally:
        ctl.stop()


def test_unknown_ids_of_any_size_get_a_short_not_found(tmp_path: Path) -> None:
    ctl = controller(tmp_path)
    try:
        for call, request in (
            (stub(ctl.address).GetJob, jobs_pb2.GetJobRequest(job_id="x" * 2_000_000)),
            (stub(ctl.address).CancelJob, jobs_pb2.CancelJobRequest(job_id="y" * 2_000_000)),
        ):
            with pytest.raises(grpc.RpcError) as info:
                call(request, timeout=10)
            assert info.value.code() == grpc.StatusCode.NOT_FOUND
            assert len(info.value.details() or "") < 300
    finally:
        ctl.stop()
