"""Run one policy on one workload in the simulator: the one place a simulated engine is
built, so every command, experiment, benchmark and test builds it the same way.

The engine's runtime model starts from the job specs; the simulator's truth may depart
from them (:class:`TruthConfig`), and the engine learns the difference from measurements.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mlsched.core.batch_gc import batch_gc
from mlsched.core.cluster import Cluster
from mlsched.core.errors import SpecError
from mlsched.core.job import JobSpec
from mlsched.engine import run_cache
from mlsched.engine.engine import AllocationHook, Engine, RunResult
from mlsched.engine.executor import Executor
from mlsched.engine.simulator import SimulatedExecutor, TruthConfig
from mlsched.engine.summary import Summary, summarize
from mlsched.engine.users import UserModel, valuation_user
from mlsched.perfmodel.estimator import RuntimeEstimator
from mlsched.scheduler.policy import Policy
from mlsched.scheduler.registry import available, create, policy_class, registered
from mlsched.scheduler.view import RunContext

__all__ = [
    "AllocationHook",
    "Failure",
    "SimulationConfig",
    "baseline_policies",
    "build_engine",
    "check_policies",
    "compare",
    "simulate",
    "try_simulate",
]

log = logging.getLogger(__name__)


class Workload(Protocol):
    """What a simulated run needs of a workload (:class:`mlsched.workloads.base.Workload`
    is one; the engine does not depend on the workloads package)."""

    @property
    def name(self) -> str: ...
    @property
    def cluster(self) -> Cluster: ...
    @property
    def jobs(self) -> tuple[JobSpec, ...]: ...
    @property
    def horizon_slots(self) -> int | None: ...
    @property
    def slot_seconds(self) -> float: ...
    @property
    def runtime(self) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class SimulationConfig:
    """What besides the workload determines a simulated run (same config, same result)."""

    policy: str
    seed: int = 0
    truth: TruthConfig = field(default_factory=TruthConfig)
    policy_options: dict[str, Any] = field(default_factory=dict)
    stall_slots: int = 200


def simulate(
    workload: Workload,
    config: SimulationConfig,
    *,
    progress: Callable[[int], None] | None = None,
    on_allocate: AllocationHook | None = None,
    observe: Callable[[str, float], None] | None = None,
    cache: bool = True,
) -> RunResult:
    """Run ``config.policy`` on ``workload`` until every job is final or the horizon ends.

    Unknown policies and bad options raise ValueError; a policy bug raises PolicyError.
    ``progress`` is called with the slot number after each slot. ``on_allocate`` sees each
    slot's allocation as the policy returns it, before the engine checks it, with the
    policy and its view (what an experiment replays or reads of the policy's own records).
    ``observe`` is told the seconds of each call into the policy (its name, e.g.
    ``on_arrival``, and the time; :attr:`Engine.observe`).
    Where ``MLSCHED_RUN_CACHE`` names a directory (:mod:`.cache`), a run done before by the
    same code is read from it instead, unless ``cache`` is False or ``on_allocate`` or
    ``observe`` must see the run.
    """
    watched = on_allocate is not None or observe is not None
    directory = run_cache.cache_dir() if cache and not watched else None
    if directory is None:
        return _simulate(workload, config, progress, on_allocate, observe)
    try:
        key = run_cache.run_key(workload, config)
    except TypeError as err:  # an input that cannot be keyed by value: run it
        log.debug("[simulate] not cached: %s", err)
        return _simulate(workload, config, progress, on_allocate)
    result = run_cache.load(directory, key)
    if result is None:
        result = _simulate(workload, config, progress, on_allocate)
        run_cache.store(directory, key, result)
    elif progress is not None:
        progress(result.slots)
    return result


def build_engine(
    cluster: Cluster,
    policy: Policy | str,
    jobs: Iterable[JobSpec] = (),
    *,
    slot_seconds: float,
    horizon: int | None = None,
    seed: int = 0,
    families: Mapping[str, str] | None = None,
    truth: TruthConfig | None = None,
    executor: Executor | None = None,
    runtime: RuntimeEstimator | None = None,
    on_allocate: AllocationHook | None = None,
    user: UserModel = valuation_user,
    stall_slots: int = 200,
    reject_on_policy_error: bool = False,
    check_types: bool = True,
    **policy_options: Any,
) -> Engine:
    """The engine for ``policy`` (an instance, or a registered name built with
    ``policy_options``) on ``cluster``, with ``jobs`` submitted.

    The executor is a :class:`SimulatedExecutor` whose truth is ``truth`` (default: the
    job specs) unless ``executor`` is given (the live controller's, or a simulated one
    wrapped by a test); the runtime model starts from the specs and ``families``.
    ``on_allocate`` sees each slot's allocation (:attr:`Engine.on_allocate`)."""
    if isinstance(policy, str):
        policy = create(policy, **policy_options)
    elif policy_options:
        raise TypeError("policy_options apply to a policy named by a string, not an instance")
    catalogue = tuple(jobs)
    if executor is None:
        executor = SimulatedExecutor(
            cluster, slot_seconds, truth=truth or TruthConfig(), families=families, seed=seed
        )
    engine = Engine(
        cluster,
        policy,
        executor,
        runtime if runtime is not None else RuntimeEstimator(cluster, families),
        slot_seconds=slot_seconds,
        horizon=horizon,
        seed=seed,
        catalogue=catalogue,
        user=user,
        stall_slots=stall_slots,
        reject_on_policy_error=reject_on_policy_error,
        check_types=check_types,
    )
    engine.on_allocate = on_allocate
    engine.submit_all(catalogue)
    return engine


def _simulate(
    workload: Workload,
    config: SimulationConfig,
    progress: Callable[[int], None] | None,
    on_allocate: AllocationHook | None,
    observe: Callable[[str, float], None] | None = None,
) -> RunResult:
    engine = build_engine(
        workload.cluster,
        create(config.policy, **_with_oracle(workload, config)),
        workload.jobs,
        slot_seconds=workload.slot_seconds,
        horizon=workload.horizon_slots,
        seed=config.seed,
        families=workload.runtime,
        truth=config.truth,
        on_allocate=on_allocate,
        stall_slots=config.stall_slots,
    )
    engine.observe = observe
    log.info(
        "[simulate] %s on %s: %d jobs, %d servers, horizon %s",
        config.policy,
        workload.name,
        len(workload.jobs),
        len(workload.cluster),
        workload.horizon_slots,
    )
    try:
        with batch_gc():
            return engine.run(progress=progress)
    finally:
        engine.executor.close()


def _with_oracle(workload: Workload, config: SimulationConfig) -> dict[str, Any]:
    """The run's policy options, completed by what an offline benchmark finds on the whole
    job set (valuations included; :meth:`Policy.oracle_options`)."""
    try:
        cls = policy_class(config.policy)
    except ValueError:
        return dict(config.policy_options)  # create() names what is wrong
    if cls.oracle_options.__func__ is Policy.oracle_options.__func__:  # type: ignore[attr-defined]
        return dict(config.policy_options)  # none to find (or create() names the unknown)
    context = RunContext(
        cluster=workload.cluster,
        slot_seconds=workload.slot_seconds,
        horizon=workload.horizon_slots,
        seed=config.seed,
        runtime=RuntimeEstimator(workload.cluster, workload.runtime),
        catalogue=workload.jobs,
    )
    found = cls.oracle_options(workload.jobs, context, config.policy_options)
    return {**found, **config.policy_options}


@dataclass(frozen=True)
class Failure:
    """A run that did not finish: the policy raised (a PolicyError is a policy bug)."""

    policy: str
    seed: int
    error: str
    context: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "seed": self.seed, "error": self.error, **self.context}


