"""The solve memo (mlsched/scheduler/solvers/memo.py): a program met before is answered from
the memo exactly as HiGHS answered it, a changed program never is, and a memo that is wrong
is caught (a point that is not feasible is not used; a sampled key solved again must agree).

Real HiGHS solves on small programs, real memo files in tmp_path; the environment names the
memo as it does for ``make reproduce``."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import numpy as np
import pytest

from mlsched.engine.builder import SimulationConfig, simulate
from mlsched.engine.summary import summarize
from mlsched.scheduler.solvers import memo as memo_module
from mlsched.scheduler.solvers import solve_milp
from mlsched.scheduler.solvers.memo import (
    MEMO_ENV,
    RECORD_ENV,
    VERIFY_EVERY,
    MemoMismatch,
    active_memo,
    canonical,
    pack,
)
from mlsched.workloads import load_workload


def knapsack(values: list[float], cap: float = 10.0) -> dict[str, object]:
    """A small knapsack MILP (maximise values @ x, weights @ x <= cap, x in {0, 1, 2})."""
    weights = np.array([3.0, 4.0, 5.0, 2.0])
    return dict(
        c=np.array(values),
        A_ub=weights[None, :],
        b_ub=np.array([cap]),
        integrality=np.ones(4),
        bounds=[(0, 2)] * 4,
        time_limit_s=30.0,
        maximize=True,
    )


@pytest.fixture(autouse=True)
def _no_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MEMO_ENV, raising=False)
    monkeypatch.delenv(RECORD_ENV, raising=False)
    monkeypatch.setattr(memo_module, "RECORD_MIN_S", 0.0)  # these programs solve in ms


def record(monkeypatch: pytest.MonkeyPatch, rec: Path) -> None:
    monkeypatch.delenv(MEMO_ENV, raising=False)
    monkeypatch.setenv(RECORD_ENV, str(rec))


def read(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    monkeypatch.delenv(RECORD_ENV, raising=False)
    monkeypatch.setenv(MEMO_ENV, str(path))


def rows(path: Path) -> list[dict[str, object]]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def write_rows(path: Path, data: list[dict[str, object]]) -> None:
    with gzip.open(path, "wt") as f:
        for row in data:
            f.write(json.dumps(row) + "\n")


def test_a_recorded_program_is_answered_from_the_memo_as_highs_answered_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    programs = [knapsack([5.0, 6.0, 7.0, 3.0]), knapsack([1.0, 9.0, 2.0, 4.0], cap=7.0)]
    live = [solve_milp(**p) for p in programs]  # type: ignore[arg-type]
    record(monkeypatch, tmp_path / "rec")
    recorded = [solve_milp(**p) for p in programs]  # type: ignore[arg-type]
    memo_path = tmp_path / "memo.jsonl.gz"
    assert pack([tmp_path / "rec"], memo_path) == 2
    read(monkeypatch, memo_path)
    memo = active_memo()
    assert memo is not None
    answered = [solve_milp(**p) for p in programs]  # type: ignore[arg-type]
    assert (memo.hits, memo.misses) == (2, 0)
    for a, b, c in zip(live, recorded, answered, strict=True):
        assert a.status == b.status == c.status
        assert a.objective == c.objective
        assert a.x is not None and c.x is not None
        assert np.array_equal(a.x, c.x)
        assert c.message == a.message
    # A program that differs in one coefficient is not in the memo: solved, not matched.
    changed = knapsack([5.0, 6.0, 7.0, 3.0 + 1e-12])
    solve_milp(**changed)  # type: ignore[arg-type]
    assert memo.misses == 1


def test_every_input_that_can_change_the_answer_is_in_the_key() -> None:
    n = 3
    base = dict(
        cost=np.array([1.0, 2.0, 3.0]),
        A=np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]),
        row_lo=np.array([-np.inf, -np.inf]),
        row_hi=np.array([4.0, 5.0]),
        lb=np.zeros(n),
        ub=np.full(n, 3.0),
        kinds=np.ones(n),
        options={"time_limit": 10.0, "node_limit": 200},
        start=None,
    )
    key = canonical(**base).key()  # type: ignore[arg-type]
    variants = {
        "cost": np.array([1.0, 2.0, 3.5]),
        "A": np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 2.0]]),
        "row_lo": np.array([-np.inf, 0.0]),
        "row_hi": np.array([4.0, 6.0]),
        "lb": np.array([0.0, 1.0, 0.0]),
        "ub": np.array([3.0, 3.0, 2.0]),
        "kinds": np.array([1.0, 0.0, 1.0]),
        "options": {"time_limit": 10.0, "node_limit": 100},
        "start": np.zeros(n),
    }
    for field, value in variants.items():
        other = canonical(**{**base, field: value}).key()  # type: ignore[arg-type]
        assert other != key, field
    # The same program written another way (dense vs sparse, unsorted duplicates summed)
    # is the same key.
    from scipy.sparse import coo_matrix

    coo = coo_matrix(([0.5, 1.0, 0.5, 1.0, 1.0], ([0, 0, 0, 1, 1], [0, 1, 0, 1, 2])), shape=(2, 3))
    assert canonical(**{**base, "A": coo}).key() == key  # type: ignore[arg-type]


def test_a_memo_point_that_is_not_feasible_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    program = knapsack([5.0, 6.0, 7.0, 3.0])
    live = solve_milp(**program)  # type: ignore[arg-type]
    record(monkeypatch, tmp_path / "rec")
    solve_milp(**program)  # type: ignore[arg-type]
    memo_path = tmp_path / "memo.jsonl.gz"
    pack([tmp_path / "rec"], memo_path)
    (row,) = rows(memo_path)
    # Every item twice: weight 28 > 10, and an objective that matches the point, so only the
    # feasibility check can refuse it.
    row["idx"], row["val"] = [0, 1, 2, 3], [2.0, 2.0, 2.0, 2.0]
    row["objective_min"] = -2.0 * (5 + 6 + 7 + 3)
    row["objective"] = 2.0 * (5 + 6 + 7 + 3)
    write_rows(memo_path, [row])
    read(monkeypatch, memo_path)
    with caplog.at_level(logging.WARNING, logger="mlsched.scheduler.solvers.memo"):
        got = solve_milp(**program)  # type: ignore[arg-type]
    assert got.objective == live.objective
    assert got.x is not None and live.x is not None and np.array_equal(got.x, live.x)
    assert "fails its check" in caplog.text
    memo = active_memo()
    assert memo is not None and (memo.hits, memo.misses) == (0, 1)


def sampled_program() -> dict[str, object]:
    """A knapsack whose key is one of those the memo always solves again."""
    for k in range(10 * VERIFY_EVERY * 20):
        program = knapsack([5.0, 6.0, 7.0, 3.0 + k])
        from mlsched.scheduler.solvers.highs import _cost, _rows, _to_bounds

        cost = _cost(program["c"], True)
        A, lo, hi = _rows(program["A_ub"], program["b_ub"], None, None, 4)
        box = _to_bounds(program["bounds"], 4)  # type: ignore[arg-type]
        key = canonical(cost, A, lo, hi, box.lb, box.ub, np.ones(4), {"time_limit": 30.0}, None)
        if int(key.key()[:8], 16) % VERIFY_EVERY == 0:
            return program
    raise AssertionError("no sampled key among the candidates")


def test_a_sampled_key_is_solved_again_and_a_wrong_memo_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = sampled_program()
    record(monkeypatch, tmp_path / "rec")
    solve_milp(**program)  # type: ignore[arg-type]
    memo_path = tmp_path / "memo.jsonl.gz"
    pack([tmp_path / "rec"], memo_path)
    read(monkeypatch, memo_path)
    solve_milp(**program)  # the right answer: verified, used
    memo = active_memo()
    assert memo is not None and (memo.hits, memo.verified) == (1, 1)
    # A feasible, self-consistent but not optimal answer: only solving again can tell.
    (row,) = rows(memo_path)
    row["idx"], row["val"] = [], []
    row["objective_min"], row["objective"] = 0.0, 0.0
    write_rows(memo_path, [row])
    monkeypatch.setenv(MEMO_ENV, str(memo_path) + "")  # same path: force a reload
    monkeypatch.setattr(memo_module, "_ACTIVE", None)
    with pytest.raises(MemoMismatch, match="make solve-memo"):
        solve_milp(**program)  # type: ignore[arg-type]


def test_clock_stopped_solves_are_not_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record(monkeypatch, tmp_path / "rec")
    program = knapsack([5.0, 6.0, 7.0, 3.0])
    monkeypatch.setattr(memo_module, "RECORD_MIN_S", 0.0)
    # Any solve takes longer than half of a 1e-9-s limit: it depends on the clock.
    solve_milp(**{**program, "time_limit_s": 1e-9})  # type: ignore[arg-type]
    assert not (tmp_path / "rec").exists()
    solve_milp(**program)  # type: ignore[arg-type]
    assert len(list((tmp_path / "rec").glob("*.jsonl"))) == 1


def test_pack_writes_one_row_a_key_the_same_bytes_each_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record(monkeypatch, tmp_path / "rec")
    for _ in range(2):
        solve_milp(**knapsack([5.0, 6.0, 7.0, 3.0]))  # type: ignore[arg-type]
    solve_milp(**knapsack([1.0, 9.0, 2.0, 4.0]))  # type: ignore[arg-type]
    a, b = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    assert pack([tmp_path / "rec"], a) == 2
    assert pack([a, tmp_path / "rec"], b) == 2
    assert a.read_bytes() == b.read_bytes()


def test_a_memo_file_that_is_not_a_memo_is_refused_with_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad.jsonl.gz"
    with gzip.open(bad, "wt") as f:
        f.write('{"key": "ab", "status": "optimal"}\n[1, 2]\n')
    read(monkeypatch, bad)
    with pytest.raises(ValueError, match=r"bad\.jsonl\.gz:2: not a solve-memo row"):
        solve_milp(**knapsack([5.0, 6.0, 7.0, 3.0]))  # type: ignore[arg-type]
    read(monkeypatch, tmp_path / "absent.jsonl.gz")
    with pytest.raises(ValueError, match="MLSCHED_SOLVE_MEMO: no memo file"):
        solve_milp(**knapsack([5.0, 6.0, 7.0, 3.0]))  # type: ignore[arg-type]


def test_a_dorm_run_from_the_memo_is_the_run_it_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dorm's re-plans (solved from a start, through highspy) read back: the same summary,
    every program a hit."""
    workload = load_workload("oasis-paper", seed=1, jobs=14, horizon=40, options={"servers": 3})
    config = SimulationConfig("dorm", seed=1)
    record(monkeypatch, tmp_path / "rec")
    first = summarize(simulate(workload, config, cache=False)).to_dict()
    memo_path = tmp_path / "memo.jsonl.gz"
    n = pack([tmp_path / "rec"], memo_path)
    assert n >= 3
    read(monkeypatch, memo_path)
    again = summarize(simulate(workload, config, cache=False)).to_dict()
    memo = active_memo()
    assert memo is not None and memo.hits >= n and memo.misses == 0
    first.pop("wall_seconds", None)
    again.pop("wall_seconds", None)
    assert again == first


