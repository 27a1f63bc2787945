"""The controller's durable state: one SQLite file.

Everything the gRPC controller must not lose lives here, so a restarted controller resumes
where it stopped instead of dropping an admitted job:

* ``agents``: every registered agent, in first-registration order (``seq``), with its
  advertised resources (``info``) and whether it is currently alive;
* ``jobs``: each submitted job's document as received (``spec``) and its current state;
* ``runs``: the executor's view of each running job (the current training generation:
  placement by agent, ports, steps), so training is re-attached or restarted from it;
* append-only history per slot: admission ``decisions`` (with the quoted price) as an audit
  trail, ``allocations``, ``progress`` and the closed loop's ``measurements`` (observed vs
  predicted iteration times) from which the runtime model is refitted after a restart;
* ``meta``: free key/value settings, including ``schema_version``;
* ``quarantine``: job rows that no longer loaded at a restart (a spec this release refuses,
  damaged JSON), moved aside whole with the reason, so that one bad row cannot stop the
  controller from starting and nothing is silently dropped.

Structured values are stored as JSON text; callers pass and receive plain dicts and lists
(tuples come back as lists). All methods are thread-safe: one connection guarded by a
re-entrant lock, and :meth:`Store.transaction` batches writes into one commit.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mlsched.core.errors import MlschedError

__all__ = ["SCHEMA_VERSION", "SchemaVersionError", "Store", "StoreError"]

#: Bumped whenever the tables change incompatibly; a file of another version is refused.
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS agents (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id      TEXT NOT NULL UNIQUE,
    info          TEXT NOT NULL,
    alive         INTEGER NOT NULL,
    registered_at REAL NOT NULL,
    updated_at    REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id       TEXT NOT NULL UNIQUE,
    spec         TEXT NOT NULL,
    state        TEXT NOT NULL,
    status       TEXT,
    submitted_at REAL NOT NULL,
    updated_at   REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS quarantine (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id         TEXT NOT NULL,
    spec           TEXT,
    state          TEXT,
    run            TEXT,
    reason         TEXT NOT NULL,
    quarantined_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    job_id     TEXT PRIMARY KEY,
    run        TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS decisions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    slot        INTEGER NOT NULL,
    job_id      TEXT NOT NULL,
    admitted    INTEGER NOT NULL,
    reason      TEXT NOT NULL,
    quote       TEXT,
    recorded_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS allocations (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    slot        INTEGER NOT NULL,
    job_id      TEXT NOT NULL,
    placement   TEXT NOT NULL,
    recorded_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS progress (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    slot        INTEGER NOT NULL,
    job_id      TEXT NOT NULL,
    units       REAL NOT NULL,
    finished    INTEGER NOT NULL,
    restart_s   REAL NOT NULL,
    recorded_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS measurements (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    slot        INTEGER NOT NULL,
    job_id      TEXT NOT NULL,
    row         TEXT NOT NULL,
    recorded_at REAL NOT NULL
);
"""

_HISTORY = ("decisions", "allocations", "progress", "measurements")


class StoreError(MlschedError):
    """The state file cannot be used (not a database, unreadable, wrong layout)."""


class SchemaVersionError(StoreError):
    """The state file was written with another schema version."""

    def __init__(self, path: str, found: Any, expected: int) -> None:
        self.path, self.found, self.expected = path, found, expected
        super().__init__(
            f"state file {path}: schema version {found}, but this mlsched uses schema version "
            f"{expected}; use a fresh --state file or the mlsched release that wrote it"
        )


def _jsonable(value: Any) -> Any:
    # numpy scalars and arrays reach the store from the engine; store them as plain numbers.
    for attr in ("tolist", "item"):
        convert = getattr(value, attr, None)
        if callable(convert):
            return convert()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"cannot store a {type(value).__name__} as JSON: {value!r}")


