"""A memo of MILP solves, keyed by the program itself: solved once, read back after.

An experiment's runs solve the same programs every time they run: Dorm's re-plans, the
offline optima, PD-ORS's exact slot programs are functions of the seed's jobs and the code.
HiGHS under a node limit is deterministic, so a program solved before has the same answer
now. :func:`~mlsched.scheduler.solvers.highs.solve_milp` looks each program up here before it
solves it, when a memo is configured:

* ``MLSCHED_SOLVE_MEMO``: a packed memo file (gzip'd JSON lines) to read answers from;
* ``MLSCHED_SOLVE_MEMO_RECORD``: a directory where each process appends the answer to every
  program it met (read from the memo or solved), so that ``pack`` turns such a directory
  into a memo of exactly one run's programs.

The key is a SHA-256 of every input that can change the answer: the costs (in the solver's
sense), the constraint matrices in canonical sparse form, the right-hand sides, bounds,
integrality, the options (time limit, gap, node limit), the start, and the versions of
scipy and highspy. Any change to a policy's program, however small, is a different key
and is solved anew; nothing is matched approximately.

An answer read back is checked before it is used: its point must be feasible for the
program (bounds, rows, integrality, to 1e-6) and its objective must be the program's cost
at that point. A point that fails is not used (the program is solved, and a warning
names it). Besides, one key in :data:`VERIFY_EVERY` (chosen by the key, so the same ones in
every run) is solved anyway and must agree with the memo, or :class:`MemoMismatch` is raised:
every run that reads a memo also tests that the memo is still HiGHS's answer. Agreeing is
the same status and point, or, where this machine's floating point leads HiGHS to another
point of the program, the same status and an objective within the solve's own relative gap
(a stopping rule cannot tell such answers apart; the memo's is kept and the difference
logged).

Only solves that stopped on their own (optimal, the gap, the node limit), not on the clock,
are recorded: a solve cut by the wall-clock limit depends on the machine. The memo answers
what a solve would have answered; it does not time anything, so a run that reads one reports
shorter solve times (docs/testing.md, "Budget").
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "MEMO_ENV",
    "RECORD_ENV",
    "VERIFY_EVERY",
    "MemoMismatch",
    "Program",
    "SolveMemo",
    "active_memo",
    "pack",
]

log = logging.getLogger(__name__)

MEMO_ENV = "MLSCHED_SOLVE_MEMO"
RECORD_ENV = "MLSCHED_SOLVE_MEMO_RECORD"
#: One key in this many is solved even when the memo holds it, and must agree.
VERIFY_EVERY = 16
#: Solves shorter than this are not worth a line of the memo.
RECORD_MIN_S = 0.05
_FORMAT = "mlsched-milp-memo-v1"
#: HiGHS's default relative MIP gap, for programs solved without one of their own.
HIGHS_MIP_REL_GAP = 1e-4
_TOL = 1e-6


class MemoMismatch(RuntimeError):
    """The memo's answer to a program is not what HiGHS answers now."""


@dataclass(frozen=True)
class Program:
    """A MILP in the solver's sense (minimise ``cost @ x``), rows ``row_lo <= A x <= row_hi``
    in canonical CSR form, with everything else that decides the answer."""

    cost: np.ndarray
    A: Any  # scipy.sparse.csr_matrix
    row_lo: np.ndarray
    row_hi: np.ndarray
    lb: np.ndarray
    ub: np.ndarray
    kinds: np.ndarray
    options: dict[str, Any]
    start: np.ndarray | None

    def key(self) -> str:
        h = hashlib.sha256(_FORMAT.encode())
        h.update(json.dumps([_versions(), sorted(self.options.items())]).encode())
        for arr in (
            self.cost,
            np.asarray(self.A.shape, dtype=np.int64),
            self.A.indptr.astype(np.int64),
            self.A.indices.astype(np.int64),
            self.A.data,
            self.row_lo,
            self.row_hi,
            self.lb,
            self.ub,
            self.kinds,
        ):
            a = np.ascontiguousarray(arr)
            h.update(str(a.dtype).encode() + str(a.shape).encode())
            h.update(a.tobytes())
        h.update(b"start" if self.start is not None else b"nostart")
        if self.start is not None:
            h.update(np.ascontiguousarray(self.start, dtype=float).tobytes())
        return h.hexdigest()

    def feasible(self, x: np.ndarray) -> bool:
        """``x`` is a point of the program (bounds, rows, integrality, to 1e-6)."""
        if x.shape != self.cost.shape or not np.all(np.isfinite(x)):
            return False
        activity = self.A @ x
        integer = self.kinds != 0
        return bool(
            np.all(x >= self.lb - _TOL)
            and np.all(x <= self.ub + _TOL)
            and np.all(activity >= self.row_lo - _TOL)
            and np.all(activity <= self.row_hi + _TOL)
            and np.all(np.abs(x[integer] - np.round(x[integer])) <= _TOL)
        )


