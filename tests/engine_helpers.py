"""The tests' one way to build an engine: :func:`mlsched.engine.builder.build_engine`, the
builder the CLI, experiments and benchmarks use, with the tests' default slot length.

A plain function rather than a fixture: Hypothesis strategies and module-level helpers
build engines too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mlsched.core.cluster import Cluster
from mlsched.core.job import JobSpec
from mlsched.engine.builder import build_engine
from mlsched.engine.engine import Engine
from mlsched.engine.simulator import TruthConfig
from mlsched.scheduler.policy import Policy

__all__ = ["FREE_RESTARTS", "SLOT_S", "make_engine"]

#: The tests' slot length, seconds (a test that depends on it names its own).
SLOT_S = 10.0
#: The tests' default truth: the job specs with free restarts, the model the policies'
#: specs decide under (the simulator's own default charges 30 s, three of these slots).
#: A test of restart costs passes its own truth.
FREE_RESTARTS = TruthConfig(restart_s=0.0)


def make_engine(
    cluster: Cluster,
    policy: Policy | str,
    jobs: Iterable[JobSpec] = (),
    *,
    slot_seconds: float = SLOT_S,
    **kw: Any,
) -> Engine:
    """An engine for ``policy`` on ``cluster`` with ``jobs`` submitted; every other keyword
    goes to ``build_engine`` (truth, horizon, executor, families, ...); the truth is
    :data:`FREE_RESTARTS` unless given."""
    kw.setdefault("truth", FREE_RESTARTS)
    return build_engine(cluster, policy, jobs, slot_seconds=slot_seconds, **kw)
