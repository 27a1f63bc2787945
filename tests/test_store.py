"""The controller's SQLite state store: round trips, restart recovery, atomicity, threads."""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mlsched.controller.store import SCHEMA_VERSION, SchemaVersionError, Store, StoreError

PLACEMENT = {"workers": {"gpu0": 2}, "ps": {"ps0": 1}}
MEASUREMENT: dict[str, Any] = {
    "placement": PLACEMENT,
    "iterations": 40,
    "iteration_s": 0.25,
    "compute_s": 0.2,
    "comm_s": 0.05,
    "bytes_sent": 1_000_000,
    "bytes_recv": 2_000_000,
    "predicted_s": None,
}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "controller.db"


@pytest.fixture
def store(db: Path) -> Any:
    s = Store(db)
    yield s
    s.close()


def fill(s: Store) -> None:
    """One of everything, as a controller writes it over two slots."""
    s.set_meta("slot", 2)
    s.set_meta("policy", {"name": "pd", "eps": 0.1})
    s.upsert_agent("a1", {"gpu": 4, "addr": "10.0.0.1:7000"})
    s.upsert_agent("a2", {"gpu": 2}, alive=False)
    s.add_job("j1", {"job_id": "j1", "chunks": [1, 2]}, submitted_at=100.0)
    s.add_job("j2", {"job_id": "j2"}, submitted_at=101.5)
    s.update_job("j1", {"state": "running", "done": 3.5})
    s.add_decision(0, "j1", True, "admitted", {"price": 1.5, "valuation": 3.0})
    s.add_decision(0, "j2", False, "price above valuation", None)
    s.add_allocations(1, [("j1", PLACEMENT)])
    s.add_progress(1, "j1", 3.5, False, 0.7)
    s.add_measurement(1, "j1", {**MEASUREMENT, "predicted_s": 0.3})
    s.save_run("j1", {"generation": 2, "placement": {"a1": 2}, "ports": [29500], "step": 140})


def check_filled(s: Store) -> None:
    assert s.get_meta("slot") == 2
    assert s.get_meta("policy") == {"name": "pd", "eps": 0.1}
    assert s.get_meta("schema_version") == SCHEMA_VERSION
    agents = s.agents()
    assert [(a["agent_id"], a["alive"]) for a in agents] == [("a1", True), ("a2", False)]
    assert agents[0]["info"] == {"gpu": 4, "addr": "10.0.0.1:7000"}
    jobs = s.jobs()
    assert [j["job_id"] for j in jobs] == ["j1", "j2"]
    assert jobs[0]["spec"] == {"job_id": "j1", "chunks": [1, 2]}
    assert jobs[0]["state"] == {"state": "running", "done": 3.5}
    assert jobs[0]["status"] == "running"
    assert (jobs[1]["state"], jobs[1]["status"], jobs[1]["submitted_at"]) == ({}, None, 101.5)
    assert [(d["job_id"], d["admitted"], d["quote"]) for d in s.decisions()] == [
        ("j1", True, {"price": 1.5, "valuation": 3.0}),
        ("j2", False, None),
    ]
    assert [(a["slot"], a["job_id"], a["placement"]) for a in s.allocations()] == [
        (1, "j1", PLACEMENT)
    ]
    (p,) = s.progress()
    assert (p["slot"], p["job_id"], p["units"], p["finished"], p["restart_s"]) == (
        1,
        "j1",
        3.5,
        False,
        0.7,
    )
    assert s.measurements() == [{"slot": 1, "job_id": "j1", **MEASUREMENT, "predicted_s": 0.3}]
    assert s.runs() == {
        "j1": {"generation": 2, "placement": {"a1": 2}, "ports": [29500], "step": 140}
    }


def test_round_trip_every_method(store: Store, db: Path) -> None:
    assert store.path == str(db)
    fill(store)
    check_filled(store)
    assert store.has_job("j1") and not store.has_job("nope")


def test_reopen_sees_everything(db: Path) -> None:
    s = Store(db)
    fill(s)
    s.close()
    again = Store(db)
    try:
        check_filled(again)
        # A restarted controller keeps appending after what it found.
        again.add_job("j3", {}, submitted_at=200.0)
        assert [j["job_id"] for j in again.jobs()] == ["j1", "j2", "j3"]
    finally:
        again.close()


def test_file_settings(store: Store) -> None:
    conn = store._db()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 0
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    for table in ("decisions", "allocations", "progress", "measurements"):
        assert {f"{table}_job", f"{table}_slot"} <= indexes


def test_memory_store() -> None:
    with Store(":memory:") as s:
        fill(s)
        check_filled(s)


def test_meta_default_and_overwrite(store: Store) -> None:
    assert store.get_meta("missing") is None
    assert store.get_meta("missing", 7) == 7
    store.set_meta("k", [1, "x", None])
    store.set_meta("k", {"nested": [1.5]})
    assert store.get_meta("k") == {"nested": [1.5]}
    with pytest.raises(ValueError, match="schema_version"):
        store.set_meta("schema_version", 99)


