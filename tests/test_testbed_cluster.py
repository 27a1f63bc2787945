"""The testbed end to end: a real controller (gRPC on loopback), real agent processes,
real trainers, a real SQLite state file."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from cluster_helpers import agents, all_final, controller, mlp_job, stub, wait_for
from prometheus_client.parser import text_string_to_metric_families

from mlsched.cli import main
from mlsched.controller.config import ControllerConfig
from mlsched.controller.server import Controller
from mlsched.core.errors import SpecError
from mlsched.v1 import jobs_pb2

pytestmark = pytest.mark.processes


def _freshest_heartbeats(address: str) -> float:
    """The oldest of the agents' last-heartbeat ages, now."""
    status = stub(address).GetClusterStatus(jobs_pb2.GetClusterStatusRequest(), timeout=5)
    return max(a.last_heartbeat_age_s for a in status.agents)


def test_agents_register_and_heartbeat(tmp_path: Path) -> None:
    ctl = controller(tmp_path, min_agents=2)
    try:
        with agents(ctl.address, tmp_path, 2):
            wait_for(lambda: len(ctl.agents.alive()) == 2, 30, "two agents")
            wait_for(lambda: ctl.engine is not None, 10, "the engine")
            status = stub(ctl.address).GetClusterStatus(
                jobs_pb2.GetClusterStatusRequest(), timeout=5
            )
            assert sorted(a.agent_id for a in status.agents) == ["agent0", "agent1"]
            assert all(a.alive for a in status.agents)
            assert status.agents[0].capacity.amounts["gpu"] == 2
            # Heartbeats keep coming (1-s interval): a fresh one is seen from each agent.
            wait_for(lambda: _freshest_heartbeats(ctl.address) < 3, 30, "fresh heartbeats")
            # The registration is in the state file.
            assert sorted(a["agent_id"] for a in ctl.store.agents()) == ["agent0", "agent1"]
    finally:
        ctl.stop()


class _OrderedLock:
    """The executor's lock, checked: it must never be taken by a thread that holds the
    store's lock (the executor writes runs to the store under its own lock, so the other
    order deadlocks a heartbeat against the slot loop)."""

    def __init__(self, inner: Any, store_lock: Any) -> None:
        self.inner, self.store_lock, self.violations = inner, store_lock, 0

    def acquire(self, *args: Any, **kwargs: Any) -> bool:
        if self.store_lock._is_owned():
            self.violations += 1
        return bool(self.inner.acquire(*args, **kwargs))

    def release(self) -> None:
        self.inner.release()

    def __enter__(self) -> _OrderedLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value, parsed with prometheus_client's own parser."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_listen_is_checked() -> None:
    with pytest.raises(SpecError, match="metrics_listen"):
        ControllerConfig(metrics_listen="9100").validate()


#: Enough work that each job spans more than one 5-s slot on a fast machine too: with 60
#: units both jobs ran and finished inside their first slot, and the replay below had no
#: allocation left to compare.
UNITS = 600


