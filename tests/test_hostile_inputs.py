"""Hostile job specs, documents, traces and checkpoints: each refused, naming the field, fast
and with a bounded message; nothing runs code or escapes its directory."""

from __future__ import annotations

import math
import os
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch

from mlsched.controller.intake import parse_jobs
from mlsched.controller.runs import TaskSettings, render_tasks
from mlsched.core.documents import MAX_DEPTH
from mlsched.core.errors import MAX_MESSAGE, SpecError
from mlsched.core.ids import check_id, contained
from mlsched.core.job import JobSpec
from mlsched.core.limits import JOB_LIMITS, MAX_DOCUMENT_BYTES, TRAINING_LIMITS
from mlsched.trainers.checkpoint import CheckpointError, TrainState, load_latest, save
from mlsched.workloads.trace import load_trace_csv, load_workload_file

BASE: dict[str, Any] = {"job_id": "ok", "model": "mlp", "arch": "ps", "batch_size": 8}


def refused(document: Any, field: str) -> SpecError:
    """``document`` (a job mapping or a document string) is refused naming ``field``."""
    text = document if isinstance(document, str) else _yaml([document])
    with pytest.raises(SpecError) as info:
        parse_jobs(text)
    assert info.value.field == field, str(info.value)
    assert len(str(info.value)) <= MAX_MESSAGE
    return info.value


def _yaml(jobs: list[dict[str, Any]]) -> str:
    import json

    return json.dumps({"jobs": jobs}, allow_nan=True)


# -- ids and paths --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "job_id",
    ["../../somewhere", "../x", ".hidden", "a/b", "a\x00b", "a\nb", "x" * 129, "", " lead", "é"],
)
def test_bad_job_ids_are_refused_at_intake(job_id: str) -> None:
    refused({**BASE, "job_id": job_id}, "jobs[0].job_id")


@pytest.mark.parametrize("job_id", ["a", "job-1.v2_final", "A" * 128, "0001", "-x"])
def test_good_job_ids_pass(job_id: str) -> None:
    assert [j.job_id for j in parse_jobs(_yaml([{**BASE, "job_id": job_id}]))] == [job_id]


def test_contained_refuses_escapes_and_links(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)
    assert contained(root, "job-1") == (root / "job-1").resolve()
    for part in ("../x", "/etc", "a/../../x", "link/escaped", "a\x00b"):
        with pytest.raises(SpecError):
            contained(root, part)


def test_checkpoint_dir_of_a_job_stays_under_the_root(tmp_path: Path) -> None:
    job = JobSpec.from_dict({**BASE, "job_id": "j1"})
    tasks, *_ = render_tasks(
        job,
        (("a0", 1, 1),),
        number=1,
        step=0,
        cursor=0,
        rendezvous="127.0.0.1:1",
        settings=TaskSettings(checkpoint_root=str(tmp_path)),
    )
    dirs = {t.config.checkpoint_dir for t in tasks.values()}
    assert dirs == {str((tmp_path / "j1").resolve())}
    with pytest.raises(SpecError):  # an id that bypassed validation still cannot escape
        check_id("..", "job_id")


def test_data_path_needs_a_data_root_and_stays_under_it(tmp_path: Path) -> None:
    spec = {**BASE, "training": {"dataset": "folder", "data_path": "imgs"}}
    refused(spec, "jobs[0].training.data_path")  # no --data-root: no data path at all
    for path in ("../secret", "/etc"):
        with pytest.raises(SpecError) as info:
            parse_jobs(
                _yaml([{**spec, "training": {"dataset": "folder", "data_path": path}}]),
                data_root=str(tmp_path),
            )
        assert info.value.field == "jobs[0].training.data_path"


