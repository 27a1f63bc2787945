"""Who owns which job, what each user may still submit, and the audit record.

Ownership and the audit record live in the controller's SQLite file beside the jobs:

* ``owners``: one row per job, the user who submitted it (written in the submission's own
  transaction: no job is stored without its owner);
* ``audit``: one row per submit, cancel and refusal (a quota, a permission, a document that
  did not validate), append-only: triggers refuse every UPDATE and DELETE, so the record
  can only grow, whatever code runs against the file.

Quotas (:class:`mlsched.net.users.Quota`) are enforced at intake, before anything of the
submission is stored: the user's jobs not yet running (``queued``) and the GPUs the user's
unfinished jobs may hold at most together (``gpus``: each job at its largest, every worker it
may grow to, so a quota holds whatever the policy later decides).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mlsched.controller.store import Store
from mlsched.core.allocation import JobState
from mlsched.core.errors import MlschedError, shorten
from mlsched.core.job import JobSpec
from mlsched.net.users import User

__all__ = ["AuditEntry", "QuotaError", "Tenancy", "most_gpus"]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS owners (
        job_id       TEXT PRIMARY KEY,
        user         TEXT NOT NULL,
        submitted_at REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS audit (
        id      INTEGER PRIMARY KEY AUTOINCREMENT,
        at      REAL NOT NULL,
        user    TEXT NOT NULL,
        action  TEXT NOT NULL,
        job_id  TEXT NOT NULL,
        outcome TEXT NOT NULL,
        detail  TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS audit_user ON audit (user)",
    "CREATE INDEX IF NOT EXISTS audit_job ON audit (job_id)",
    """CREATE TRIGGER IF NOT EXISTS audit_append_only_update BEFORE UPDATE ON audit
        BEGIN SELECT RAISE(ABORT, 'the audit record is append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS audit_append_only_delete BEFORE DELETE ON audit
        BEGIN SELECT RAISE(ABORT, 'the audit record is append-only'); END""",
)
#: Jobs that wait for a place: submitted and not running (nor final).
_WAITING = frozenset({JobState.PENDING.value, JobState.ADMITTED.value, JobState.PAUSED.value})
MAX_AUDIT_ROWS = 10_000


class QuotaError(MlschedError):
    """A submission over its user's quota; ``field`` names the quota (``quota.gpus``)."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"field '{field}': {message}")


@dataclass(frozen=True)
class AuditEntry:
    id: int
    at: float  # unix seconds
    user: str
    action: str  # submit, cancel, logs
    job_id: str
    outcome: str  # ok, refused
    detail: str


def most_gpus(job: JobSpec) -> float:
    """The GPUs ``job`` may hold at most: every worker it may grow to on its hungriest
    worker type, and the PSs those workers need (PSs hold GPUs only where their spec says)."""
    worker = max([job.worker["gpu"], *(d["gpu"] for d in job.worker_types.values())])
    ps = max([job.ps["gpu"], *(d["gpu"] for d in job.ps_types.values())]) if job.uses_ps else 0
    workers = job.worker_cap
    return workers * worker + (job.ps_needed(workers) * ps if ps else 0.0)


class Tenancy:
    """Owners, quota checks and the audit record of one controller's jobs."""

    def __init__(self, store: Store) -> None:
        self.store = store
        with store.transaction():
            for statement in _SCHEMA:
                store.execute(statement)
        self._owners = {r["job_id"]: r["user"] for r in store.query("SELECT * FROM owners")}

    def owner(self, job_id: str) -> str | None:
        """The job's owner (None: a job stored before owners were recorded)."""
        return self._owners.get(job_id)

    def check_quota(
        self, user: User, jobs: Sequence[JobSpec], unfinished: Iterable[tuple[JobSpec, str]]
    ) -> None:
        """Refuse ``jobs`` (a QuotaError naming the quota and the figures) when they would
        take ``user`` over a quota; ``unfinished``: every unfinished job and its state."""
        quota = user.quota
        if quota.gpus is None and quota.queued is None:
            return
        own = [(spec, state) for spec, state in unfinished if self._owners.get(spec.job_id)
               == user.name]  # fmt: skip
        if quota.queued is not None:
            waiting = sum(1 for _, state in own if state in _WAITING)
            if waiting + len(jobs) > quota.queued:
                raise QuotaError(
                    "quota.queued",
                    f"user {user.name!r} may have {quota.queued} jobs waiting to run; "
                    f"{waiting} wait and this submission adds {len(jobs)}",
                )
        if quota.gpus is not None:
            held = sum(most_gpus(spec) for spec, _ in own)
            asked = sum(most_gpus(job) for job in jobs)
            if held + asked > quota.gpus + 1e-9:
                big = max(jobs, key=most_gpus)
                raise QuotaError(
                    "quota.gpus",
                    f"user {user.name!r} may hold {quota.gpus} GPUs; the user's "
                    f"{len(own)} unfinished jobs may hold {held:g} and this submission "
                    f"{asked:g} more (job {big.job_id!r}: {most_gpus(big):g}, every worker "
                    "it may grow to)",
                )

    def record_submission(self, user: User, jobs: Sequence[JobSpec], at: float) -> None:
        """Owners and audit rows of an admitted submission: call inside the transaction
        that stores the jobs."""
        for job in jobs:
            self.store.execute(
                "INSERT INTO owners (job_id, user, submitted_at) VALUES (?, ?, ?)",
                (job.job_id, user.name, at),
            )
            self._audit(user.name, "submit", job.job_id, "ok", "", at)
        for job in jobs:
            self._owners[job.job_id] = user.name

    def authorize(self, user: User, action: str, job_id: str) -> None:
        """Only the owner of ``job_id`` or an admin may ``action`` it (cancel, read the logs
        of): else the refusal is audited and a PermissionError says whose it is."""
        owner = self._owners.get(job_id)
        if user.may_act_on(owner):
            return
        self.record(user, action, job_id, "refused", f"owned by {owner or ''!r}")
        raise PermissionError(
            f"job {shorten(job_id, 128)!r} is {owner or 'nobody'!r}'s: only its owner or an "
            f"admin may {action} it"
        )

    def record(self, user: User, action: str, job_id: str, outcome: str, detail: str) -> None:
        """One audit row (a cancel, or a refusal of any action)."""
        self._audit(user.name, action, job_id, outcome, detail, time.time())

    def _audit(
        self, user: str, action: str, job_id: str, outcome: str, detail: str, at: float
    ) -> None:
        self.store.execute(
            "INSERT INTO audit (at, user, action, job_id, outcome, detail) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (at, user, action, shorten(job_id, 200), outcome, shorten(detail, 500)),
        )

    def audit(self, *, user: str = "", job_id: str = "", limit: int = 100) -> list[AuditEntry]:
        """The newest ``limit`` rows (at most :data:`MAX_AUDIT_ROWS`), oldest first."""
        where, params = [], []
        if user:
            where.append("user = ?")
            params.append(user)
        if job_id:
            where.append("job_id = ?")
            params.append(job_id)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = self.store.query(
            f"SELECT * FROM audit{clause} ORDER BY id DESC LIMIT ?",
            (*params, max(1, min(int(limit), MAX_AUDIT_ROWS))),
        )
        names = ("id", "at", "user", "action", "job_id", "outcome", "detail")
        return [AuditEntry(*(r[k] for k in names)) for r in reversed(rows)]
