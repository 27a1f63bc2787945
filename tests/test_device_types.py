"""The cluster's worker and PS type catalogue: loading (every bad field named), what a
cluster cannot honour, what a job gets wrong, and the engine's use of both."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from engine_helpers import make_engine

from mlsched.core import Arch, Cluster, JobSpec, JobState, RejectKind, ResourceVector, Server
from mlsched.core.device_types import MAX_TYPES, TypeCatalogue
from mlsched.core.errors import SpecError
from mlsched.core.type_hosts import type_problems, worker_hosts
from mlsched.engine.engine import Engine
from mlsched.scheduler import create
from mlsched.scheduler.hetero.catalogue import DEFAULT_CATALOGUE, worker_servers

CLUSTER_YAML = """
servers:
  - {name: v, capacity: {gpu: 4, cpu: 32, bw_gbps: 10}, gpu_type: V100}
  - {name: k, capacity: {gpu: 8, cpu: 32, bw_gbps: 10}, gpu_type: K80}
  - {name: p, capacity: {cpu: 32, bw_gbps: 25}, pool: ps}
types:
  workers:
    v100x2: {gpu_model: V100, gpu: 2, cpu: 8, bw_gbps: 2.5}
    k80x4: {gpu_model: K80, gpu: 4, cpu: 8, bw_gbps: 2}
    cpu1: {cpu: 1}
  ps:
    ps1: {cpu: 4, bw_gbps: 10}
