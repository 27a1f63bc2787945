"""Trace import: each source format read from small files written here, each job's own
speed kept through the simulator, what was assumed noted, and bad rows named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from mlsched.cli import main
from mlsched.core import SpecError
from mlsched.engine.builder import SimulationConfig, simulate
from mlsched.workloads import load_workload
from mlsched.workloads.trace import load_cluster_file
from mlsched.workloads.traces import import_trace, write_workload

# GPU type -> steps/s of each (job type, scale) alone, Gavel's layout.
THROUGHPUTS = {
    "v100": {
        "('ResNet-18 (batch size 64)', 1)": {"null": 10.0},
        "('LM (batch size 5)', 2)": {"null": 4.0},
    },
    "p100": {
        "('ResNet-18 (batch size 64)', 1)": {"null": 5.0},
        "('LM (batch size 5)', 2)": {"null": 2.0},
    },
    "k80": {
        "('ResNet-18 (batch size 64)', 1)": {"null": 2.0},
        "('LM (batch size 5)', 2)": {"null": 1.0},
    },
    "v100_unconsolidated": {"('ResNet-18 (batch size 64)', 1)": {"null": 1.0}},
}


def gavel_line(job_type: str, steps: int, scale: int, arrival: float, slo: str = "-1") -> str:
    cells = [job_type, "python3 train.py", "dir", "--num_steps", "1", str(steps), str(scale)]
    return "\t".join([*cells, "1", slo, str(arrival)])


@pytest.fixture
def gavel(tmp_path: Path) -> Path:
    (tmp_path / "simulation_throughputs.json").write_text(json.dumps(THROUGHPUTS))
    trace = tmp_path / "small.trace"
    lines = [
        gavel_line("ResNet-18 (batch size 64)", 36_000, 1, 0),
        gavel_line("ResNet-18 (batch size 64)", 36_000, 1, 0),
        gavel_line("LM (batch size 5)", 7_200, 2, 500, slo="1.5"),
    ]
    trace.write_text("\n".join(lines) + "\n")
    return trace


def typed_cluster(tmp_path: Path, types: dict[str, int]) -> Path:
    servers = [
        {"name": t, "count": n, "capacity": {"gpu": 1, "cpu": 8}, "gpu_type": t}
        for t, n in types.items()
    ]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"servers": servers}))
    return path


def test_gavel_jobs_keep_the_table_speed_of_each_gpu_type(gavel: Path, tmp_path: Path) -> None:
    cluster = load_cluster_file(typed_cluster(tmp_path, {"v100": 1, "k80": 1, "p100": 2}))
    imported = import_trace(gavel, "gavel", cluster=cluster, slot_seconds=360)
    resnet, _, lm = imported.jobs
    assert resnet.compute_s_by_type == {"k80": 0.5, "p100": 0.2, "v100": 0.1}
    assert resnet.total_work == 36_000 and resnet.min_workers == resnet.worker_cap == 1
    assert lm.min_workers == lm.worker_cap == 2 and lm.total_work == 2 * 7_200
    assert lm.arrival_slot == 2  # 500 s rounded up to the next 360-s boundary
    notes = imported.notes
    assert "v100_unconsolidated" not in json.dumps(resnet.to_dict())
    assert any("SLOs of 1 jobs ignored" in a for a in notes["assumptions"])
    assert notes["summary"]["cluster_gpus"] == 4

    # Two identical jobs start together on a v100 and a k80: each runs at its own type's
    # speed (3,600 s and 18,000 s), not at one speed for both.
    workload = load_workload(write_workload(imported, tmp_path / "w.yaml")[0]).head(2)
    result = simulate(workload, SimulationConfig(policy="fifo"))
    times = sorted(r.completion_time_s or 0.0 for r in result.records.values())
    assert times == pytest.approx([3600.0, 18000.0])


def test_gavel_errors_name_the_line_and_field(gavel: Path) -> None:
    with gavel.open("a") as fh:
        fh.write("only\tthree\tfields\n")
    with pytest.raises(SpecError, match=r"line 4.*'fields'"):
        import_trace(gavel, "gavel")
    imported = import_trace(gavel, "gavel", skip_invalid=True)
    assert imported.notes["source"]["skipped"] == {"invalid": 1}
    assert len(imported.jobs) == 3
    gavel.write_text(gavel_line("Unknown model", 10, 1, 0) + "\n")
    with pytest.raises(SpecError, match="job_type"):
        import_trace(gavel, "gavel")
    (gavel.parent / "simulation_throughputs.json").unlink()
    with pytest.raises(SpecError, match="throughputs"):
        import_trace(gavel, "gavel")


def test_duration_jobs_finish_at_their_own_run_times(tmp_path: Path) -> None:
    """Jobs of one model name and different run times are not pooled: alone on a large
    cluster, each finishes exactly its trace run time after it arrived."""
    trace = tmp_path / "jobs.csv"
    trace.write_text(
        "id,submit,runtime,num_gpus,net\n"
        "a,0,1000,1,resnet50\n"
        "b,60,7300.5,2,resnet50\n"
        "c,120,100,4,resnet50\n"
    )
    cluster = load_cluster_file(typed_cluster(tmp_path, {"any": 8}))
    imported = import_trace(
        trace,
        "csv",
        columns={
            "job_id": "id",
            "arrival_s": "submit",
            "duration_s": "runtime",
            "gpus": "num_gpus",
            "model": "net",
        },
        cluster=cluster,
        slot_seconds=60,
    )
    assert {j.profile for j in imported.jobs} == {"a", "b", "c"}
    out = write_workload(imported, tmp_path / "w.yaml")
    workload = load_workload(out[0])
    result = simulate(workload, SimulationConfig(policy="fifo"))
    run = {
        job_id: (r.completion_time_s or 0.0) - r.spec.arrival_slot * 60
        for job_id, r in result.records.items()
    }
    assert run == pytest.approx({"a": 1000.0, "b": 7300.5, "c": 100.0})
    assert result.model_errors and max(abs(e.relative) for e in result.model_errors) < 1e-9


def test_csv_mapping_errors_name_fields_and_columns(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("submit,runtime\n0,10\n")
    with pytest.raises(SpecError, match=r"duration_s.*submit, runtime"):
        import_trace(trace, "csv", columns={"arrival_s": "submit"})
    with pytest.raises(SpecError, match="a column of the file"):
        import_trace(trace, "csv", columns={"arrival_s": "when", "duration_s": "runtime"})
    trace.write_text("arrival_s,duration_s,gpus\n0,10,1\nsoon,10,1\n5,0,1\n5,10,0\n")
    with pytest.raises(SpecError, match=r"line 3.*'arrival_s'.*'soon'"):
        import_trace(trace, "csv")
    imported = import_trace(trace, "csv", skip_invalid=True)
    assert imported.notes["source"]["skipped"] == {
        "invalid": 1,
        "never ran": 1,
        "no GPUs": 1,
    }
    assert imported.jobs[0].job_id == "job-000001"


def test_helios_reads_dates_and_skips_cpu_jobs(tmp_path: Path) -> None:
    trace = tmp_path / "cluster_log.csv"
    trace.write_text(
        "job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,"
        "end_time,duration,queue\n"
        "j1,u1,vc1,x,8,32,1,COMPLETED,2020-04-01 00:00:07,2020-04-01 00:00:10,"
        "2020-04-01 01:00:10,3600,3\n"
        "j2,u2,vc1,x,0,4,1,COMPLETED,2020-04-01 00:10:07,,,50,0\n"
        "j3,u1,vc2,y,2,8,1,FAILED,2020-04-01 02:00:07,,,120,5\n"
    )
    imported = import_trace(trace, "helios", slot_seconds=600)
    assert [j.job_id for j in imported.jobs] == ["j1", "j3"]
    assert [j.arrival_slot for j in imported.jobs] == [0, 12]  # 7,200 s later
    assert imported.jobs[0].min_workers == 8
    source = imported.notes["source"]
    assert source["skipped"] == {"no GPUs": 1}
    assert source["statuses"] == {"COMPLETED": 1, "FAILED": 1} and source["users"] == 1


def test_philly_sums_attempts_and_skips_what_never_ran(tmp_path: Path) -> None:
    def attempt(start: str | None, end: str | None, gpus: int) -> dict[str, object]:
        return {
            "start_time": start,
            "end_time": end,
            "detail": [{"ip": "m1", "gpus": [f"gpu{i}" for i in range(gpus)]}],
        }

    jobs = [
        {
            "jobid": "application_1_0001",
            "user": "u",
            "status": "Pass",
            "submitted_time": "2017-10-03 02:00:00",
            "attempts": [
                attempt("2017-10-03 02:00:10", "2017-10-03 02:10:10", 4),
                attempt("2017-10-03 03:00:00", "2017-10-03 03:20:00", 2),
            ],
        },
        {
            "jobid": "application_1_0002",
            "user": "v",
            "status": "Killed",
            "submitted_time": "2017-10-03 02:30:00",
            "attempts": [],
        },
        {
            "jobid": "application_1_0003",
            "user": "v",
            "status": "Failed",
            "submitted_time": "2017-10-03 02:40:00",
            "attempts": [attempt("2017-10-03 02:40:05", None, 1)],
        },
    ]
    trace = tmp_path / "cluster_job_log"
    trace.write_text(json.dumps(jobs))
    imported = import_trace(trace, "philly", slot_seconds=60)
    (job,) = imported.jobs
    assert job.min_workers == 2  # the last attempt's GPUs
    assert job.compute_s * job.total_work / job.min_workers == pytest.approx(1800.0)
    assert imported.notes["source"]["skipped"] == {"never ran": 2}
    trace.write_text(json.dumps({"not": "a list"}))
    with pytest.raises(SpecError, match="a JSON list of jobs"):
        import_trace(trace, "philly")


def test_alibaba_pai_joins_its_tables(tmp_path: Path) -> None:
    # As published: no header rows. Job d has only a CPU task; e never finished.
    (tmp_path / "pai_job_table.csv").write_text(
        "a1,i1,u1,Terminated,100,900\n"
        "b2,i2,u2,Failed,160,400\n"
        "d4,i4,u1,Terminated,200,300\n"
        "e5,i5,u3,Running,250,\n"
    )
    (tmp_path / "pai_task_table.csv").write_text(
        "a1,worker,4,Terminated,110,900,600,29.3,100,V100\n"
        "a1,ps,1,Terminated,110,900,600,29.3,,\n"
        "b2,tensorflow,1,Failed,170,370,600,29.3,50,MISC\n"
        "d4,worker,2,Terminated,210,300,600,29.3,0,\n"
        "e5,worker,1,Running,260,,600,29.3,100,T4\n"
    )
    (tmp_path / "pai_group_tag_table.csv").write_text("i1,u1,V100,g1,bert\n")
    cluster = load_cluster_file(typed_cluster(tmp_path, {"V100": 4, "T4": 2}))
    imported = import_trace(tmp_path, "alibaba-pai", cluster=cluster, slot_seconds=60)
    a, b = imported.jobs
    assert (a.job_id, a.min_workers, a.gpu_type, a.model) == ("a1", 4, "V100", "bert")
    assert a.compute_s * a.total_work / a.min_workers == pytest.approx(790.0)
    assert (b.worker["gpu"], b.gpu_type) == (0.5, None)  # half a GPU; MISC is no type
    assert imported.notes["source"]["skipped"] == {"no GPUs": 1, "never ran": 1}
    small = load_cluster_file(typed_cluster(tmp_path, {"T4": 2}))
    with pytest.raises(SpecError, match=r"V100.*--ignore-gpu-type"):
        import_trace(tmp_path, "alibaba-pai", cluster=small)
    loose = import_trace(tmp_path, "alibaba-pai", cluster=small, ignore_gpu_type=True)
    assert all(j.gpu_type is None for j in loose.jobs)


def test_unsafe_and_repeated_ids_are_made_safe(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,arrival_s,duration_s\n../etc/passwd,0,5\na b,1,5\na-b,2,5\n")
    imported = import_trace(trace, "csv")
    ids = [j.job_id for j in imported.jobs]
    assert ids == ["etc-passwd", "a-b", "a-b-2"]
    assert any("3 job ids made safe" in a for a in imported.notes["assumptions"])


def test_slot_length_is_chosen_from_run_times(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    rows = "".join(f"{i * 100},{3 * 3600}\n" for i in range(9))
    trace.write_text("arrival_s,duration_s\n" + rows)
    imported = import_trace(trace, "csv")
    assert imported.slot_seconds == 900.0  # the largest with a 3-h median job >= 10 slots
    assert imported.notes["slot_seconds"].startswith("chosen: 900 s")


def test_large_workloads_keep_their_jobs_beside(
    gavel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlsched.workloads.trace as trace_module

    monkeypatch.setattr(trace_module, "WORKLOAD_LIMIT", 2_000)
    cluster = load_cluster_file(typed_cluster(tmp_path, {"v100": 2}))
    imported = import_trace(gavel, "gavel", cluster=cluster)
    written = write_workload(imported, tmp_path / "big.yaml")
    assert [p.name for p in written] == ["big.yaml", "big.jobs.json"]
    monkeypatch.undo()
    back = load_workload(written[0])
    assert [j.to_dict() for j in back.jobs] == [j.to_dict() for j in imported.jobs]
    assert back.notes["source"]["format"] == "gavel"
    # Beyond a document's size even as a list: a CSV trace.
    monkeypatch.setattr(trace_module, "WORKLOAD_LIMIT", 200)
    written = write_workload(imported, tmp_path / "huge.yaml")
    assert [p.name for p in written] == ["huge.yaml", "huge.jobs.csv"]
    monkeypatch.undo()
    back = load_workload(written[0])
    assert [j.to_dict() for j in back.jobs] == [j.to_dict() for j in imported.jobs]
    # Many jobs go beside a YAML file too (its loader is slow), not beside a JSON one.
    import mlsched.workloads.traces as traces

    monkeypatch.setattr(traces, "INLINE_JOBS", 2)
    assert len(write_workload(imported, tmp_path / "many.yaml")) == 2
    assert len(write_workload(imported, tmp_path / "many.json")) == 1


def test_cli_import_then_simulate(
    gavel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = typed_cluster(tmp_path, {"v100": 1, "p100": 1, "k80": 1})
    out = tmp_path / "gavel.yaml"
    args = ["trace", "import", str(gavel), "--format", "gavel", "--cluster", str(cluster)]
    assert main([*args, "--slot-seconds", "360", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "3 rows -> 3 jobs" in text and "load" in text and "assumed:" in text
    assert main(["simulate", "--workload", str(out), "--policy", "fifo", "--json"]) == 0
    (summary,) = json.loads(capsys.readouterr().out)
    assert summary["completed"] == 3
    assert main([*args, "--out", str(tmp_path / "w.txt")]) == 2
    assert "--out" in capsys.readouterr().err
    assert main([*args, "--out", str(out), "--column", "arrival_s=x"]) == 2
    assert "only with --format csv" in capsys.readouterr().err


def test_simulate_on_a_foreign_csv_names_every_unknown_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "public.csv"
    trace.write_text("job_id,submit_time,duration,num_gpus,model,user,queue\na,0,10,1,m,u,q\n")
    cluster = typed_cluster(tmp_path, {"v100": 1})
    args = ["simulate", "--workload", str(trace), "--cluster", str(cluster), "--policy", "fifo"]
    assert main(args) == 2
    err = capsys.readouterr().err
    for column in ("submit_time", "duration", "num_gpus", "user", "queue"):
        assert repr(column) in err
    assert "mlsched trace import" in err
    # Without --cluster the columns are still what is wrong, not the missing cluster.
    assert main([a for a in args if a not in ("--cluster", str(cluster))]) == 2
    err = capsys.readouterr().err
    assert "mlsched trace import" in err and "'num_gpus'" in err
