"""A measured profile as the runtime model's prior (before a job's first measurement).

Plausible bugs this catches: the prior still the spec's compute with a profile given, the
cell of another worker count or device used, the communication scale solved for the wrong
parameter (the prediction on one server then differs from the cell's), a measured fit
overridden by the profile, a job without a cell given another's, and a malformed profile
accepted by the controller.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlsched.core import Arch, Cluster, JobSpec, Placement, Pool, ResourceVector, Server, SpecError
from mlsched.core.job import SyncMode
from mlsched.perfmodel.base import Measurement
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.perfmodel.profile import Cell, Profile


def _cluster(gpu_type: str = "cpu") -> Cluster:
    return Cluster(
        tuple(
            Server(f"s{i}", ResourceVector({"gpu": 4, "cpu": 8}), pool=Pool.BOTH,
                   gpu_type=gpu_type, uplink_gbps=1.0)
            for i in range(2)
        )
    )  # fmt: skip


def _cell(model: str, kind: str, workers: int, compute: float, comm: float) -> Cell:
    return Cell(model, kind, workers, "cpu", compute + comm, compute_s=compute, comm_s=comm,
                batch_size=16, image_size=16)  # fmt: skip


PROFILE = Profile(
    {"hostname": "m1"},
    {"type": "cpu"},
    {"batch_size": 32, "image_size": 32},  # the cells say what they ran with
    cells=(
        _cell("resnet20", "ring", 2, 0.30, 0.05),
        _cell("resnet20", "ring", 4, 0.40, 0.09),
        _cell("resnet20", "ps_sync", 2, 0.20, 0.04),
        _cell("resnet20", "ps_async", 1, 0.25, 0.0),
    ),
)


def _job(**kw: object) -> JobSpec:
    fields: dict[str, object] = {
        "model": "resnet20", "chunks": 4, "batches_per_chunk": 1000, "batch_size": 16,
        "worker": ResourceVector({"gpu": 1}), "ps": ResourceVector({"cpu": 1}),
        "compute_s": 0.01, "gradient_mb": 1.1, "training": {"image_size": 16},
    }  # fmt: skip
    fields.update(kw)
    return JobSpec("j", **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("job", "placement", "cell"),
    [
        (_job(arch=Arch.ALLREDUCE, requested_workers=2), Placement(((0, 2),)), (0.30, 0.05)),
        (_job(arch=Arch.ALLREDUCE, requested_workers=4), Placement(((1, 4),)), (0.40, 0.09)),
        (_job(sync=SyncMode.SYNC, requested_workers=2, requested_ps=1),
         Placement(((0, 2),), ((0, 1),)), (0.20, 0.04)),
    ],
    ids=["ring-2", "ring-4-other-server", "ps-sync-2"],
)  # fmt: skip
def test_on_one_server_the_prior_predicts_the_cell(
    job: JobSpec, placement: Placement, cell: tuple[float, float]
) -> None:
    model = RuntimeEstimator(_cluster(), profile=PROFILE)
    assert model.iteration_parts(job, placement) == pytest.approx(cell)
    spec_only = RuntimeEstimator(_cluster())
    assert spec_only.iteration_parts(job, placement)[0] == pytest.approx(0.01)


def test_the_cell_is_scaled_to_the_jobs_batch_and_image() -> None:
    job = _job(arch=Arch.ALLREDUCE, requested_workers=2, batch_size=32,
               training={"image_size": 32})  # fmt: skip
    compute, _ = RuntimeEstimator(_cluster(), profile=PROFILE).iteration_parts(
        job, Placement(((0, 2),))
    )
    assert compute == pytest.approx(0.30 * 2 * 4)


def test_without_a_cell_of_its_model_or_device_a_job_keeps_its_spec() -> None:
    job = _job(model="vgg11-narrow", arch=Arch.ALLREDUCE, requested_workers=2)
    p = Placement(((0, 2),))
    assert RuntimeEstimator(_cluster(), profile=PROFILE).iteration_parts(job, p)[0] == 0.01
    ring = _job(arch=Arch.ALLREDUCE, requested_workers=2)
    assert RuntimeEstimator(_cluster("h100"), profile=PROFILE).iteration_parts(ring, p)[0] == 0.01


def test_measurements_take_over_from_the_profile() -> None:
    job = _job(arch=Arch.ALLREDUCE, requested_workers=2)
    p = Placement(((0, 2),))
    model = RuntimeEstimator(_cluster(), profile=PROFILE)
    for slot in range(6):
        model.observe(Measurement("j", slot, p, 10, 0.9, 0.8, 0.1), job)
    model.refit()
    assert model.iteration_parts(job, p) == pytest.approx((0.8, 0.1), rel=1e-6)


def test_the_controller_refuses_a_malformed_profile_by_field(tmp_path: Path) -> None:
    from mlsched.controller.server import Controller, ControllerConfig

    bad = tmp_path / "p.json"
    raw = PROFILE.to_dict()
    raw["cells"][0]["compute_s"] = -1
    bad.write_text(json.dumps(raw))
    with pytest.raises(SpecError, match=r"cells\[\d\]\.compute_s"):
        Controller(ControllerConfig(listen="127.0.0.1:0", db=str(tmp_path / "s.db"),
                                    profile=str(bad)))  # fmt: skip


def test_a_ring_across_servers_keeps_the_specs_links_plus_the_cells_overhead() -> None:
    job = _job(arch=Arch.ALLREDUCE, requested_workers=2)
    one, two = Placement(((0, 2),)), Placement(((0, 1), (1, 1)))
    profiled, spec = RuntimeEstimator(_cluster(), profile=PROFILE), RuntimeEstimator(_cluster())
    overhead = profiled.iteration_parts(job, one)[1] - spec.iteration_parts(job, one)[1]
    assert overhead > 0.04  # the cell's 0.05 s, nearly all of it per-message overhead
    # Across servers: the spec's wire time over the 1 Gbit/s links, plus the same overhead
    # (scaling the links by the loopback time would make it many times the cell's).
    assert profiled.iteration_parts(job, two)[1] == pytest.approx(
        spec.iteration_parts(job, two)[1] + overhead
    )