"""


def _cluster(text: str = CLUSTER_YAML) -> Cluster:
    return Cluster.from_dict(yaml.safe_load(text))


def test_a_cluster_description_carries_its_types_and_writes_them_back() -> None:
    cluster = _cluster()
    types = cluster.types
    assert list(types.workers) == ["v100x2", "k80x4", "cpu1"] and list(types.ps) == ["ps1"]
    assert types.gpu_model("v100x2") == "V100" and types.gpu_model("cpu1") is None
    assert types.workers["k80x4"].demand == ResourceVector({"gpu": 4, "cpu": 8, "bw_gbps": 2})
    # Which servers host a type: its GPU model's worker servers; a type without a model
    # and a type the catalogue does not know run on any worker server.
    assert worker_hosts(cluster, "v100x2", types) == (0,)
    assert worker_hosts(cluster, "k80x4", types) == (1,)
    assert worker_hosts(cluster, "cpu1", types) == (0, 1)
    assert worker_hosts(cluster, "other", types) == (0, 1)
    assert type_problems(cluster, types) == []
    again = Cluster.from_dict(cluster.to_dict())
    assert again.types == types and again == cluster
    assert not Cluster.from_dict({"servers": cluster.to_dict()["servers"]}).types


@pytest.mark.parametrize(
    ("types", "field"),
    [
        ({"workers": {"a": {"gpu_model": 3, "gpu": 1}}}, "types.workers.a.gpu_model"),
        ({"workers": {"a": {"gpu": -1}}}, "types.workers.a"),
        ({"workers": {"a b": {"gpu": 1}}}, "types.workers key"),
        ({"workers": ["a"]}, "types.workers"),
        ({"ps": {"p": {"cpu": "many"}}}, "types.ps.p"),
        ({"gpus": {}}, "types"),
        ({"workers": {f"w{i}": {"cpu": 1} for i in range(MAX_TYPES + 1)}}, "types.workers"),
    ],
)
def test_a_bad_catalogue_is_refused_naming_the_field(types: object, field: str) -> None:
    raw = yaml.safe_load(CLUSTER_YAML)
    raw["types"] = types
    with pytest.raises(SpecError) as err:
        Cluster.from_dict(raw)
    assert err.value.field.startswith(field), err.value


def test_problems_name_a_model_no_server_has_and_bundles_no_host_holds() -> None:
    raw = yaml.safe_load(CLUSTER_YAML)
    raw["types"]["workers"]["m60x1"] = {"gpu_model": "M60", "gpu": 1}
    raw["types"]["workers"]["v100x8"] = {"gpu_model": "V100", "gpu": 8}
    raw["types"]["ps"]["huge"] = {"cpu": 64}
    cluster = Cluster.from_dict(raw)  # a live cluster may still grow: loading accepts it
    fields = [p.field for p in type_problems(cluster)]
    assert fields == ["types.workers.m60x1.gpu_model", "types.workers.v100x8", "types.ps.huge"]
    # A simulated cluster is fixed: the engine refuses it, naming the first.
    with pytest.raises(SpecError, match=r"types\.workers\.m60x1\.gpu_model"):
        _engine(cluster, [])


def _job(job_id: str, worker_types: dict[str, ResourceVector]) -> JobSpec:
    return JobSpec(
        job_id,
        arch=Arch.ALLREDUCE,
        chunks=2,
        batches_per_chunk=10,
        worker=ResourceVector({"gpu": 2, "cpu": 8, "bw_gbps": 2.5}),
        worker_types=worker_types,
        compute_s=1.0,
        gradient_mb=1.0,
    )


def _engine(cluster: Cluster, jobs: list[JobSpec]) -> Engine:
    engine = make_engine(cluster, create("fifo"), jobs, slot_seconds=60.0)
    return engine


def test_the_engine_rejects_a_job_whose_types_are_not_the_clusters() -> None:
    """A job offering a type the catalogue lacks, or the catalogue's type with another
    bundle, is rejected as infeasible with the field in its reason; the others run."""
    cluster = _cluster()
    v100x2 = cluster.types.workers["v100x2"].demand
    jobs = [
        _job("ok", {"v100x2": v100x2}),
        _job("unknown", {"a100x1": ResourceVector({"gpu": 1})}),
        _job("other", {"v100x2": ResourceVector({"gpu": 2, "cpu": 4})}),
    ]
    result = _engine(cluster, jobs).run(until=50)
    assert result.records["ok"].state is JobState.DONE
    for job_id, field in (("unknown", "worker_types.a100x1"), ("other", "worker_types.v100x2")):
        record = result.records[job_id]
        assert record.state is JobState.REJECTED
        assert record.reject_kind is RejectKind.INFEASIBLE and field in record.reason


def test_a_cluster_without_types_lets_typed_jobs_run_anywhere() -> None:
    plain = Cluster(
        (Server("a", ResourceVector({"gpu": 4}), gpu_type="K80"), Server("b", {"gpu": 4}))
    )
    job = _job("j", {"v100x1": ResourceVector({"gpu": 1})})
    assert TypeCatalogue().job_problem(job) is None
    assert worker_servers(job, "v100x1", plain, plain.types) == [0, 1]
    # The shipped table restricts the type to its model's servers (none here).
    assert worker_servers(job, "v100x1", plain, DEFAULT_CATALOGUE) == []


def test_the_controller_gives_a_policy_its_testbed_settings_unless_set(tmp_path: Path) -> None:
    """hetero's testbed settings (spec 002 §7) apply on the controller; an operator's
    --policy-option wins; a policy without any keeps exactly what it was given."""
    from mlsched.controller.config import ControllerConfig
    from mlsched.controller.server import Controller

    def options(policy: str, given: dict[str, object], name: str) -> dict[str, object]:
        cfg = ControllerConfig(policy=policy, policy_options=given, db=str(tmp_path / name))
        ctl = Controller(cfg)
        try:
            return ctl.policy_options
        finally:
            ctl.stop()

    assert options("hetero", {}, "a.db") == {"compact_offsets": True, "alpha": 2}
    assert options("hetero", {"alpha": 1}, "b.db") == {"compact_offsets": True, "alpha": 1}
    assert options("fifo", {"ps_rule": "needed"}, "c.db") == {"ps_rule": "needed"}


def test_the_controller_refuses_a_bad_types_file_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlsched.cli import main

    bad = tmp_path / "types.yaml"
    bad.write_text("workers: {v100x1: {gpu_model: V100, gpu: -2}}\n", encoding="utf-8")
    assert main(["controller", "--types", str(bad), "--db", str(tmp_path / "db")]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "types.workers.v100x1" in err
    assert main(["controller", "--types", str(tmp_path / "none.yaml")]) == 2
    assert "types" in capsys.readouterr().err