# -- numbers: strict types, finite bounds ---------------------------------------------------
@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"batches_per_chunk": 1e20}, "jobs[0].batches_per_chunk"),
        ({"chunks": 1e308}, "jobs[0].chunks"),
        ({"max_workers": 1e308}, "jobs[0].max_workers"),
        # Sizes no real job asks for, inside int64: each bound must stay a sane figure.
        ({"batch_size": 10**6}, "jobs[0].batch_size"),
        ({"max_workers": 10**5}, "jobs[0].max_workers"),
        ({"epochs": 10**9}, "jobs[0].epochs"),
        ({"batch_size": "16"}, "jobs[0].batch_size"),
        ({"batch_size": True}, "jobs[0].batch_size"),
        ({"epochs": 2.5}, "jobs[0].epochs"),
        ({"compute_s": math.inf}, "jobs[0].compute_s"),
        ({"gradient_mb": math.nan}, "jobs[0].gradient_mb"),
        ({"arrival_slot": -1}, "jobs[0].arrival_slot"),
        ({"worker": {"gpu": 1e300}}, "jobs[0].worker.gpu"),
        ({"worker": {"gpu": "1"}}, "jobs[0].worker.gpu"),
        ({"utility": {"kind": "constant", "value": 1e300}}, "jobs[0].utility.value"),
        (
            {"epochs": 1_000_000, "chunks": 1_000_000, "batches_per_chunk": 1_000_000_000},
            "jobs[0].batches_per_chunk",
        ),
        ({"training": {"image_size": -3}}, "jobs[0].training.image_size"),
        ({"training": {"num_classes": 0}}, "jobs[0].training.num_classes"),
        ({"training": {"lr": math.inf}}, "jobs[0].training.lr"),
        ({"training": {"num_samples": 1e15}}, "jobs[0].training.num_samples"),
        ({"training": {"threads": 1e9}}, "jobs[0].training.threads"),
        ({"training": {"threads": "4"}}, "jobs[0].training.threads"),
        ({"training": {"overlap": 1}}, "jobs[0].training.overlap"),
        ({"training": {"dataset": "s\x00"}}, "jobs[0].training.dataset"),
        ({"training": {"nope": 1}}, "jobs[0].training.nope"),
        ({"model": "vgg11", "training": {"image_size": 8}}, "jobs[0].training.image_size"),
    ],
)
def test_out_of_range_and_mistyped_numbers_are_refused(patch: dict[str, Any], field: str) -> None:
    err = refused({**BASE, **patch}, field)
    assert "e+307" not in str(err)  # no 300-digit numbers echoed back


def test_every_bound_is_finite_and_used_by_the_job_schema() -> None:
    for bound in [*JOB_LIMITS.values(), *TRAINING_LIMITS.values()]:
        assert math.isfinite(bound.low) and math.isfinite(bound.high)
    # The highest accepted value of every count passes; one above it fails, naming it.
    for name, bound in JOB_LIMITS.items():
        if not bound.integer or name in ("min_workers", "requested_workers"):
            continue
        over = {**BASE, name: int(bound.high) + 1}
        with pytest.raises(SpecError) as info:
            JobSpec.from_dict(over, "j")
        assert info.value.field == f"j.{name}"


def test_a_bad_document_admits_nothing() -> None:
    good = {**BASE, "job_id": "good"}
    bad = {**BASE, "job_id": "bad", "batch_size": -1}
    with pytest.raises(SpecError) as info:
        parse_jobs(_yaml([good, bad]))
    assert info.value.field == "jobs[1].batch_size"


# -- documents ------------------------------------------------------------------------------
BOMB = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(
            f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]"
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        ),
    ]
)


@pytest.mark.timeout(60)  # refused before expansion; expanding it took 93 s and 3 GB
def test_yaml_alias_bomb_is_refused_with_a_short_message() -> None:
    assert len(BOMB) < 400
    err = refused(BOMB, "document")
    assert "nodes" in err.expected


@pytest.mark.parametrize(
    "document",
    [
        "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5),
        "a: &x [*x]",
        "jobs: [{job_id: a, model: mlp",
        "x" * (MAX_DOCUMENT_BYTES + 1),
    ],
)
def test_deep_recursive_broken_or_huge_documents_are_refused(document: str) -> None:
    refused(document, "document")


def test_non_utf8_bytes_are_named() -> None:
    with pytest.raises(SpecError, match="UTF-8"):
        parse_jobs(b"jobs: [{job_id: \xff\xfe}]")


def test_json_workload_depth_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(SpecError, match="deep"):
        load_workload_file(path)


def test_error_messages_are_bounded_whatever_the_value() -> None:
    huge = {"job_id": "a", "model": "mlp", "k" * 100_000: list(range(100_000))}
    with pytest.raises(SpecError) as info:
        parse_jobs(_yaml([huge]))
    assert len(str(info.value)) <= MAX_MESSAGE


def test_yaml_anchors_within_limits_still_work() -> None:
    doc = "common: &c {model: mlp, arch: ps, batch_size: 8}\njobs:\n"
    doc += "".join(f"  - {{<<: *c, job_id: j{i}}}\n" for i in range(3))
    # `common` is not a job field: the document is a mapping with jobs, anchors resolve.
    assert [j.model for j in parse_jobs(doc)] == ["mlp"] * 3