def canonical(
    cost: np.ndarray,
    A: Any,
    row_lo: np.ndarray,
    row_hi: np.ndarray,
    lb: np.ndarray,
    ub: np.ndarray,
    kinds: np.ndarray,
    options: dict[str, Any],
    start: Any,
) -> Program:
    """The :class:`Program` of these inputs (A in sorted, duplicate-free CSR form)."""
    from scipy.sparse import csr_matrix

    mat = csr_matrix(A, dtype=float, copy=True)
    mat.sum_duplicates()
    mat.sort_indices()
    return Program(
        np.asarray(cost, dtype=float),
        mat,
        np.asarray(row_lo, dtype=float),
        np.asarray(row_hi, dtype=float),
        np.broadcast_to(np.asarray(lb, dtype=float), cost.shape).copy(),
        np.broadcast_to(np.asarray(ub, dtype=float), cost.shape).copy(),
        np.asarray(kinds, dtype=float),
        dict(options),
        None if start is None else np.asarray(start, dtype=float),
    )


_VERSIONS: list[str] = []


def _versions() -> list[str]:
    if not _VERSIONS:
        import scipy

        try:
            highs = metadata.version("highspy")
        except metadata.PackageNotFoundError:
            highs = "none"
        _VERSIONS.extend([f"scipy {scipy.__version__}", f"highspy {highs}"])
    return _VERSIONS


def _encode(key: str, answer: dict[str, Any]) -> str:
    x = answer.get("x")
    row = {k: v for k, v in answer.items() if k != "x"}
    row["key"] = key
    if x is not None:
        arr = np.asarray(x, dtype=float)
        nz = np.flatnonzero(arr)
        row["n"] = len(arr)
        row["idx"] = nz.tolist()
        row["val"] = arr[nz].tolist()
    return json.dumps(row, allow_nan=False)


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if k not in ("key", "n", "idx", "val")}
    if "n" in row:
        x = np.zeros(int(row["n"]))
        x[np.asarray(row["idx"], dtype=np.int64)] = np.asarray(row["val"], dtype=float)
        out["x"] = x
    else:
        out["x"] = None
    return out