def test_agent_seq_stable_across_upserts(store: Store) -> None:
    for name in ("c", "a", "b"):
        store.upsert_agent(name, {"v": 0})
    first = {a["agent_id"]: (a["seq"], a["registered_at"]) for a in store.agents()}
    store.upsert_agent("a", {"v": 1}, alive=False)
    store.upsert_agent("c", {"v": 2})
    store.set_agent_alive("a", True)
    store.set_agent_alive("b", False)
    agents = store.agents()
    assert [a["agent_id"] for a in agents] == ["c", "a", "b"]
    assert {a["agent_id"]: (a["seq"], a["registered_at"]) for a in agents} == first
    assert [(a["info"], a["alive"]) for a in agents] == [
        ({"v": 2}, True),
        ({"v": 1}, True),
        ({"v": 0}, False),
    ]
    assert all(a["updated_at"] >= a["registered_at"] for a in agents)
    with pytest.raises(KeyError, match="ghost"):
        store.set_agent_alive("ghost", True)


def test_duplicate_job_rejected(store: Store) -> None:
    store.add_job("j", {"v": 1}, submitted_at=1.0)
    with pytest.raises(ValueError, match="'j' already exists"):
        store.add_job("j", {"v": 2}, submitted_at=2.0)
    (job,) = store.jobs()
    assert (job["spec"], job["submitted_at"]) == ({"v": 1}, 1.0)
    with pytest.raises(KeyError, match="ghost"):
        store.update_job("ghost", {"state": "running"})


def test_history_filters(store: Store) -> None:
    with store.transaction():
        for slot in range(3):
            for job in ("x", "y"):
                store.add_decision(slot, job, slot % 2 == 0, f"r{slot}", {"slot": slot})
                store.add_progress(slot, job, float(slot), slot == 2, 0.0)
                store.add_measurement(slot, job, {**MEASUREMENT, "iterations": slot})
            store.add_allocations(slot, [("x", {"s": slot}), ("y", {"s": slot})])
    assert [d["slot"] for d in store.decisions("x")] == [0, 1, 2]
    assert [p["finished"] for p in store.progress("y")] == [False, False, True]
    assert [m["iterations"] for m in store.measurements("y")] == [0, 1, 2]
    assert len(store.decisions()) == len(store.progress()) == len(store.measurements()) == 6
    assert [a["job_id"] for a in store.allocations(slot=1)] == ["x", "y"]
    assert [a["slot"] for a in store.allocations(job_id="y")] == [0, 1, 2]
    assert store.allocations(slot=2, job_id="x") == [
        {
            "slot": 2,
            "job_id": "x",
            "placement": {"s": 2},
            "recorded_at": pytest.approx(time.time(), abs=60),
        }
    ]
    assert store.allocations(slot=0, job_id="nope") == []
    store.add_allocations(5, [])
    assert store.allocations(slot=5) == []


def test_numpy_values_stored_as_numbers(store: Store) -> None:
    np = pytest.importorskip("numpy")
    store.add_measurement(0, "j", {"iterations": np.int64(3), "iteration_s": np.float32(0.5)})
    store.set_meta("vec", np.arange(3))
    assert store.measurements()[0]["iterations"] == 3
    assert store.get_meta("vec") == [0, 1, 2]
    with pytest.raises(TypeError, match="cannot store"):
        store.set_meta("bad", object())


def test_runs_save_replace_delete(store: Store) -> None:
    store.save_run("a", {"gen": 1})
    store.save_run("b", {"gen": 1})
    store.save_run("a", {"gen": 2})
    assert store.runs() == {"a": {"gen": 2}, "b": {"gen": 1}}
    assert list(store.runs()) == ["a", "b"]
    assert store.run("a") == {"gen": 2} and store.run("never-saved") is None
    store.delete_run("a")
    store.delete_run("never-saved")
    assert store.runs() == {"b": {"gen": 1}} and store.run("a") is None


def test_transaction_rollback_leaves_nothing(db: Path) -> None:
    s = Store(db)
    s.add_job("kept", {}, submitted_at=0.0)
    with pytest.raises(RuntimeError, match="boom"), s.transaction():
        s.add_job("lost", {}, submitted_at=1.0)
        s.update_job("kept", {"state": "running"})
        s.add_allocations(0, [("lost", PLACEMENT)])
        s.add_measurement(0, "lost", MEASUREMENT)
        s.save_run("lost", {"gen": 1})
        s.set_meta("slot", 1)
        raise RuntimeError("boom")
    # A failing statement inside add_allocations undoes the rows before it too.
    with pytest.raises(sqlite3.IntegrityError):
        s.add_allocations(0, [("ok", {}), (None, {})])  # type: ignore[list-item]
    s.close()
    s = Store(db)
    try:
        assert [(j["job_id"], j["state"]) for j in s.jobs()] == [("kept", {})]
        assert s.allocations() == s.measurements() == []
        assert s.runs() == {}
        assert s.get_meta("slot") is None
        # The store is usable after the rollback.
        s.add_job("after", {}, submitted_at=2.0)
        assert s.has_job("after")
    finally:
        s.close()