# -- CSV traces -----------------------------------------------------------------------------
def _csv(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "t.csv"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_csv_cells_are_typed_by_the_schema(tmp_path: Path) -> None:
    path = _csv(
        tmp_path, "job_id,epochs,compute_s,utility.kind,utility.value\n007,3,0.5,constant,2\n"
    )
    (job,) = load_trace_csv(path)
    assert (job.job_id, job.epochs, job.compute_s, job.utility(0)) == ("007", 3, 0.5, 2.0)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("job_id,epochs,chunks\na,2\n", "row 1.*row.*2 cells"),
        ("job_id,epochs,epochs\na,2,3\n", "each column once"),
        ("job_id,epochs\na,1e308\n", "epochs"),
        ("job_id,epochs\na,two\n", "epochs.*a number"),
        ("job_id,epochs\na,nan\n", "epochs"),
        (b"job_id,epochs\n\xff\xfe,2\n", "UTF-8"),
    ],
)
def test_bad_csv_rows_are_named(tmp_path: Path, text: str | bytes, match: str) -> None:
    with pytest.raises(SpecError, match=match):
        load_trace_csv(_csv(tmp_path, text))


# -- checkpoints ----------------------------------------------------------------------------
class _Payload:
    def __reduce__(self) -> Any:
        return (os.system, (f"touch {_MARKER}",))


_MARKER = Path("/tmp/mlsched-test-pwned")


def test_a_crafted_checkpoint_is_refused_without_running_code(tmp_path: Path) -> None:
    _MARKER.unlink(missing_ok=True)
    save(tmp_path, TrainState(step=3, model={"w": torch.ones(2)}))
    target = tmp_path / "step-000000003" / "state.pt"
    with open(target, "wb") as fh:  # a pickle that would run a shell command if loaded
        torch.save({"step": 3, "model": _Payload()}, fh, pickle_module=pickle)
    with pytest.raises(CheckpointError):
        load_latest(tmp_path)
    assert not _MARKER.exists()


def test_a_tampered_latest_pointer_is_refused(tmp_path: Path) -> None:
    save(tmp_path, TrainState(step=1, model={"w": torch.ones(2)}))
    (tmp_path / "latest").write_text("../../../etc")
    with pytest.raises(CheckpointError):
        load_latest(tmp_path)


def test_real_checkpoints_still_load(tmp_path: Path) -> None:
    state = TrainState(
        step=5,
        model={"w": torch.arange(3.0)},
        data_cursor=9,
        momentum={"w": torch.ones(3)},
        rng={"seed": 1, "torch": torch.get_rng_state()},
        meta={"model": "mlp", "num_workers": 2},
    )
    save(tmp_path, state)
    back = load_latest(tmp_path)
    assert back is not None and back.step == 5 and back.data_cursor == 9
    assert torch.equal(back.model["w"], state.model["w"])


def test_exponent_numbers_are_numbers_in_yaml_and_json() -> None:
    # PyYAML alone (YAML 1.1) reads 1e-05 as a string; json.dumps writes small floats so.
    (job,) = parse_jobs('[{"job_id": "a", "model": "mlp", "compute_s": 1e-05, "gradient_mb": 2E1}]')
    assert (job.compute_s, job.gradient_mb) == (1e-05, 20.0)
    (job,) = parse_jobs("- {job_id: b, model: mlp, compute_s: 5e-3, weight: .5e0}")
    assert (job.compute_s, job.weight) == (5e-3, 0.5)


def test_yaml_is_parsed_in_a_worker_with_a_time_limit() -> None:
    from mlsched.controller.parsing import DocumentParser

    parser = DocumentParser(timeout_s=0.01)  # less than starting the worker takes
    try:
        with pytest.raises(SpecError, match="parses within"):
            parser.parse("- {job_id: a, model: mlp}", where="slow")
        parser.timeout_s = 30.0  # a new worker replaces the one that ran over
        assert parser.parse("- {job_id: a, model: mlp}", where="ok") == [
            {"job_id": "a", "model": "mlp"}
        ]
        # A refusal in the worker comes back as the same field-named error.
        with pytest.raises(SpecError) as info:
            parse_jobs(BOMB, parser=parser)
        assert info.value.field == "document" and "nodes" in info.value.expected
        # JSON never leaves this process.
        assert parser.parse('[{"job_id": "j"}]', where="json") == [{"job_id": "j"}]
        assert parser.parse(b"- {job_id: b}", where="bytes") == [{"job_id": "b"}]
    finally:
        parser.close()


def test_a_document_that_crashes_the_parsing_worker_is_refused_and_the_worker_replaced() -> None:
    from mlsched.controller.parsing import DocumentParser

    parser = DocumentParser()
    try:
        deep = "- " * 400_000 + "x"  # libyaml recurses per level: the worker may die of it
        with pytest.raises(SpecError) as info:
            parser.parse(deep, where="deep")
        assert info.value.field == "document"
        assert parser.parse("- {job_id: a}", where="after") == [{"job_id": "a"}]
    finally:
        parser.close()
