"""Fuzzing every way in: job specs, workload files, CSV traces and raw gRPC messages.

Each input is either rejected with a :class:`SpecError` that names a field (bounded in
length) or accepted; an accepted job renders into tasks that an agent turns into a trainer
configuration without error. The controller answers every raw message with a status and
keeps serving: a normal submission works afterwards.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from cluster_helpers import controller, mlp_job, stub
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlsched.agent.serde import task_plan
from mlsched.controller.intake import parse_jobs
from mlsched.controller.runs import TaskSettings, render_tasks
from mlsched.controller.server import Controller
from mlsched.core.errors import MAX_MESSAGE, SpecError
from mlsched.core.ids import is_id
from mlsched.core.limits import JOB_LIMITS, MAX_TOTAL_WORK, TRAINING_LIMITS, Bound
from mlsched.net.task_wire import task_to_proto
from mlsched.v1 import agent_pb2, jobs_pb2
from mlsched.workloads.trace import load_trace_csv, load_workload_file

pytestmark = pytest.mark.processes  # training processes: one such test at a time

FIELDS = [
    "job_id", "model", "arch", "sync", "epochs", "chunks", "batches_per_chunk", "batch_size",
    "max_workers", "min_workers", "requested_workers", "requested_ps", "ps_ratio",
    "compute_s", "gradient_mb", "weight", "valuation", "worker", "ps", "utility", "training",
    "gpu_type", "arrival_slot", "global_batch", "internal_gbps",
    "hop_gbps",
]  # fmt: skip
TRAINING = [
    "lr", "momentum", "weight_decay", "dataset", "num_samples", "num_classes", "image_size",
    "seed", "timeout_s", "overlap", "threads", "checkpoint_keep", "checkpoint_every_s",
    "checkpoint_every_steps", "data_path",
]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, 2, 8, 32, 0.5, 1e308, -1, "16", "", "../x", "a\x00b", "mlp", "ps"]),
    st.text(max_size=40),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def _in_bounds(bound: Bound) -> st.SearchStrategy[Any]:
    """Values a bound admits, its edges included (what a careful but extreme user sends)."""
    low = bound.low + (1 if bound.integer and bound.open_low else 0)
    if bound.integer:
        return st.one_of(
            st.sampled_from([int(low), int(bound.high)]), st.integers(int(low), int(bound.high))
        )
    edges = [bound.high] if bound.open_low else [bound.low, bound.high]
    return st.one_of(
        st.sampled_from(edges),
        st.floats(bound.low, bound.high, exclude_min=bound.open_low, allow_nan=False),
    )


@st.composite
def job_mappings(draw: st.DrawFn, wild: bool = True) -> dict[str, Any]:
    """Plausible jobs with a few fields replaced: by anything at all (``wild``), or by
    extreme values within the bounds, which must then run."""
    base = mlp_job(
        draw(st.sampled_from(["a", "job-1", "x.y_z"])),
        arch=draw(st.sampled_from(["ps", "allreduce"])),
    )
    numeric = [k for k in FIELDS if k in JOB_LIMITS]
    for key in draw(st.lists(st.sampled_from(FIELDS if wild else numeric), max_size=3)):
        base[key] = draw(values if wild else _in_bounds(JOB_LIMITS[key]))
    training = base.get("training")
    if isinstance(training, dict):
        bounded = [k for k in TRAINING if k in TRAINING_LIMITS]
        for key in draw(st.lists(st.sampled_from(TRAINING if wild else bounded), max_size=2)):
            training[key] = draw(values if wild else _in_bounds(TRAINING_LIMITS[key]))
    return base


def _check_rejection(err: SpecError) -> None:
    assert err.field, err
    assert len(str(err)) <= MAX_MESSAGE


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job=st.one_of(job_mappings(), job_mappings(False)), as_yaml=st.booleans())
def test_a_job_spec_is_refused_by_field_or_renders_into_runnable_tasks(
    job: dict[str, Any], as_yaml: bool
) -> None:
    document = yaml.safe_dump([job]) if as_yaml else json.dumps([job])
    try:
        (spec,) = parse_jobs(document)
    except SpecError as err:
        _check_rejection(err)
        return
    assert is_id(spec.job_id) and spec.total_work <= MAX_TOTAL_WORK
    layout = (("agent0", 1, 1 if spec.arch.value == "ps" else 0),)
    tasks, _, stop, _ = render_tasks(
        spec,
        layout,
        number=1,
        step=0,
        cursor=0,
        rendezvous="127.0.0.1:29500",
        settings=TaskSettings(checkpoint_root="/tmp/ckpt"),
    )
    assert 0 < stop <= MAX_TOTAL_WORK
    for task in tasks.values():
        plan = task_plan(task_to_proto(task), metrics="/tmp/m.jsonl", real_gpus=False)
        assert plan == replace(
            task, config=replace(task.config, metrics="/tmp/m.jsonl", device="cpu")
        )
        assert plan.job_id == spec.job_id and math.isfinite(plan.config.lr)


@settings(max_examples=200, deadline=None)
@given(text=st.one_of(st.text(max_size=300), st.binary(max_size=300)))
def test_any_workload_file_is_loaded_or_refused_by_field(tmp_path_factory: Any, text: Any) -> None:
    path = Path(tmp_path_factory.mktemp("w")) / "w.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    try:
        load_workload_file(path)
    except SpecError as err:
        _check_rejection(err)


@settings(max_examples=200, deadline=None)
@given(
    header=st.lists(
        st.sampled_from([*FIELDS, "worker.gpu", "utility.kind", "x"]), min_size=1, max_size=5
    ),
    rows=st.lists(st.lists(st.text(max_size=12), max_size=6), max_size=4),
)
def test_any_csv_trace_is_loaded_or_refused_by_field(
    tmp_path_factory: Any, header: list[str], rows: list[list[str]]
) -> None:
    path = Path(tmp_path_factory.mktemp("t")) / "t.csv"
    lines = [
        ",".join(header),
        *(",".join(c.replace(",", ";").replace("\n", " ") for c in r) for r in rows),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        load_trace_csv(path)
    except SpecError as err:
        _check_rejection(err)


# Raw gRPC ---------------------------------------------------------------------------------
METHODS = [
    "/mlsched.v1.JobService/SubmitJobs",
    "/mlsched.v1.JobService/GetJob",
    "/mlsched.v1.JobService/CancelJob",
    "/mlsched.v1.JobService/ListJobs",
    "/mlsched.v1.JobService/GetClusterStatus",
    "/mlsched.v1.AgentService/Register",
    "/mlsched.v1.AgentService/Heartbeat",
    "/mlsched.v1.JobService/GetTaskLog",
    "/mlsched.v1.JobService/StartProbe",
    "/mlsched.v1.JobService/GetProbe",
    "/mlsched.v1.JobService/DescribeJob",
    "/mlsched.v1.JobService/WhoAmI",
    "/mlsched.v1.JobService/GetAudit",
]
#: Each method's request message, by the method's name.
REQUESTS = {
    "SubmitJobs": jobs_pb2.SubmitJobsRequest,
    "GetJob": jobs_pb2.GetJobRequest,
    "CancelJob": jobs_pb2.CancelJobRequest,
    "ListJobs": jobs_pb2.ListJobsRequest,
    "GetClusterStatus": jobs_pb2.GetClusterStatusRequest,
    "Register": agent_pb2.RegisterRequest,
    "Heartbeat": agent_pb2.HeartbeatRequest,
    "GetTaskLog": jobs_pb2.GetTaskLogRequest,
    "StartProbe": jobs_pb2.StartProbeRequest,
    "GetProbe": jobs_pb2.GetProbeRequest,
    "DescribeJob": jobs_pb2.DescribeJobRequest,
    "WhoAmI": jobs_pb2.WhoAmIRequest,
    "GetAudit": jobs_pb2.GetAuditRequest,
}
#: The statuses a handler answers on purpose. UNKNOWN is what gRPC sends for a handler
#: that raised (a crash); INTERNAL is gRPC's own answer to bytes that do not parse as the
#: request, and allowed only for those.
DELIBERATE = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.ALREADY_EXISTS,
}


def _parses(method: str, payload: bytes) -> bool:
    from google.protobuf.message import DecodeError

    try:
        REQUESTS[method.rsplit("/", 1)[1]].FromString(payload)
    except DecodeError:
        return False
    return True


@pytest.fixture(scope="module")
def ctl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Controller]:
    c = controller(tmp_path_factory.mktemp("ctl"))
    yield c
    c.stop(stop_tasks=True)


def _raw(address: str, method: str, payload: bytes) -> grpc.StatusCode:
    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary(
            method, request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        try:
            call(payload, timeout=10)
        except grpc.RpcError as err:
            return err.code()
    return grpc.StatusCode.OK


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(method=st.sampled_from(METHODS), payload=st.binary(max_size=512))
def test_raw_bytes_to_every_method_get_a_status(
    ctl: Controller, method: str, payload: bytes
) -> None:
    """Every method answers garbage on purpose: a deliberate status (INTERNAL only where
    the bytes are not its request), never UNKNOWN (its handler raised), never a hang."""
    code = _raw(ctl.address, method, payload)
    allowed = DELIBERATE if _parses(method, payload) else {*DELIBERATE, grpc.StatusCode.INTERNAL}
    assert code in allowed, f"{method} answered {code} to {payload!r}"


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.text(max_size=40),
    host=st.text(max_size=40),
    amounts=st.dictionaries(st.text(max_size=10), st.floats(allow_nan=True), max_size=4),
    ports=st.tuples(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1)),
    task_ids=st.lists(st.text(max_size=20), max_size=3),
)
def test_hostile_registrations_and_heartbeats_are_answered(
    ctl: Controller,
    name: str,
    host: str,
    amounts: dict[str, float],
    ports: tuple[int, int],
    task_ids: list[str],
) -> None:
    request = agent_pb2.RegisterRequest(name=name, host=host, port_lo=ports[0], port_hi=ports[1])
    request.capacity.amounts.update(amounts)
    code = _raw(ctl.address, METHODS[5], request.SerializeToString())
    assert code in (grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT)
    beat = agent_pb2.HeartbeatRequest(
        agent_id=name, tasks=[agent_pb2.TaskStatus(task_id=t, job_id=t) for t in task_ids]
    )
    assert _raw(ctl.address, METHODS[6], beat.SerializeToString()) == grpc.StatusCode.OK


def test_the_controller_still_serves_after_the_fuzzing(ctl: Controller) -> None:
    ids = ctl.submit(yaml.safe_dump([mlp_job("after-fuzz", arch="ps")]))
    assert ids == ["after-fuzz"]
    status = stub(ctl.address).GetJob(jobs_pb2.GetJobRequest(job_id="after-fuzz"), timeout=5)
    assert status.job.job_id == "after-fuzz"
    assert ctl._thread is not None and ctl._thread.is_alive()


@pytest.mark.parametrize(
    "training",
    [
        {"lr": 10.0, "momentum": 0.999, "weight_decay": 1.0, "num_classes": 1, "image_size": 4},
        {"seed": 2**31 - 1, "num_samples": 1, "checkpoint_keep": 1, "threads": 256},
    ],
)
def test_edge_values_that_intake_accepts_also_train(
    tmp_path: Path, training: dict[str, Any]
) -> None:
    """Accepted means runnable: a job at the edges of the bounds trains for real."""
    import subprocess
    import sys

    job = mlp_job("edge", arch="allreduce")
    job["training"] = {**job["training"], **training}
    (spec,) = parse_jobs(json.dumps([job]))
    tasks, *_ = render_tasks(
        spec,
        (("agent0", 1, 0),),
        number=1,
        step=0,
        cursor=0,
        rendezvous="127.0.0.1:0",
        settings=TaskSettings(checkpoint_root=str(tmp_path / "ckpt")),
    )
    (task,) = tasks.values()
    task = replace(task, config=replace(task.config, stop_step=3))
    cfg = task_plan(task_to_proto(task), metrics=str(tmp_path / "m.jsonl"), real_gpus=False).config
    from mlsched.net.ports import listen_port

    cfg_args = replace(cfg, rendezvous=f"127.0.0.1:{listen_port()}").to_args()
    done = subprocess.run(
        [sys.executable, "-m", "mlsched.trainers", *cfg_args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "ckpt" / "edge" / "latest").read_text() == "step-000000003"
