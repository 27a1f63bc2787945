"""The Philly-shaped trace generator: its shape, its load, its format (read back by the
Philly importer), its errors, and the command that writes it."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from mlsched.cli import main
from mlsched.core.cluster import Cluster
from mlsched.core.errors import SpecError
from mlsched.workloads.trace import load_cluster_file
from mlsched.workloads.traces import import_trace
from mlsched.workloads.traces.records import seconds
from mlsched.workloads.traces.synth import PhillyShape, generate_philly, philly_cluster


def _run_s(entry: dict) -> float:
    return sum(
        seconds(a["end_time"], "end") - seconds(a["start_time"], "start") for a in entry["attempts"]
    )


def _gpus(entry: dict) -> int:
    return sum(len(m["gpus"]) for m in entry["attempts"][-1]["detail"])


@pytest.mark.parametrize("seed", range(8))
def test_shape_follows_the_distributions_asked_for(seed: int) -> None:
    shape = PhillyShape()
    jobs = generate_philly(6000, cluster_gpus=512, seed=seed)
    sizes = Counter(_gpus(j) for j in jobs)
    share = {g: shape.gpus[g] / sum(shape.gpus.values()) for g in shape.gpus}
    for g, p in share.items():  # binomial: 6,000 draws, within 5 standard deviations
        assert abs(sizes[g] / 6000 - p) <= 5 * (p * (1 - p) / 6000) ** 0.5 + 1e-9, g
    assert set(sizes) <= set(shape.gpus)
    # Larger jobs run longer: the medians of the buckets keep the shape's order.
    one = statistics.median(_run_s(j) for j in jobs if _gpus(j) == 1)
    big = statistics.median(_run_s(j) for j in jobs if _gpus(j) > 4)
    assert abs(one / (shape.median_min[0] * 60) - 1) < 0.15
    assert big > 2 * one
    assert max(_run_s(j) for j in jobs) <= shape.max_days * 86400 + 60


@pytest.mark.parametrize("load", [0.3, 0.8, 1.5])
def test_arrivals_make_the_load_asked_for(load: float) -> None:
    jobs = generate_philly(3000, cluster_gpus=256, load=load, seed=1)
    submit = [seconds(j["submitted_time"], "submitted_time") for j in jobs]
    assert submit == sorted(submit)
    span = max(submit) - min(submit)
    work = sum(_gpus(j) * _run_s(j) for j in jobs)
    # The last arrival falls just before the span's end: within a few percent.
    assert work / (span * 256) == pytest.approx(load, rel=0.05)


def test_days_are_busier_than_nights() -> None:
    jobs = generate_philly(20000, cluster_gpus=2048, seed=2)
    hours = Counter(int(j["submitted_time"][11:13]) for j in jobs)
    afternoon = sum(hours[h] for h in range(12, 18))
    night = sum(hours[h] for h in range(0, 6))
    assert afternoon > 1.8 * night  # rate 1.5 against 0.5 at the extremes, sampled


def test_failed_jobs_retry_and_attempts_add_up() -> None:
    jobs = generate_philly(4000, cluster_gpus=256, seed=3)
    failed = [j for j in jobs if j["status"] == "Failed"]
    assert failed and any(len(j["attempts"]) > 1 for j in failed)
    assert all(len(j["attempts"]) == 1 for j in jobs if j["status"] != "Failed")
    for j in failed[:200]:
        starts = [seconds(a["start_time"], "s") for a in j["attempts"]]
        ends = [seconds(a["end_time"], "e") for a in j["attempts"]]
        assert all(e > s for s, e in zip(starts, ends, strict=True))
        assert all(n >= e for e, n in zip(ends, starts[1:], strict=False))  # in order
    # Jobs larger than a machine span machines of 8 GPUs.
    wide = next(j for j in jobs if _gpus(j) == 16)
    assert [len(m["gpus"]) for m in wide["attempts"][0]["detail"]] == [8, 8]


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    a = generate_philly(500, cluster_gpus=64, seed=7)
    assert a == generate_philly(500, cluster_gpus=64, seed=7)
    assert a != generate_philly(500, cluster_gpus=64, seed=8)


def test_the_philly_importer_reads_it_whole(tmp_path: Path) -> None:
    jobs = generate_philly(2000, cluster_gpus=256, seed=4)
    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps(jobs))
    cluster = Cluster.from_dict(philly_cluster(256))
    imported = import_trace(path, "philly", cluster=cluster, slot_seconds=360)
    assert len(imported.jobs) == 2000
    by_id = {j.job_id: j for j in imported.jobs}
    for entry in jobs[:300]:
        spec = by_id[entry["jobid"]]
        assert spec.min_workers == spec.max_workers == _gpus(entry)
        assert spec.compute_s * spec.batches_per_chunk == pytest.approx(_run_s(entry), rel=1e-6)
    summary = imported.notes["summary"]
    assert summary["cluster_gpus"] == 256
    assert summary["load"] == pytest.approx(0.8, rel=0.05)
    assert imported.notes["source"]["statuses"]["Failed"] > 0


def test_cluster_has_the_gpus_asked_for_rounded_up_to_machines() -> None:
    cluster = Cluster.from_dict(philly_cluster(2050))
    gpus = np.asarray(cluster.capacity)[:, cluster.resource_names.index("gpu")]
    assert gpus.sum() == 2056 and len(cluster) == 257
    assert len({s.rack for s in cluster.servers}) == 17
    assert len({s.name for s in cluster.servers}) == 257


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"n_jobs": 0}, "jobs"),
        ({"cluster_gpus": 0}, "cluster_gpus"),
        ({"load": 0.0}, "load"),
        ({"load": float("nan")}, "load"),
        ({"cluster_gpus": 16}, "gpus"),  # a 32-GPU job never fits 16 GPUs
        ({"shape": PhillyShape(gpus={1: -1.0})}, "gpus[1]"),
        ({"shape": PhillyShape(gpus={0: 1.0})}, "gpus"),
        ({"shape": PhillyShape(sigma=-1)}, "sigma"),
        ({"shape": PhillyShape(diurnal=1.0)}, "diurnal"),
        ({"shape": PhillyShape(retry_p=1.0)}, "retry_p"),
        ({"shape": PhillyShape(median_min=(0.0, 1.0, 1.0, 1.0))}, "median_min"),
    ],
)
def test_bad_arguments_name_the_field(kwargs: dict, field: str) -> None:
    args = {"n_jobs": 10, "cluster_gpus": 64, **kwargs}
    with pytest.raises(SpecError) as err:
        generate_philly(args.pop("n_jobs"), **args)
    assert err.value.field == field


def test_command_writes_a_trace_and_a_cluster_that_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace, cluster = tmp_path / "t.json", tmp_path / "c.yaml"
    rc = main(
        [
            "trace",
            "generate",
            "--jobs",
            "300",
            "--gpus",
            "64",
            "--load",
            "0.5",
            "--seed",
            "3",
            "--out",
            str(trace),
            "--cluster-out",
            str(cluster),
        ]
    )
    assert rc == 0
    assert "300 Philly-shaped jobs for 64 GPUs at load 0.5" in capsys.readouterr().out
    assert len(json.loads(trace.read_text())) == 300
    assert load_cluster_file(cluster).total[0] >= 0
    out = tmp_path / "w.json"
    assert (
        main(
            [
                "trace",
                "import",
                str(trace),
                "--format",
                "philly",
                "--cluster",
                str(cluster),
                "--out",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    notes = json.loads(capsys.readouterr().out)
    assert notes["summary"]["jobs"] == 300
    assert notes["summary"]["load"] == pytest.approx(0.5, rel=0.1)
    assert main(["simulate", "--workload", str(out), "--policy", "fifo", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    run = runs[0] if isinstance(runs, list) else runs
    assert run["completed"] == 300


def test_command_refuses_bad_values(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "x.json"
    assert main(["trace", "generate", "--jobs", "-3", "--gpus", "8", "--out", str(out)]) == 2
    assert "--jobs" in capsys.readouterr().err
    # A value the parser takes but the generator refuses: the error names it, nothing written.
    assert (
        main(["trace", "generate", "--jobs", "5", "--gpus", "8", "--load", "50", "--out", str(out)])
        != 0
    )
    assert "load" in capsys.readouterr().err
    assert not out.exists()