def try_simulate(
    workload: Workload,
    config: SimulationConfig,
    *,
    context: dict[str, Any] | None = None,
    progress: Callable[[int], None] | None = None,
    on_allocate: AllocationHook | None = None,
    observe: Callable[[str, float], None] | None = None,
    cache: bool = True,
) -> RunResult | Failure:
    """:func:`simulate`, but a policy that fails (cannot be built, or raises during the
    run) gives a :class:`Failure` and a warning instead of ending a whole comparison."""
    try:
        return simulate(
            workload,
            config,
            progress=progress,
            on_allocate=on_allocate,
            observe=observe,
            cache=cache,
        )
    except Exception as err:  # any policy bug: record it, keep comparing the others
        log.warning(
            "[simulate] policy %s failed on %s (seed %d): %s",
            config.policy,
            workload.name,
            config.seed,
            err,
        )
        return Failure(
            config.policy, config.seed, f"{type(err).__name__}: {err}", dict(context or {})
        )


def compare(
    workload: Workload, policies: Sequence[str], *, seed: int = 0, truth: TruthConfig | None = None
) -> tuple[list[Summary], list[Failure]]:
    """Run each policy on the same workload; failures are collected, not raised."""
    summaries: list[Summary] = []
    failures: list[Failure] = []
    for name in policies:
        config = SimulationConfig(name, seed=seed, truth=truth or TruthConfig())
        outcome = try_simulate(workload, config)
        if isinstance(outcome, Failure):
            failures.append(outcome)
        else:
            summaries.append(summarize(outcome))
    return summaries, failures


def check_policies(names: Sequence[str]) -> None:
    """SpecError naming the first name that is no known policy (a registered name, an
    installed plugin's, or a ``package.module:Class`` reference)."""
    for name in names:
        try:
            policy_class(name)
        except ValueError as err:
            raise SpecError(
                "policy", name, f"a known policy ({', '.join(available())}) or module:Class: {err}"
            ) from None


def baseline_policies() -> list[str]:
    """The registered policies that live in :mod:`mlsched.scheduler.baselines`."""
    return [
        name
        for name, cls in registered().items()
        if cls.__module__.startswith("mlsched.scheduler.baselines")
    ]