def test_nested_transactions_join_the_outer(store: Store) -> None:
    with store.transaction():
        store.add_progress(0, "a", 1.0, False, 0.0)
        with store.transaction():
            store.add_progress(0, "b", 1.0, False, 0.0)
        # An inner block that fails undoes only its own writes.
        with pytest.raises(KeyError), store.transaction():
            store.add_progress(0, "c", 1.0, False, 0.0)
            raise KeyError("inner")
        # Nothing is committed before the outer block ends: another connection sees nothing.
        other = sqlite3.connect(store.path)
        assert other.execute("SELECT COUNT(*) FROM progress").fetchone()[0] == 0
        other.close()
    assert [p["job_id"] for p in store.progress()] == ["a", "b"]
    with pytest.raises(ValueError), store.transaction():
        store.add_progress(1, "d", 1.0, False, 0.0)
        with store.transaction():
            store.add_progress(1, "e", 1.0, False, 0.0)
        raise ValueError("outer")
    assert [p["job_id"] for p in store.progress()] == ["a", "b"]


def test_schema_version_mismatch(db: Path) -> None:
    Store(db).close()
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaVersionError) as info:
        Store(db)
    message = str(info.value)
    assert str(db) in message
    assert "99" in message and str(SCHEMA_VERSION) in message
    assert (info.value.found, info.value.expected) == (99, SCHEMA_VERSION)


def test_foreign_database_and_garbage_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE unrelated (x)")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaVersionError, match=re.escape(str(other))):
        Store(other)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match=re.escape(str(garbage))):
        Store(garbage)


def test_closed_store_raises(db: Path) -> None:
    s = Store(db)
    s.close()
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.jobs()


def test_concurrent_writes_all_land(store: Store) -> None:
    threads_n, per_thread = 4, 200
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        try:
            for i in range(per_thread):
                store.add_progress(i, f"job{k}", float(i), i == per_thread - 1, 0.0)
                if i % 50 == 0:
                    with store.transaction():
                        store.set_meta(f"t{k}", i)
                        store.progress(f"job{k}")
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    assert len(store.progress()) == threads_n * per_thread
    for k in range(threads_n):
        rows = store.progress(f"job{k}")
        assert [r["slot"] for r in rows] == list(range(per_thread))
        assert rows[-1]["finished"]


def test_many_measurements_in_one_transaction_are_all_kept(store: Store) -> None:
    """Their speed is benchmarks/store_writes.py's business; here, that none is lost."""
    with store.transaction():
        for i in range(1000):
            store.add_measurement(i // 10, f"j{i % 10}", {**MEASUREMENT, "iterations": i})
    assert len(store.measurements()) == 1000
    assert len(store.measurements("j3")) == 100


def test_a_slot_of_many_jobs_in_one_statement_each_reads_back_in_order(store: Any) -> None:
    """The slot boundary's batched writes (measurements, progress, job states) read back
    row for row as the one-at-a-time writes do, and an unknown job id in a state batch
    is named and changes nothing."""
    for j in ("a", "b", "c"):
        store.add_job(j, {"job_id": j}, submitted_at=1.0)
    rows = [(j, {**MEASUREMENT, "iterations": k}) for k, j in enumerate("abc")]
    with store.transaction():
        store.add_measurements(4, rows)
        store.add_progress_rows(4, [("a", 1.5, False, 0.0), ("c", 9.0, True, 2.5)])
        store.update_jobs([("a", {"state": "running"}), ("b", {"state": "paused"})])
    got = [m for m in store.measurements() if m["slot"] == 4]
    assert [(m["job_id"], m["iterations"]) for m in got] == [("a", 0), ("b", 1), ("c", 2)]
    progress = store.progress()
    assert [(p["job_id"], p["units"], p["finished"], p["restart_s"]) for p in progress] == [
        ("a", 1.5, False, 0.0),
        ("c", 9.0, True, 2.5),
    ]
    states = {j["job_id"]: j["state"] for j in store.jobs()}
    assert states["a"] == {"state": "running"} and states["b"] == {"state": "paused"}
    with pytest.raises(KeyError, match="'zz'"):
        store.update_jobs([("c", {"state": "done"}), ("zz", {"state": "done"})])
    assert {j["job_id"]: j["state"] for j in store.jobs()}["c"] != {"state": "done"}
    store.add_measurements(5, [])  # an empty slot writes nothing and does not fail
    assert not [m for m in store.measurements() if m["slot"] == 5]