def _dump(value: Any) -> str:
    return json.dumps(value, default=_jsonable, separators=(",", ":"))


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class Store:
    """The controller's SQLite state (``path`` may be ``":memory:"`` for tests)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._lock = threading.RLock()
        self._depth = 0
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            # Autocommit mode: single statements commit on their own; transaction() batches.
            conn = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=10.0
            )
        except sqlite3.Error as err:
            raise StoreError(f"state file {self.path}: cannot open ({err})") from err
        conn.row_factory = sqlite3.Row
        self._conn: sqlite3.Connection | None = conn
        try:
            self._init_schema(conn)
        except sqlite3.DatabaseError as err:
            conn.close()
            self._conn = None
            raise StoreError(f"state file {self.path}: not a usable database ({err})") from err
        except BaseException:
            conn.close()
            self._conn = None
            raise

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        # WAL lets readers (another process with the file open) and the writer not block each
        # other; NORMAL keeps commits cheap and survives a controller crash (only a power loss
        # can drop the last commits).
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=OFF")
        with self.transaction():
            tables = {
                r[0]
                for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                if not r[0].startswith("sqlite_")
            }
            found: Any = None
            if "meta" in tables:
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                found = None if row is None else _load(row[0])
            if found is None and tables - {"meta"}:
                raise SchemaVersionError(self.path, "unknown (no schema_version)", SCHEMA_VERSION)
            if found is not None and found != SCHEMA_VERSION:
                raise SchemaVersionError(self.path, found, SCHEMA_VERSION)
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            for table in _HISTORY:
                conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_job ON {table} (job_id)")
                conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_slot ON {table} (slot)")
            if found is None:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                    (_dump(SCHEMA_VERSION),),
                )

    # -- connection and transactions -----------------------------------------------------

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"state file {self.path}: the store is closed")
        return self._conn

    def close(self) -> None:
        """Close the file (idempotent); later calls raise :class:`StoreError`."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Batch the writes of the block into one commit, or none if it raises.

        Nested blocks join the outer commit; an inner block that raises undoes only its own
        writes (a savepoint), so an outer block that catches the error can still commit.
        Other threads wait until the outermost block ends.
        """
        with self._lock:
            conn = self._db()
            savepoint = f"sp{self._depth}" if self._depth else None
            # IMMEDIATE takes the file's write lock up front, so a conflict with another process
            # shows at BEGIN rather than midway through the batch.
            conn.execute(f"SAVEPOINT {savepoint}" if savepoint else "BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if savepoint:
                    conn.execute(f"ROLLBACK TO {savepoint}")
                    conn.execute(f"RELEASE {savepoint}")
                else:
                    conn.execute("ROLLBACK")
                raise
            self._depth -= 1
            if savepoint:
                conn.execute(f"RELEASE {savepoint}")
                return
            try:
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _write(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._db().execute(sql, params)

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db().execute(sql, params).fetchall()

    # The tables other modules own (controller/tenancy.py) go through the same lock.
    execute = _write
    query = _read

    # -- meta ----------------------------------------------------------------------------

    def get_meta(self, key: str, default: Any = None) -> Any:
        rows = self._read("SELECT value FROM meta WHERE key = ?", (key,))
        return default if not rows else _load(rows[0]["value"])

    def set_meta(self, key: str, value: Any) -> None:
        if key == "schema_version":
            raise ValueError("meta key 'schema_version' is managed by the store")
        self._write(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, _dump(value)),
        )

    # -- agents --------------------------------------------------------------------------

    def upsert_agent(self, agent_id: str, info: dict[str, Any], *, alive: bool = True) -> None:
        """Register or refresh an agent; its ``seq`` (registration order) never changes."""
        now = time.time()
        self._write(
            "INSERT INTO agents (agent_id, info, alive, registered_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (agent_id) DO UPDATE SET "
            "info = excluded.info, alive = excluded.alive, updated_at = excluded.updated_at",
            (agent_id, _dump(info), int(alive), now, now),
        )

    def set_agent_alive(self, agent_id: str, alive: bool) -> None:
        cur = self._write(
            "UPDATE agents SET alive = ?, updated_at = ? WHERE agent_id = ?",
            (int(alive), time.time(), agent_id),
        )
        if cur.rowcount == 0:
            raise KeyError(f"unknown agent {agent_id!r}")

    def agents(self) -> list[dict[str, Any]]:
        return [
            {
                "agent_id": r["agent_id"],
                "seq": r["seq"],
                "info": _load(r["info"]),
                "alive": bool(r["alive"]),
                "registered_at": r["registered_at"],
                "updated_at": r["updated_at"],
            }
            for r in self._read("SELECT * FROM agents ORDER BY seq")
        ]

    # -- jobs ----------------------------------------------------------------------------

    def add_job(self, job_id: str, spec: dict[str, Any], *, submitted_at: float) -> None:
        """Record a submitted job (empty state); a job id already stored is a ValueError."""
        try:
            self._write(
                "INSERT INTO jobs (job_id, spec, state, status, submitted_at, updated_at) "
                "VALUES (?, ?, '{}', NULL, ?, ?)",
                (job_id, _dump(spec), float(submitted_at), time.time()),
            )
        except sqlite3.IntegrityError as err:
            raise ValueError(f"job {job_id!r} already exists in {self.path}") from err

    def has_job(self, job_id: str) -> bool:
        return bool(self._read("SELECT 1 FROM jobs WHERE job_id = ?", (job_id,)))

    def update_job(self, job_id: str, state: dict[str, Any]) -> None:
        """Replace the job's state; ``status`` mirrors ``state["state"]`` for queries."""
        self.update_jobs([(job_id, state)])

    def update_jobs(self, states: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """:meth:`update_job` for many jobs in one statement (a slot boundary updates every
        running job); all or none: an unknown job id raises KeyError and changes nothing."""
        now = time.time()
        params = [
            (_dump(state), None if state.get("state") is None else str(state["state"]), now, job_id)
            for job_id, state in states
        ]
        with self.transaction():
            db = self._db()
            cur = db.executemany(
                "UPDATE jobs SET state = ?, status = ?, updated_at = ? WHERE job_id = ?", params
            )
            if cur.rowcount != len(params):  # some id matched no row: name it, undo them all
                for job_id, _ in states:
                    if not db.execute("SELECT 1 FROM jobs WHERE job_id = ?", (job_id,)).fetchone():
                        raise KeyError(f"unknown job {job_id!r}")

    def jobs(self) -> list[dict[str, Any]]:
        """Every job row in submission order; a row whose JSON does not parse comes back
        with ``spec`` None and the reason in ``error`` (see :meth:`quarantine_job`)."""
        out = []
        for r in self._read("SELECT * FROM jobs ORDER BY seq"):
            row: dict[str, Any] = {
                "job_id": r["job_id"],
                "status": r["status"],
                "submitted_at": r["submitted_at"],
                "seq": r["seq"],
            }
            try:
                row["spec"], row["state"] = _load(r["spec"]), _load(r["state"])
            except (ValueError, RecursionError) as err:
                row["spec"], row["state"] = None, None
                row["error"] = f"unreadable JSON: {str(err)[:200]}"
            out.append(row)
        return out

    def quarantine_job(self, job_id: str, reason: str) -> None:
        """Move a job's row (and its run) into ``quarantine`` with ``reason``."""
        with self.transaction():
            rows = self._read("SELECT spec, state FROM jobs WHERE job_id = ?", (job_id,))
            runs = self._read("SELECT run FROM runs WHERE job_id = ?", (job_id,))
            self._write(
                "INSERT INTO quarantine (job_id, spec, state, run, reason, quarantined_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    job_id,
                    rows[0]["spec"] if rows else None,
                    rows[0]["state"] if rows else None,
                    runs[0]["run"] if runs else None,
                    reason,
                    time.time(),
                ),
            )
            self._write("DELETE FROM jobs WHERE job_id = ?", (job_id,))
            self._write("DELETE FROM runs WHERE job_id = ?", (job_id,))

    def quarantined(self) -> list[dict[str, Any]]:
        """The quarantined rows, oldest first (``spec``/``state``/``run`` as stored text)."""
        return [
            {k: r[k] for k in ("job_id", "spec", "state", "run", "reason", "quarantined_at")}
            for r in self._read("SELECT * FROM quarantine ORDER BY id")
        ]

    # -- per-slot history ----------------------------------------------------------------

    def add_decision(
        self, slot: int, job_id: str, admitted: bool, reason: str, quote: dict[str, Any] | None
    ) -> None:
        self._write(
            "INSERT INTO decisions (slot, job_id, admitted, reason, quote, recorded_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                int(slot),
                job_id,
                int(admitted),
                reason,
                None if quote is None else _dump(quote),
                time.time(),
            ),
        )

    def add_allocations(self, slot: int, rows: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """One row per allocated job of the slot: ``(job_id, placement)``; all or none."""
        now = time.time()
        params = [(int(slot), job_id, _dump(placement), now) for job_id, placement in rows]
        with self.transaction():
            self._db().executemany(
                "INSERT INTO allocations (slot, job_id, placement, recorded_at) "
                "VALUES (?, ?, ?, ?)",
                params,
            )

    def add_progress(
        self, slot: int, job_id: str, units: float, finished: bool, restart_s: float
    ) -> None:
        self.add_progress_rows(slot, [(job_id, units, finished, restart_s)])

    def add_progress_rows(self, slot: int, rows: Iterable[tuple[str, float, bool, float]]) -> None:
        """The slot's progress of many jobs: ``(job_id, units, finished, restart_s)``."""
        now = time.time()
        params = [
            (int(slot), job_id, float(units), int(finished), float(restart_s), now)
            for job_id, units, finished, restart_s in rows
        ]
        with self.transaction():
            self._db().executemany(
                "INSERT INTO progress (slot, job_id, units, finished, restart_s, recorded_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                params,
            )

    def add_measurement(self, slot: int, job_id: str, row: dict[str, Any]) -> None:
        """One observed slot of a job: placement, iterations, iteration_s, compute_s, comm_s,
        bytes_sent, bytes_recv and predicted_s (None before the model has a prediction)."""
        self.add_measurements(slot, [(job_id, row)])

    def add_measurements(self, slot: int, rows: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """:meth:`add_measurement` for many jobs in one statement."""
        now = time.time()
        params = [(int(slot), job_id, _dump(row), now) for job_id, row in rows]
        with self.transaction():
            self._db().executemany(
                "INSERT INTO measurements (slot, job_id, row, recorded_at) VALUES (?, ?, ?, ?)",
                params,
            )

    @staticmethod
    def _where(**filters: Any) -> tuple[str, tuple[Any, ...]]:
        used = {k: v for k, v in filters.items() if v is not None}
        if not used:
            return "", ()
        return " WHERE " + " AND ".join(f"{k} = ?" for k in used), tuple(used.values())

    def decisions(self, job_id: str | None = None) -> list[dict[str, Any]]:
        where, params = self._where(job_id=job_id)
        return [
            {
                "slot": r["slot"],
                "job_id": r["job_id"],
                "admitted": bool(r["admitted"]),
                "reason": r["reason"],
                "quote": _load(r["quote"]),
                "recorded_at": r["recorded_at"],
            }
            for r in self._read(f"SELECT * FROM decisions{where} ORDER BY id", params)
        ]

    def allocations(
        self, slot: int | None = None, job_id: str | None = None
    ) -> list[dict[str, Any]]:
        where, params = self._where(slot=slot, job_id=job_id)
        return [
            {
                "slot": r["slot"],
                "job_id": r["job_id"],
                "placement": _load(r["placement"]),
                "recorded_at": r["recorded_at"],
            }
            for r in self._read(f"SELECT * FROM allocations{where} ORDER BY id", params)
        ]

    def progress(self, job_id: str | None = None) -> list[dict[str, Any]]:
        where, params = self._where(job_id=job_id)
        return [
            {
                "slot": r["slot"],
                "job_id": r["job_id"],
                "units": r["units"],
                "finished": bool(r["finished"]),
                "restart_s": r["restart_s"],
                "recorded_at": r["recorded_at"],
            }
            for r in self._read(f"SELECT * FROM progress{where} ORDER BY id", params)
        ]

    def measurements(self, job_id: str | None = None) -> list[dict[str, Any]]:
        """Each row is ``slot``, ``job_id`` and the fields given to :meth:`add_measurement`."""
        where, params = self._where(job_id=job_id)
        out = []
        for r in self._read(f"SELECT * FROM measurements{where} ORDER BY id", params):
            # The columns are authoritative should the row repeat slot or job_id.
            fields = {k: v for k, v in _load(r["row"]).items() if k not in ("slot", "job_id")}
            out.append({"slot": r["slot"], "job_id": r["job_id"], **fields})
        return out

    # -- executor runs -------------------------------------------------------------------

    def save_run(self, job_id: str, run: dict[str, Any]) -> None:
        """Replace the job's current training generation (placement, ports, steps)."""
        self._write(
            "INSERT INTO runs (job_id, run, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (job_id) DO UPDATE SET run = excluded.run, "
            "updated_at = excluded.updated_at",
            (job_id, _dump(run), time.time()),
        )

    def delete_run(self, job_id: str) -> None:
        """Forget the job's run (a no-op when none is stored)."""
        self._write("DELETE FROM runs WHERE job_id = ?", (job_id,))

    def run(self, job_id: str) -> Any:
        """One job's stored run (None: none, or its JSON does not parse)."""
        rows = self._read("SELECT run FROM runs WHERE job_id = ?", (job_id,))
        try:
            return _load(rows[0]["run"]) if rows else None
        except (ValueError, RecursionError):
            return None

    def runs(self) -> dict[str, Any]:
        """Every stored run by job id, in the order each was first saved; a run whose JSON
        does not parse reads as None."""
        out: dict[str, Any] = {}
        for r in self._read("SELECT * FROM runs ORDER BY rowid"):
            try:
                out[r["job_id"]] = _load(r["run"])
            except (ValueError, RecursionError):
                out[r["job_id"]] = None
        return out
