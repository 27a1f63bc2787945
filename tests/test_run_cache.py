"""The run cache shared by experiments (``MLSCHED_RUN_CACHE``): a run comes back from it
only for the same workload, configuration and code, and only where asked for."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mlsched.engine import run_cache
from mlsched.engine.builder import Failure, SimulationConfig, simulate, try_simulate
from mlsched.workloads.loading import load_workload


@pytest.fixture
def workload():  # type: ignore[no-untyped-def]
    return load_workload("oasis-paper", seed=1, jobs=6, horizon=20, options={"servers": 3})


def _stored(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.pickle"))


def test_without_the_variable_nothing_is_stored(workload, monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv(run_cache.ENV, raising=False)
    simulate(workload, SimulationConfig("drf"))
    assert run_cache.cache_dir() is None and not list(tmp_path.iterdir())


def test_a_run_is_stored_once_and_read_back_for_the_same_inputs_only(
    workload, monkeypatch, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(run_cache.ENV, str(tmp_path))
    first = simulate(workload, SimulationConfig("drf", seed=0))
    (path,) = _stored(tmp_path)
    # A result planted under that key is what the same run now returns: it is read, not run.
    planted = dataclasses.replace(first, slots=first.slots + 1000)
    run_cache.store(tmp_path, path.stem, planted)
    assert simulate(workload, SimulationConfig("drf", seed=0)).slots == first.slots + 1000
    # Another seed, policy, option or workload is another run.
    simulate(workload, SimulationConfig("drf", seed=1))
    simulate(workload, SimulationConfig("fifo", seed=0))
    simulate(workload, SimulationConfig("oasis", seed=0, policy_options={"utility_floor": 0.0}))
    other = load_workload("oasis-paper", seed=2, jobs=6, horizon=20, options={"servers": 3})
    simulate(other, SimulationConfig("drf", seed=0))
    assert len(_stored(tmp_path)) == 5
    # A fresh run is asked for by cache=False (a determinism check), and it is not planted.
    fresh = try_simulate(workload, SimulationConfig("drf", seed=0), cache=False)
    assert not isinstance(fresh, Failure) and fresh.slots == first.slots


def test_the_code_is_part_of_the_key(workload, monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(run_cache.ENV, str(tmp_path))
    key = run_cache.run_key(workload, SimulationConfig("drf"))
    monkeypatch.setattr(run_cache, "_code_fingerprint", lambda: b"other code")
    assert run_cache.run_key(workload, SimulationConfig("drf")) != key


def test_a_run_is_keyed_by_value_not_by_what_a_run_left_in_its_inputs(workload) -> None:  # type: ignore[no-untyped-def]
    """Cached properties of jobs and the cluster are filled in by a run; the key of the
    same inputs stays the same (the experiments build fresh workloads, a caller may not)."""
    config = SimulationConfig("drf")
    before = run_cache.run_key(workload, config)
    simulate(workload, config)
    assert run_cache.run_key(workload, config) == before
    with pytest.raises(TypeError, match="object"):
        run_cache.canonical(object())