def test_a_sampled_key_where_highs_finds_another_point_as_good_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Another machine's floating point may lead HiGHS to another point, its objective
    within the solve's gap: the memo's point is kept and the difference logged; a point
    farther off than the gap is refused."""
    program = sampled_program()
    record(monkeypatch, tmp_path / "rec")
    live = solve_milp(**program)  # type: ignore[arg-type]
    memo_path = tmp_path / "memo.jsonl.gz"
    pack([tmp_path / "rec"], memo_path)
    (row,) = rows(memo_path)
    assert live.x is not None and live.objective is not None
    # Another feasible point: one item more where one fits, else one fewer.
    x = live.x.copy()
    alt = x.copy()
    cap, weights = 10.0, np.array([3.0, 4.0, 5.0, 2.0])
    for i in range(4):
        if alt[i] < 2 and weights @ alt + weights[i] <= cap:
            alt[i] += 1
            break
    else:
        alt[int(np.argmax(alt))] -= 1
    values = np.array(program["c"], dtype=float)  # type: ignore[call-overload]
    worse = float(values @ alt)
    assert worse != live.objective
    row["idx"] = np.flatnonzero(alt).tolist()
    row["val"] = alt[np.flatnonzero(alt)].tolist()
    row["objective"], row["objective_min"] = worse, -worse
    write_rows(memo_path, [row])
    read(monkeypatch, memo_path)
    # Farther from HiGHS's objective than its gap: refused.
    with pytest.raises(MemoMismatch):
        solve_milp(**program)  # type: ignore[arg-type]
    # Within a gap that admits it: kept, the difference logged.
    gap = abs(worse - live.objective) / max(abs(worse), abs(live.objective)) + 1e-6
    monkeypatch.setattr(memo_module, "_ACTIVE", None)
    monkeypatch.setattr(memo_module, "HIGHS_MIP_REL_GAP", gap)
    with caplog.at_level(logging.WARNING, logger="mlsched.scheduler.solvers.memo"):
        got = solve_milp(**program)  # type: ignore[arg-type]
    assert got.objective == worse
    memo = active_memo()
    assert memo is not None and (memo.verified, memo.differed) == (1, 1)
    assert "another point" in caplog.text
