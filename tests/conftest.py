"""Shared fixtures: small real clusters and jobs used across the test modules."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from mlsched.core import Cluster, JobSpec, Pool, ResourceVector, Server, Topology

# CI draws the same examples on every run, so a landing never hangs on a lucky draw; each
# bound a property test guards also has a fixed-value test (test_hostile_inputs.py).
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``processes`` start training processes, agents or emulated hosts: under
    pytest-xdist (``make test`` runs ``-n 2 --dist loadgroup``) they share one group, so one
    worker runs them one after another and the machine never holds two such tests' processes
    at once (their timing and the cores they measure stay their own), while the rest of the
    suite runs beside them on the other worker."""
    for item in items:
        if item.get_closest_marker("processes") is not None:
            item.add_marker(pytest.mark.xdist_group("processes"))


@pytest.fixture
def tiny_cluster() -> Cluster:
    """Two servers in one rack: a GPU worker server (V100) and a PS-only server."""
    return Cluster(
        (
            Server(
                "gpu0",
                ResourceVector({"gpu": 4, "cpu": 16, "mem_gb": 64}),
                pool=Pool.WORKER,
                gpu_type="V100",
            ),
            Server("ps0", ResourceVector({"cpu": 8, "mem_gb": 32}), pool=Pool.PS),
        ),
        Topology(intra_server_gbps=100.0),
    )


@pytest.fixture
def ps_job() -> JobSpec:
    """An async PS job of 100 units: one worker (1 GPU) and one PS."""
    return JobSpec(
        "ps-job",
        chunks=2,
        batches_per_chunk=50,
        worker=ResourceVector({"gpu": 1, "cpu": 2}),
        ps=ResourceVector({"cpu": 1}),
        compute_s=0.1,
        gradient_mb=1.0,
    )
