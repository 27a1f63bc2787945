"""The silent traps of a workload file are said out loud (logged), and only where they are."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest
import yaml

from mlsched.core import JobSpec, ResourceVector
from mlsched.workloads import load_workload
from mlsched.workloads.trace import write_trace_csv
from mlsched.workloads.traps import pooled_speeds

CLUSTER = {"servers": [{"name": "g", "count": 2, "capacity": {"gpu": 4, "cpu": 16}}]}


def jobs(speeds: dict[str, tuple[str, float]], late: int = 3) -> list[JobSpec]:
    """One job per id: (model name, compute_s); arrivals 0..late."""
    return [
        JobSpec(
            job_id,
            arrival_slot=min(i, late),
            model=model,
            worker=ResourceVector({"gpu": 1, "cpu": 2}),
            compute_s=compute,
        )
        for i, (job_id, (model, compute)) in enumerate(speeds.items())
    ]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(CLUSTER))
    shared = write_trace_csv(
        jobs({"a": ("resnet", 0.1), "b": ("resnet", 0.4), "c": ("vgg", 0.2)}),
        tmp_path / "shared.csv",
    )
    own = write_trace_csv(
        jobs({"a": ("resnet", 0.1), "b": ("resnet", 0.1), "c": ("vgg", 0.2)}),
        tmp_path / "own.csv",
    )
    timed = tmp_path / "timed.yaml"
    timed.write_text(yaml.safe_dump({"slot_seconds": 60, "cluster": CLUSTER, "jobs": "own.csv"}))
    return {"cluster": cluster, "shared": Path(shared), "own": Path(own), "timed": timed}


def said(caplog: pytest.LogCaptureFixture) -> str:
    return " | ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def test_a_csv_trace_assumes_its_slot_length_aloud(files, caplog) -> None:
    with caplog.at_level(logging.WARNING):
        load_workload(files["own"], options={"cluster": files["cluster"]})
    assert "no slot length given" in said(caplog) and "3600-s slots assumed" in said(caplog)
    assert "different speeds" not in said(caplog)  # same model, same speed: nothing pooled


def test_a_given_slot_length_is_quiet_and_a_new_one_warns_of_the_arrivals(files, caplog):
    with caplog.at_level(logging.WARNING):
        load_workload(files["timed"])
    assert said(caplog) == ""
    with caplog.at_level(logging.WARNING):
        load_workload(files["timed"], slot_seconds=600)
    # slot 2 (the last arrival) of 60 s was 120 s; of 600 s it is 1200 s.
    assert "the last arrival (slot 2) comes at 1200 s instead of 120 s" in said(caplog)


def test_jobs_of_one_model_at_other_speeds_are_named(files, caplog) -> None:
    with caplog.at_level(logging.WARNING):
        load_workload(files["shared"], options={"cluster": files["cluster"]}, slot_seconds=60)
    text = said(caplog)
    assert "resnet (2 jobs)" in text and "vgg" not in text
    assert "arrivals are counted in slots" in text  # 60-s slots move the 3600-s default's


def test_pooling_follows_the_runtime_models_profile_key() -> None:
    base = jobs({"a": ("m", 0.1), "b": ("m", 0.4)})
    assert pooled_speeds(tuple(base)) == {"m": 2}
    # Another batch size is another profile key: fitted apart, nothing pooled.
    apart = (base[0], dataclasses.replace(base[1], batch_size=64))
    assert pooled_speeds(apart) == {}


def test_built_in_generators_raise_no_trap(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        load_workload("oasis-paper", jobs=20)
        load_workload("pdors-paper", jobs=20)
    assert said(caplog) == ""