def test_submitted_jobs_train_for_real_and_report_measurements(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ctl = controller(tmp_path, min_agents=2, slot_seconds=5.0, metrics_listen="127.0.0.1:0")
    lock = ctl.executor._lock = _OrderedLock(ctl.executor._lock, ctl.store._lock)  # type: ignore[assignment]
    try:
        with agents(ctl.address, tmp_path, 2):
            ids = ctl.submit(
                yaml.safe_dump(
                    [
                        mlp_job("ring", units=UNITS, requested_workers=2),
                        mlp_job("ps", arch="ps", units=UNITS, requested_workers=1),
                    ]
                )
            )
            assert ids == ["ring", "ps"]
            wait_for(lambda: all_final(ctl), 150, "both jobs to finish", every=0.5)
            jobs = {j.job_id: j for j in ctl.jobs()}
            for job_id in ids:
                j = jobs[job_id]
                assert j.state == "done", (job_id, j.state, j.reason)
                assert j.progress == j.total_work == UNITS
                assert j.iterations > 0
                assert j.measured_iteration_s > 0  # the closed loop saw real iterations
            # Measurements and decisions were recorded per slot.
            rows = ctl.store.measurements("ring")
            assert rows and all(r["compute_s"] > 0 and r["iterations"] > 0 for r in rows)
            # Achieved communication throughput (bytes over comm seconds) and the NIC of the
            # agents' address (loopback here), read every slot: a host's rate needs its
            # reading of the slot before and a heartbeat since, which a starved agent (make
            # test's other worker at full load) can miss for a slot; never another host's.
            assert all(r["comm_gbps"] > 0 for r in rows)
            hosts = [({a for a, _, _ in r["layout"]}, set(r["nic_gbps"])) for r in rows]
            assert all(nic <= layout for layout, nic in hosts)
            assert sum(nic == layout for layout, nic in hosts) * 2 >= len(hosts), hosts
            assert {d["job_id"] for d in ctl.store.decisions()} == {"ring", "ps"}
            # The trainers checkpointed at the last step in the shared checkpoint root.
            assert (tmp_path / "ckpt" / "ring" / "latest").exists()
            status = stub(ctl.address).GetClusterStatus(
                jobs_pb2.GetClusterStatusRequest(), timeout=5
            )
            assert status.model_error_samples > 0
            assert lock.violations == 0  # the store's lock was never held around the executor's
            # The Prometheus endpoint says the same, scraped over HTTP.
            assert ctl.metrics is not None
            scraped = scrape(f"http://127.0.0.1:{ctl.metrics.port}/metrics")
            assert scraped[("mlsched_jobs", (("state", "done"),))] == 2
            assert scraped[("mlsched_jobs", (("state", "pending"),))] == 0
            assert scraped[("mlsched_agents_alive", ())] == 2
            assert scraped[("mlsched_slot_duration_seconds_count", ())] >= 1
            calls = ("call", "on_arrival")
            assert scraped[("mlsched_decision_seconds_count", (calls,))] == 2
            assert scraped[("mlsched_heartbeat_handling_seconds_count", ())] > 0
            assert 0 < scraped[("mlsched_model_error_samples", ())] == status.model_error_samples
            assert ("mlsched_revenue", ()) in scraped
            _described(ctl, "ring", capsys)
            _replays_the_same(tmp_path / "state.db")
    finally:
        ctl.stop()


def _described(ctl: Controller, job_id: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``mlsched describe`` tells a finished job's story as the store has it."""
    capsys.readouterr()
    assert main(["describe", job_id, "-o", "json", "--controller", ctl.address]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"]["state"] == "done" and doc["owner"] == "admin"
    assert doc["spec"]["job_id"] == job_id and doc["run"]["generations"] >= 1
    assert doc["measurements_total"] == len(ctl.store.measurements(job_id)) > 0
    assert doc["decisions"][0]["admitted"] and doc["allocations"]
    assert doc["progress"][-1]["finished"] and doc["audit"][0]["action"] == "submit"
    assert main(["describe", job_id, "--limit", "1", "--controller", ctl.address]) == 0
    text = capsys.readouterr().out
    assert f"Job:        {job_id}" in text and "Owner:      admin" in text
    assert "finished" in text and "s/it (model" in text
    assert main(["describe", "nope", "--controller", ctl.address]) == 2


def _replays_the_same(db: Path) -> None:
    """The run's stored measurements fed to the engine: the same admissions and allocations
    slot by slot; with a job's recorded finish taken out, no longer (the comparison can
    fail)."""
    import sqlite3

    from mlsched.controller.replay_state import replay_state

    outcome = replay_state(db)
    assert outcome.first_difference is None, outcome.describe()
    # Allocations are the placements held after each slot; each job's UNITS span more
    # than one slot, so both are held after some slot, and the comparison covers both
    # jobs' layouts. The tampered replay below shows the comparison can fail.
    held = {job for d in outcome.replayed for job, _ in d.allocations}
    assert outcome.slots >= 2 and held == {"ring", "ps"}, outcome.describe()
    assert sum(len(d.admissions) for d in outcome.replayed) == 2
    tampered = db.with_name("tampered.db")
    with sqlite3.connect(db) as src, sqlite3.connect(tampered) as dst:
        src.backup(dst)
        dst.execute("UPDATE progress SET units = 0, finished = 0 WHERE job_id = 'ps'")
    assert replay_state(tampered).first_difference is not None


def test_malformed_job_spec_is_rejected_with_the_field_named(tmp_path: Path) -> None:
    ctl = controller(tmp_path)
    try:
        s = stub(ctl.address)
        bad = yaml.safe_dump([mlp_job("a"), mlp_job("b", batch_size=0)])
        with pytest.raises(grpc.RpcError) as err:
            s.SubmitJobs(jobs_pb2.SubmitJobsRequest(document=bad), timeout=5)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "jobs[1].batch_size" in err.value.details()
        with pytest.raises(grpc.RpcError) as err:
            s.SubmitJobs(
                jobs_pb2.SubmitJobsRequest(document=yaml.safe_dump([mlp_job("c", model="nope")])),
                timeout=5,
            )
        assert "jobs[0].model" in err.value.details()
        with pytest.raises(grpc.RpcError) as err:
            doc = yaml.safe_dump([mlp_job("d", training={"lr": -1})])
            s.SubmitJobs(jobs_pb2.SubmitJobsRequest(document=doc), timeout=5)
        assert "jobs[0].training.lr" in err.value.details()
        # Nothing of a rejected document was admitted; a good one still goes in after.
        assert s.ListJobs(jobs_pb2.ListJobsRequest(), timeout=5).jobs == []
        good = s.SubmitJobs(
            jobs_pb2.SubmitJobsRequest(document=yaml.safe_dump([mlp_job("a")])), timeout=5
        )
        assert list(good.job_ids) == ["a"]
        with pytest.raises(grpc.RpcError) as err:
            s.SubmitJobs(
                jobs_pb2.SubmitJobsRequest(document=yaml.safe_dump([mlp_job("a")])), timeout=5
            )
        assert "job_id" in err.value.details()
    finally:
        ctl.stop()


def test_unauthenticated_rpc_is_rejected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ctl = controller(tmp_path, token="s3cret")
    try:
        with pytest.raises(grpc.RpcError) as err:
            stub(ctl.address).ListJobs(jobs_pb2.ListJobsRequest(), timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as err:
            stub(ctl.address, "wrong").ListJobs(jobs_pb2.ListJobsRequest(), timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert stub(ctl.address, "s3cret").ListJobs(jobs_pb2.ListJobsRequest(), timeout=5)
        # The CLI says what went wrong.
        assert main(["status", "--controller", ctl.address]) == 1
        assert "UNAUTHENTICATED" in capsys.readouterr().err
        assert main(["status", "--controller", ctl.address, "--token", "s3cret", "--json"]) == 0
        assert "cluster" in json.loads(capsys.readouterr().out)
    finally:
        ctl.stop()


def test_controller_refuses_to_listen_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    from mlsched.controller.server import Controller, ControllerConfig

    with pytest.raises(SpecError, match="--token"):
        Controller(ControllerConfig(listen="0.0.0.0:0", db=str(tmp_path / "s.db")))
    assert main(["controller", "--listen", "0.0.0.0:0", "--db", str(tmp_path / "s.db")]) == 2


def test_cli_submit_status_cancel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ctl = controller(tmp_path)  # no agents: jobs wait, so cancel finds them pending
    try:
        spec = tmp_path / "jobs.yaml"
        spec.write_text(yaml.safe_dump({"jobs": [mlp_job("x"), mlp_job("y")]}))
        assert main(["submit", str(spec), "--controller", ctl.address]) == 0
        assert "submitted x" in capsys.readouterr().out
        assert main(["submit", str(spec), "--dry-run", "--controller", ctl.address]) == 2
        assert "job_id" in capsys.readouterr().err  # x and y are taken: checked, not stored
        spec2 = tmp_path / "more.yaml"
        spec2.write_text(yaml.safe_dump([mlp_job("w")]))
        assert main(["submit", str(spec2), "--dry-run", "--controller", ctl.address]) == 0
        assert "valid (dry run, not submitted) w" in capsys.readouterr().out
        assert [j.job_id for j in ctl.jobs()] == ["x", "y"]  # nothing stored
        assert main(["status", "--controller", ctl.address]) == 0
        out = capsys.readouterr().out
        assert "x" in out and "pending" in out
        assert main(["status", "-o", "wide", "--controller", ctl.address]) == 0
        wide = capsys.readouterr().out.splitlines()
        header = next(line for line in wide if "arrival" in line)
        assert "utility" in header and "owner" in header
        assert main(["status", "-o", "yaml", "--controller", ctl.address]) == 0
        assert [j["jobId"] for j in yaml.safe_load(capsys.readouterr().out)["jobs"]] == ["x", "y"]
        argv = ["status", "x", "-o", "json", "--watch", "0.1", "--count", "3"]
        assert main([*argv, "--controller", ctl.address]) == 0
        views = capsys.readouterr().out.splitlines()  # one JSON document a line, per view
        assert [json.loads(v)["jobId"] for v in views] == ["x"] * 3
        assert main(["cancel", "x", "--controller", ctl.address]) == 0
        assert "cancel" in capsys.readouterr().out
        assert main(["cancel", "nope", "--controller", ctl.address]) == 2
        assert "NOT_FOUND" in capsys.readouterr().err
        bad = tmp_path / "bad.yaml"
        bad.write_text(yaml.safe_dump([mlp_job("z", epochs=0)]))
        assert main(["submit", str(bad), "--controller", ctl.address]) == 2
        assert "jobs[0].epochs" in capsys.readouterr().err
    finally:
        ctl.stop()