class SolveMemo:
    """Answers by key, read from a packed memo, and the process's new solves (recorded to a
    directory when one is given)."""

    def __init__(self, path: Path | None, record: Path | None) -> None:
        self.path = path
        self.record = record
        self.hits = 0
        self.misses = 0
        self.verified = 0
        self.differed = 0  # verified keys where HiGHS found another point as good
        self._answers: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        if path is not None:
            for row in _read_rows(path):
                self._answers[row["key"]] = row

    def solve(
        self,
        program: Program,
        solve: Callable[[], dict[str, Any]],
    ) -> dict[str, Any]:
        """The answer to ``program``: the memo's, checked, or ``solve()``'s (recorded)."""
        key = program.key()
        row = self._answers.get(key)
        if row is not None:
            answer = _decode(row)
            x = answer["x"]
            if x is not None and not self._consistent(program, answer):
                log.warning("[memo] the memo's answer to program %s fails its check", key[:12])
            else:
                if int(key[:8], 16) % VERIFY_EVERY == 0:
                    self._verify(program, key, answer, solve())
                with self._lock:
                    self.hits += 1
                if self.record is not None:  # so a record of a run holds all its programs
                    self._append(json.dumps(row, allow_nan=False))
                return answer
        with self._lock:
            self.misses += 1
        t0 = time.perf_counter()
        answer = solve()
        took = time.perf_counter() - t0
        limit = float(program.options.get("time_limit", math.inf))
        if self.record is not None and took >= RECORD_MIN_S and took < 0.5 * limit:
            self._append(_encode(key, answer))
        return answer

    def _consistent(self, program: Program, answer: dict[str, Any]) -> bool:
        x = answer["x"]
        if not program.feasible(x):
            return False
        stored = answer.get("objective_min")
        value = float(program.cost @ x)
        return stored is not None and math.isclose(value, stored, rel_tol=1e-9, abs_tol=1e-9)

    def _verify(
        self, program: Program, key: str, memo: dict[str, Any], live: dict[str, Any]
    ) -> None:
        """The memo's answer must be HiGHS's: the same status and point, or (where this
        machine's floating point leads HiGHS to another point of the program) an objective
        as good to within the solve's own gap, which a stopping rule cannot tell apart."""
        mx, lx = memo["x"], live["x"]
        same_point = (mx is None and lx is None) or (
            mx is not None and lx is not None and np.allclose(mx, lx, rtol=1e-9, atol=1e-9)
        )
        agree = memo["status"] == live["status"] and same_point
        if not agree and memo["status"] == live["status"] and mx is not None and lx is not None:
            gap = float(program.options.get("mip_rel_gap", HIGHS_MIP_REL_GAP))
            a, b = float(memo["objective_min"]), float(live["objective_min"])
            agree = abs(a - b) <= gap * max(abs(a), abs(b), 1.0) + 1e-9
            if agree:
                log.warning(
                    "[memo] program %s: HiGHS finds another point here, its objective "
                    "within the gap (%.6g against the memo's %.6g)",
                    key[:12],
                    b,
                    a,
                )
                with self._lock:
                    self.differed += 1
        if not agree:
            raise MemoMismatch(
                f"the solve memo's answer to program {key[:12]} ({memo['status']}, "
                f"{memo.get('objective')}) is not HiGHS's ({live['status']}, "
                f"{live.get('objective')}): the memo is stale for this solver; "
                "record it again (make solve-memo)"
            )
        with self._lock:
            self.verified += 1

    def _append(self, line: str) -> None:
        assert self.record is not None
        self.record.mkdir(parents=True, exist_ok=True)
        line += "\n"
        with self._lock, open(self.record / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as f:
            f.write(line)


def _read_rows(path: Path) -> Iterable[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    if not isinstance(row, dict) or not isinstance(row.get("key"), str):
                        raise ValueError("not a memo row")
                except ValueError as err:
                    raise ValueError(f"{path}:{n}: not a solve-memo row ({err})") from None
                yield row
    except FileNotFoundError:
        raise ValueError(f"{MEMO_ENV}: no memo file at {path}") from None


_ACTIVE: SolveMemo | None = None
_ACTIVE_FOR: tuple[str, str] | None = None


def active_memo() -> SolveMemo | None:
    """The memo the environment configures for this process (None: solve everything)."""
    global _ACTIVE, _ACTIVE_FOR
    path = os.environ.get(MEMO_ENV, "")
    record = os.environ.get(RECORD_ENV, "")
    if not path and not record:
        return None
    if _ACTIVE is None or (path, record) != _ACTIVE_FOR:
        _ACTIVE = SolveMemo(Path(path) if path else None, Path(record) if record else None)
        _ACTIVE_FOR = (path, record)
    return _ACTIVE


def pack(sources: Iterable[Path], out: Path) -> int:
    """Write the rows of ``sources`` (memo files and record directories) to the memo file
    ``out``, one row per key, sorted by key (so a file packed twice is the same bytes);
    returns the number of rows."""
    rows: dict[str, dict[str, Any]] = {}
    for src in sources:
        files = sorted(src.glob("*.jsonl")) if src.is_dir() else [src]
        for f in files:
            for row in _read_rows(f):
                rows.setdefault(row["key"], row)
    out.parent.mkdir(parents=True, exist_ok=True)
    # No name and no time in the gzip header: the same rows are the same bytes.
    with open(out, "wb") as fh, gzip.GzipFile(filename="", fileobj=fh, mode="wb", mtime=0) as raw:
        for key in sorted(rows):
            raw.write((json.dumps(rows[key], sort_keys=True) + "\n").encode())
    return len(rows)
