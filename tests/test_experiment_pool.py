"""The experiment runner's process pool: results in item order, progress per run, and a
clear error for a bad worker cap."""

from __future__ import annotations

import math

import pytest

from mlsched.core.errors import SpecError
from mlsched.experiments.pool import Runner, available_workers


def test_runs_on_worker_processes_in_item_order() -> None:
    done: list[int] = []
    items = [-5, 3, -1, 8, -2]
    with Runner(workers=2) as runner:
        first = runner.map(abs, items, done.append)
        second = runner.map(math.sqrt, [4.0, 9.0], done.append)  # the same pool again
    assert first == [5, 3, 1, 8, 2] and second == [2.0, 3.0]
    assert done == [1] * 7


def test_an_error_in_a_run_is_raised_in_the_caller() -> None:
    with Runner(workers=2) as runner, pytest.raises(ValueError):
        runner.map(math.sqrt, [1.0, -1.0, 4.0], lambda n: None)


def test_one_worker_runs_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLSCHED_WORKERS", "1")
    seen: list[int] = []
    with Runner() as runner:
        assert runner.workers == 1
        assert runner.map(lambda x: x * 2, [1, 2], seen.append) == [2, 4]  # no pickling
    assert seen == [1, 1]


@pytest.mark.parametrize("value", ["0", "many"])
def test_a_bad_worker_cap_names_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("MLSCHED_WORKERS", value)
    with pytest.raises(SpecError) as err:
        available_workers()
    assert err.value.field == "MLSCHED_WORKERS"
