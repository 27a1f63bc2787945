"""Independent runs of an experiment spread over the machine's cores.

Simulations of different seeds, schemes and sizes share nothing, so an experiment hands
them to :meth:`Runner.map` as a list of picklable items and a top-level function; results come
back in item order (so the output does not depend on which run finished first) and
``advance`` is called once per finished run, for the progress bar.

Worker processes are spawned, not forked: the parent may hold threads (a progress bar) and
HiGHS state that a fork would copy half-made. As with any spawned pool, a script that runs
an experiment must do so under ``if __name__ == "__main__":`` (the ``mlsched`` command
does). ``MLSCHED_WORKERS`` caps the worker count (1 runs everything in this process, in
order).

Beyond one machine, the runs go to a Ray cluster (``MLSCHED_EXECUTOR=ray:HOST:PORT``, or
``--executor`` of ``mlsched experiment`` and ``mlsched reproduce``; the ``ray`` extra): each
run is a Ray task, scheduled wherever the cluster has a free CPU, and the results come
back in item order as from the local pool, so the output is the same. ``ray`` alone
connects to the cluster ``RAY_ADDRESS`` names, else starts Ray on this machine. Every node
must have the same mlsched installed (docs/experiments-on-ray.md).
"""

from __future__ import annotations

import multiprocessing
import os
import socket
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, TypeVar

from mlsched.cli.parser import parse_executor
from mlsched.core.errors import SpecError

__all__ = ["EXECUTOR_ENV", "Runner", "available_workers", "executor_spec"]

#: The environment variable that names the executor (``local``, ``ray``, ``ray:ADDRESS``).
EXECUTOR_ENV = "MLSCHED_EXECUTOR"
_LOOPBACK = ("127.0.0.1", "localhost")
_FIELD = "executor (--executor or MLSCHED_EXECUTOR)"

T = TypeVar("T")
R = TypeVar("R")


def available_workers() -> int:
    """Cores this process may use, capped by ``MLSCHED_WORKERS`` when it is set."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    raw = os.environ.get("MLSCHED_WORKERS")
    if raw is None or raw == "":
        return max(1, cores)
    try:
        cap = int(raw)
    except ValueError:
        raise SpecError("MLSCHED_WORKERS", raw, "an integer >= 1") from None
    if cap < 1:
        raise SpecError("MLSCHED_WORKERS", raw, "an integer >= 1")
    return min(cap, max(1, cores))


def executor_spec(value: str | None = None, field: str = EXECUTOR_ENV) -> tuple[str, str | None]:
    """``(kind, address)`` of an executor named ``local``, ``ray`` or ``ray:HOST:PORT``
    (default: the ``MLSCHED_EXECUTOR`` environment variable, else ``local``). A bad value
    raises SpecError naming ``field``."""
    raw = os.environ.get(EXECUTOR_ENV, "") if value is None else value
    return parse_executor(raw, field)


class Runner:
    """A pool of workers for the runs of one experiment (use as a context manager, so that
    its parts share the workers and their start-up): this machine's processes, or a Ray
    cluster's (``executor``, default ``MLSCHED_EXECUTOR``)."""

    def __init__(self, workers: int | None = None, executor: str | None = None) -> None:
        self.kind, self.address = executor_spec(executor)
        self.workers = available_workers() if workers is None else max(1, workers)
        self._pool: ProcessPoolExecutor | None = None
        self._ray: Any = None

    def __enter__(self) -> Runner:
        if self.kind == "ray":
            self._ray = _connect_ray(self.address)
            self.workers = max(1, int(self._ray.cluster_resources().get("CPU", 1)))
        elif self.workers > 1:
            ctx = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        if self._ray is not None:
            self._ray.shutdown()  # disconnects (stops Ray only where this process started it)
            self._ray = None

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], advance: Callable[[int], None]
    ) -> list[R]:
        """``[fn(item) for item in items]`` on the workers, in item order. ``fn`` must be a
        module-level function; an exception in a run is raised here, the runs not yet
        started are cancelled."""
        if self._ray is not None and items:
            return _ray_map(self._ray, fn, items, advance)
        if self._pool is None or len(items) <= 1:
            out: list[R] = []
            for item in items:
                out.append(fn(item))
                advance(1)
            return out
        results: dict[int, R] = {}
        futures = {self._pool.submit(fn, item): k for k, item in enumerate(items)}
        try:
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                advance(1)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return [results[k] for k in range(len(items))]


def _connect_ray(address: str | None) -> Any:
    """Ray, connected to the cluster at ``address`` (None: ``RAY_ADDRESS``, else a Ray
    started on this machine)."""
    named = f"ray:{address}" if address else "ray"
    if address is not None and address.rpartition(":")[0] in _LOOPBACK:
        # A cluster on this machine's loopback: Ray would otherwise turn 127.0.0.1 into the
        # machine's outward address, where that cluster does not listen. Read when Ray is
        # first imported.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        raise SpecError(_FIELD, named, "Ray installed (pip install 'mlsched[ray]')") from None
    if address is not None:
        # Ray itself waits minutes on an address where nothing listens; say so at once.
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=10).close()
        except OSError as err:
            raise SpecError(_FIELD, named, f"a running Ray cluster's address ({err})") from None
    try:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    except (ConnectionError, RuntimeError) as err:
        raise SpecError(_FIELD, named, f"a running Ray cluster ({err})") from None
    return ray


def _call(fn: Callable[[T], R], item: T) -> R:
    """One run on a Ray worker (``fn`` travels by reference: any importable callable)."""
    return fn(item)


def _ray_map(
    ray: Any, fn: Callable[[T], R], items: Sequence[T], advance: Callable[[int], None]
) -> list[R]:
    """``[fn(item) for item in items]`` as Ray tasks of one CPU each, in item order; the
    first failure is raised (as the run's own exception) and the rest cancelled."""
    remote = ray.remote(num_cpus=1, max_retries=0)(_call)
    refs = [remote.remote(fn, item) for item in items]
    where = {ref: k for k, ref in enumerate(refs)}
    results: dict[int, R] = {}
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                results[where[ref]] = ray.get(ref)
                advance(1)
    except BaseException:
        for ref in pending:
            ray.cancel(ref)
        raise
    return [results[k] for k in range(len(items))]
