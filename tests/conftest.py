"""Shared fixtures: small real clusters and jobs used across the test modules."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from mlsched.core import Cluster, JobSpec, Pool, ResourceVector, Server, Topology

# CI draws the same examples on every run, so a landing never hangs on a lucky draw; each
# bound a property test guards also has a fixed-value test (test_hostile_inputs.py).
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# The tests say where their controllers are and how to reach them: a user's own MLSCHED_*
# variables or client configuration (net/env.py, net/contexts.py) must not reach them, nor
# the processes they start.
for _name in ("CONTROLLER", "CONTEXT", "TOKEN", "TOKEN_FILE", "TLS_CA", "TLS_CERT", "TLS_KEY"):
    os.environ.pop(f"MLSCHED_{_name}", None)
os.environ["MLSCHED_CONFIG"] = os.devnull + ".mlsched-tests-have-no-client-config"


# Test files that start training processes, agents or emulated hosts declare it with the
# ``processes`` marker (their module's pytestmark). Under pytest-xdist (``make test`` runs
# ``-n auto --dist loadgroup``) every test of those files is one unit of work: one worker
# runs them one after another, in file order (their module fixtures stay whole), so the
# machine never holds two such tests' processes at once (their timing, and the cores they
# measure, stay their own), while the other workers run the rest of the suite. The unit is
# made here, by file, rather than with ``xdist_group`` marks: pytest 9 keeps a test's id
# where pytest-xdist 3.8's group suffix no longer reaches it.
@cache
def _starts_processes(path: Path) -> bool:
    return path.is_file() and "pytest.mark.processes" in path.read_text(encoding="utf-8")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ProcessesApart(LoadGroupScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            if _starts_processes(config.rootpath / nodeid.split("::", 1)[0]):
                return "processes"
            return str(super()._split_scope(nodeid))

    return ProcessesApart(config, log)


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
