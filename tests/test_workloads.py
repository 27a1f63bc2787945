"""Workloads: the oasis-paper generator matches spec 001 §5.1 (with the §6 fixes), the demo
is what it says, and workload files load, validate and round-trip."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from mlsched.core.errors import SpecError
from mlsched.core.job import Arch, SyncMode
from mlsched.core.utility import UtilityKind
from mlsched.workloads import builtin_workloads, load_workload
from mlsched.workloads.oasis import min_duration_slots, oasis_paper
from mlsched.workloads.oasis_testbed import TESTBED_MODELS
from mlsched.workloads.pdors import MACHINE, pdors_paper
from mlsched.workloads.trace import (
    load_trace_csv,
    load_workload_file,
    save_workload,
    write_trace_csv,
)


@pytest.fixture(scope="module")
def paper():
    return oasis_paper(seed=7, jobs=400)


# oasis-paper ----------------------------------------------------------------------------
def test_builtin_names():
    names = builtin_workloads()
    assert {"oasis-paper", "oasis-testbed", "pdors-paper", "demo"} <= set(names)
    assert all(desc for desc in names.values())


def test_oasis_cluster_follows_the_swapped_pools(paper):
    cluster = paper.cluster
    workers = [cluster.servers[i] for i in cluster.worker_servers]
    ps = [cluster.servers[i] for i in cluster.ps_servers]
    assert len(workers) == 50 and len(ps) == 50 and len(cluster) == 100
    assert all(s.capacity["gpu"] in (4, 8, 16) for s in workers)
    assert all(s.capacity["gpu"] == 0 and s.capacity["cpu"] == 36 for s in ps)
    for s in cluster.servers:
        assert s.capacity["storage_gb"] == 1000
        assert 20 <= s.capacity["bw_gbps"] <= 50
        assert s.uplink_gbps == s.capacity["bw_gbps"]


def test_oasis_literal_pools_flag():
    w = oasis_paper(seed=0, jobs=5, servers=3, swap_pools=False)
    assert all(w.cluster.servers[i].capacity["gpu"] == 0 for i in w.cluster.worker_servers)
    assert all(w.cluster.servers[i].capacity["gpu"] > 0 for i in w.cluster.ps_servers)


def test_oasis_jobs_match_their_ranges(paper):
    assert len(paper.jobs) == 400
    assert paper.horizon_slots == 300 and paper.slot_seconds == 3600
    models = {j.model for j in paper.jobs}
    assert len(models) == 400
    for j in paper.jobs:
        assert j.arch is Arch.PS and j.sync is SyncMode.ASYNC and j.batch_size == 1
        assert 0 <= j.arrival_slot < 300
        assert 50 <= j.epochs <= 200 and 5 <= j.chunks <= 100 and 10 <= j.batches_per_chunk <= 100
        assert j.max_workers == j.chunks
        tau = j.compute_s / paper.slot_seconds
        assert 0.001 <= tau <= 0.1
        assert 30 <= j.gradient_mb <= 575
        w, p = j.worker, j.ps
        assert 0 <= w["gpu"] <= 4 and 1 <= w["cpu"] <= 10 and 2 <= w["mem_gb"] <= 32
        assert 5 <= w["storage_gb"] <= 10 and 0.1 <= w["bw_gbps"] <= 5
        assert p["gpu"] == 0 and 1 <= p["cpu"] <= 10 and 2 <= p["mem_gb"] <= 32
        assert 5 <= p["storage_gb"] <= 10 and 5 <= p["bw_gbps"] <= 20
        u = j.utility
        assert u.kind is UtilityKind.SIGMOID
        assert 1 <= u.params["priority"] <= 100 and 1 <= u.params["target"] <= 15


def test_oasis_min_duration_bound_holds(paper):
    for j in paper.jobs:
        d_min = min_duration_slots(
            j.epochs,
            j.batches_per_chunk,
            j.compute_s / paper.slot_seconds,
            j.gradient_mb,
            j.worker["bw_gbps"],
            paper.slot_seconds,
        )
        assert 1 <= d_min <= 15
        # The same bound from the work units: Work / N worker-slots at theta seconds each.
        theta_s = j.compute_s + 2 * j.gradient_mb * 8e6 / (j.worker["bw_gbps"] * 1e9)
        assert j.total_work * theta_s / j.chunks / paper.slot_seconds <= 15 + 1e-9
    rate = paper.notes["resample_rejection_rate"]
    assert 0 < rate < 1
    assert paper.notes["draws"] == pytest.approx(400 / (1 - rate))


def test_oasis_class_mix_is_about_10_55_35(paper):
    decays = [j.utility.params["decay"] for j in paper.jobs]
    insensitive = sum(d == 0 for d in decays) / len(decays)
    sensitive = sum(0.01 <= d <= 1 for d in decays) / len(decays)
    critical = sum(4 <= d <= 6 for d in decays) / len(decays)
    assert insensitive + sensitive + critical == pytest.approx(1.0)
    assert abs(insensitive - 0.10) < 0.05
    assert abs(sensitive - 0.55) < 0.07
    assert abs(critical - 0.35) < 0.07
    counts = paper.notes["class_counts"]
    assert counts["insensitive"] == round(insensitive * 400)


def test_oasis_is_deterministic_and_seeded():
    a = oasis_paper(seed=3, jobs=20, servers=4)
    b = oasis_paper(seed=3, jobs=20, servers=4)
    c = oasis_paper(seed=4, jobs=20, servers=4)
    assert a.to_dict() == b.to_dict()
    assert a.to_dict() != c.to_dict()


def test_oasis_scaling_knobs():
    w = load_workload(
        "oasis-paper",
        seed=1,
        jobs=12,
        horizon=20,
        slot_seconds=600,
        options={"servers": 3, "ps_servers": 2},
    )
    assert len(w.jobs) == 12 and w.horizon_slots == 20 and w.slot_seconds == 600
    assert len(w.cluster.worker_servers) == 3 and len(w.cluster.ps_servers) == 2
    assert all(0 <= j.arrival_slot < 20 for j in w.jobs)
    assert all(0.6 <= j.compute_s <= 60 for j in w.jobs)  # tau in [0.001, 0.1] slots of 600 s


def test_oasis_rejects_bad_options():
    with pytest.raises(SpecError) as err:
        load_workload("oasis-paper", options={"serverz": 3})
    assert err.value.field == "options.serverz"
    with pytest.raises(SpecError) as err:
        oasis_paper(seed=0, class_mix=(1.0, 0.0))
    assert err.value.field == "class_mix"


def test_unknown_workload_names_the_problem():
    with pytest.raises(SpecError) as err:
        load_workload("no-such-workload")
    assert err.value.field == "workload" and "oasis-paper" in str(err.value)


# pdors-paper ----------------------------------------------------------------------------
def test_pdors_jobs_follow_section_5_1():
    w = pdors_paper(seed=3, jobs=200)
    assert w.horizon_slots == 20 and w.slot_seconds == 3600.0 and len(w.cluster) == 100
    assert all(s.capacity.as_dict() == MACHINE for s in w.cluster.servers)
    for j in w.jobs:
        assert (j.arch, j.sync, j.batch_size, j.chunks) == (Arch.PS, SyncMode.SYNC, 1, 1)
        assert 50 <= j.epochs <= 200 and 20_000 <= j.batches_per_chunk <= 500_000
        assert j.global_batch == j.max_workers and 1 <= j.global_batch <= 200
        assert j.ps_ratio in range(1, 11) and 30 <= j.gradient_mb <= 575
        assert 1e-5 <= j.compute_s / 3600 <= 1e-4
        assert 0.1 <= j.worker_bw_gbps <= 5 and j.internal_gbps == pytest.approx(
            10 * j.worker_bw_gbps, abs=1e-3
        )
        assert j.worker["gpu"] <= 4 and j.ps["gpu"] == 0
        # gamma workers per PS: the bandwidth rule and the ratio agree (A7).
        for n in (1, 7, 30):
            assert j.ps_needed(n) == math.ceil(n / j.ps_ratio - 1e-9)
        assert j.utility.kind is UtilityKind.SIGMOID


def test_pdors_arrivals_favour_the_papers_even_slots():
    # Weight 2 in the paper's even slots (our odd indices): about 2/3 of the arrivals.
    w = pdors_paper(seed=0, jobs=3000, horizon=20)
    share = sum(j.arrival_slot % 2 == 1 for j in w.jobs) / len(w.jobs)
    assert share == pytest.approx(2 / 3, abs=0.04)  # > 5 standard deviations of slack


def test_pdors_reports_the_jobs_that_cannot_finish_alone():
    # Spec 000 §5.1 measured 41 % (compute only); b(i) and b(e) only add time. 8 x 250 jobs:
    # the standard error of the mean is about 1.1 points.
    rows = [pdors_paper(seed=s, jobs=250).notes["infeasible_alone"] for s in range(8)]
    compute = sum(r["compute_only"] for r in rows) / len(rows)
    assert compute == pytest.approx(0.41, abs=0.05)
    for r in rows:
        assert r["compute_only"] <= r["internal"] <= r["external"]
    assert "cannot finish even alone" in pdors_paper(seed=0, jobs=5).description


def test_pdors_job_set_is_independent_of_the_cluster():
    shared = pdors_paper(seed=5, jobs=30, servers=100)
    split = pdors_paper(seed=5, jobs=30, servers=10, pools="split")
    assert [j.to_dict() for j in shared.jobs] == [j.to_dict() for j in split.jobs]
    pools = [s.pool.value for s in split.cluster.servers]
    assert pools.count("worker") == 5 and pools.count("ps") == 5
    assert {s.pool.value for s in shared.cluster.servers} == {"both"}
    assert pdors_paper(seed=6, jobs=30).jobs != shared.jobs


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"pools": "mixed"}, "pools"),
        ({"servers": 1, "pools": "split"}, "servers"),
        ({"class_mix": [1, 2]}, "class_mix"),
        ({"jobs": 0}, "jobs"),
        ({"slot_seconds": -1}, "slot_seconds"),
    ],
)
def test_pdors_bad_options_name_the_field(options: dict, field: str):
    with pytest.raises(SpecError) as err:
        pdors_paper(**options)
    assert err.value.field == field


# oasis-testbed ----------------------------------------------------------------------------
def test_oasis_testbed_follows_section_5_4():
    w = load_workload("oasis-testbed", seed=2)
    cluster = w.cluster
    workers = [cluster.servers[i] for i in cluster.worker_servers]
    ps_hosts = [cluster.servers[i] for i in cluster.ps_servers]
    assert len(workers) == 7 and len(ps_hosts) == 2
    assert sum(s.capacity["gpu"] for s in workers) == 4
    assert all(s.capacity["cpu"] == 32 and s.capacity["mem_gb"] == 80 for s in workers)
    assert all(s.capacity["cpu"] == 8 and s.capacity["mem_gb"] == 32 for s in ps_hosts)
    assert len(w.jobs) == 12 and w.horizon_slots == 10 and w.slot_seconds == 1200
    assert all(0 <= j.arrival_slot <= 8 for j in w.jobs)
    for j in w.jobs:
        assert j.model in TESTBED_MODELS and j.arch is Arch.PS and j.sync is SyncMode.ASYNC
        assert (j.chunks, j.batches_per_chunk) in {(10, 2), (7, 3)} and 4 <= j.epochs <= 30
        for task in (j.worker, j.ps):
            assert 1 <= task["cpu"] <= 5 and 2 <= task["mem_gb"] <= 10
            assert 1.0 <= task["bw_gbps"] <= 3.0 and task["gpu"] <= 1
        assert j.ps["gpu"] == 0
        comm = 2 * j.gradient_mb * 8e6 / (j.worker["bw_gbps"] * 1e9)
        minutes = j.total_work * (j.compute_s + comm) / 2 / 60
        assert 40 <= minutes <= 120  # "each job runs for 40 min-2 h" (with two workers)


def test_oasis_testbed_gradients_are_the_project_models():
    from mlsched.trainers.models import model_info

    for name, (millions, _) in TESTBED_MODELS.items():
        info = model_info(name, num_classes=1000, image_size=224)
        assert info.trainable_params / 1e6 == pytest.approx(millions, rel=1e-4)


def test_oasis_testbed_bad_option_names_the_field():
    with pytest.raises(SpecError) as err:
        load_workload("oasis-testbed", options={"arrival_slots": 0})
    assert err.value.field == "arrival_slots"
    with pytest.raises(SpecError) as err:
        load_workload("oasis-testbed", options={"gpu_share": 2})
    assert err.value.field == "gpu_share"


# demo -----------------------------------------------------------------------------------
def test_demo_workload_shape():
    w = load_workload("demo")
    assert len(w.jobs) == 12 and len(w.cluster) == 4 and w.horizon_slots == 40
    kinds = {(j.arch, j.sync) for j in w.jobs}
    assert kinds == {
        (Arch.PS, SyncMode.ASYNC),
        (Arch.PS, SyncMode.SYNC),
        (Arch.ALLREDUCE, SyncMode.SYNC),
    }
    assert {j.model for j in w.jobs} == {"resnet20", "resnet56", "vgg11", "vgg16"}
    assert load_workload("demo").to_dict() == w.to_dict()
    assert load_workload("demo", seed=1).to_dict() != w.to_dict()
    assert len(load_workload("demo", jobs=30).jobs) == 30


# files ----------------------------------------------------------------------------------
def _same(a, b) -> None:
    assert a.jobs == b.jobs
    assert a.cluster == b.cluster
    assert (a.horizon_slots, a.slot_seconds, dict(a.runtime)) == (
        b.horizon_slots,
        b.slot_seconds,
        dict(b.runtime),
    )


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_workload_file_round_trips(tmp_path: Path, suffix: str):
    original = load_workload("demo")
    path = save_workload(original, tmp_path / f"mix{suffix}")
    again = load_workload(str(path))
    _same(original, again)
    assert again.name == "demo"


def test_csv_trace_round_trips(tmp_path: Path):
    original = oasis_paper(seed=2, jobs=15, servers=3)
    csv_path = write_trace_csv(original.jobs, tmp_path / "trace.csv")
    assert load_trace_csv(csv_path) == list(original.jobs)
    # A YAML workload may reference the trace; a bare trace takes --cluster.
    cluster_file = tmp_path / "cluster.yaml"
    cluster_file.write_text(yaml.safe_dump(original.cluster.to_dict()))
    doc = {
        "horizon_slots": 300,
        "slot_seconds": 3600,
        "runtime": {"ps_async": "ps_async"},
        "cluster": original.cluster.to_dict(),
        "jobs": "trace.csv",
    }
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(doc))
    _same(original, load_workload(str(tmp_path / "w.yaml")))
    bare = load_workload(str(csv_path), jobs=5, horizon=300, options={"cluster": str(cluster_file)})
    assert bare.jobs == original.jobs[:5] and bare.cluster == original.cluster


def test_csv_dotted_columns_and_empty_cells(tmp_path: Path):
    path = tmp_path / "t.csv"
    path.write_text(
        "job_id,arrival_slot,worker.gpu,worker.cpu,utility.kind,utility.value,"
        "max_workers\n"
        "a,0,1,2,constant,5,\n"
        "b,3,,4,constant,2,4\n"
    )
    a, b = load_trace_csv(path)
    assert a.worker == {"gpu": 1, "cpu": 2} and a.max_workers == 1
    assert b.worker == {"cpu": 4} and b.arrival_slot == 3 and b.max_workers == 4
    assert a.utility.params == {"value": 5.0}


_CLUSTER = {"servers": [{"name": "s", "capacity": {"cpu": 8, "gpu": 2}}]}


def test_bad_yaml_job_names_file_index_and_field(tmp_path: Path):
    doc = {
        "cluster": _CLUSTER,
        "jobs": [{"job_id": "ok"}, {"job_id": "bad", "utility": {"kind": "nope"}}],
    }
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecError) as err:
        load_workload_file(path)
    assert err.value.field == "jobs[1].utility.kind"
    assert str(path) in str(err.value) and "nope" in str(err.value)


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"cluster": _CLUSTER, "jobs": [{"job_id": "a"}, {"job_id": "a"}]}, "jobs[1].job_id"),
        ({"cluster": _CLUSTER, "jobs": [{"job_id": "a", "epochs": 0}]}, "jobs[0].epochs"),
        (
            {"cluster": _CLUSTER, "jobs": [{"job_id": "a", "worker": {"gpu": -1}}]},
            "jobs[0].worker.gpu",
        ),
        ({"cluster": _CLUSTER, "jobs": [], "horizon": 3}, "horizon"),
        ({"cluster": _CLUSTER, "jobs": [], "runtime": {"ps_async": "nope"}}, "runtime.ps_async"),
        (
            {"cluster": {"servers": [{"name": "s", "capacity": {"cpu": "x"}}]}, "jobs": []},
            "cluster.servers[0].capacity.cpu",
        ),
        ({"jobs": []}, "cluster"),
        ({"cluster": _CLUSTER, "jobs": {"a": 1}}, "jobs"),
    ],
    ids=[
        "duplicate-id",
        "epochs",
        "worker-gpu",
        "unknown-key",
        "runtime",
        "cluster",
        "no-cluster",
        "jobs-not-list",
    ],
)
def test_bad_workload_documents(tmp_path: Path, doc: dict, field: str):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SpecError) as err:
        load_workload_file(path)
    assert err.value.field == field
    assert str(path) in str(err.value)


def test_yaml_syntax_error_names_the_file(tmp_path: Path):
    path = tmp_path / "broken.yaml"
    path.write_text("cluster: [1,\n")
    with pytest.raises(SpecError) as err:
        load_workload_file(path)
    assert str(path) in str(err.value) and "YAML" in str(err.value)


@pytest.mark.parametrize(
    ("text", "row", "field"),
    [
        ("job_id,worker.gpu\na,1\nb,x\n", "row 2", "worker.gpu"),
        ("job_id,epochs\na,1\nb,1.5\n", "row 2", "epochs"),
        ("job_id,utility.kind\na,constant\n", "row 1", "utility.value"),
        ("job_id,arch\na,ps\na,ps\n", "row 2", "job_id"),
        ("job_id,arch\na,ring\n", "row 1", "arch"),
    ],
    ids=["number", "integer", "utility-param", "duplicate", "choice"],
)
def test_bad_csv_rows_name_file_row_and_field(tmp_path: Path, text: str, row: str, field: str):
    path = tmp_path / "trace.csv"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        load_trace_csv(path)
    assert err.value.field == field
    assert str(path) in str(err.value) and row in str(err.value)


def test_unknown_csv_column_is_named(tmp_path: Path):
    path = tmp_path / "trace.csv"
    path.write_text("job_id,workr.gpu\na,1\n")
    with pytest.raises(SpecError) as err:
        load_trace_csv(path)
    assert "workr.gpu" in str(err.value) and str(path) in str(err.value)


def test_bare_csv_needs_a_cluster(tmp_path: Path):
    path = tmp_path / "trace.csv"
    path.write_text("job_id\na\n")
    with pytest.raises(SpecError) as err:
        load_workload(str(path))
    assert err.value.field == "cluster"


def test_head_and_settings(tmp_path: Path):
    w = load_workload("demo")
    assert [j.job_id for j in w.head(3).jobs] == [j.job_id for j in w.jobs[:3]]
    assert w.with_settings(horizon_slots=7).horizon_slots == 7
    assert math.isclose(w.with_settings(slot_seconds=5).slot_seconds, 5)


def test_docs_examples_load(tmp_path: Path):
    """The YAML and CSV examples in docs/workloads.md load as documented."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "workloads.md").read_text()
    blocks = {}
    for lang in ("yaml", "csv"):
        start = text.index(f"```{lang}\n") + len(lang) + 4
        blocks[lang] = text[start : text.index("```", start)]
    (tmp_path / "w.yaml").write_text(blocks["yaml"])
    (tmp_path / "t.csv").write_text(blocks["csv"])
    w = load_workload(str(tmp_path / "w.yaml"))
    assert [j.job_id for j in w.jobs] == ["resnet-a", "vgg-b"] and len(w.cluster) == 3
    assert w.horizon_slots == 20 and w.runtime == {"ps_sync": "ps_sync"}
    trace = load_workload(str(tmp_path / "t.csv"), options={"cluster": str(tmp_path / "w.yaml")})
    assert [j.job_id for j in trace.jobs] == ["a", "b"]
    assert trace.jobs[1].arch is Arch.ALLREDUCE and trace.jobs[1].utility.params == {"value": 10}
