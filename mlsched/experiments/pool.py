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
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import TypeVar

from mlsched.core.errors import SpecError

__all__ = ["Runner", "available_workers"]

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


class Runner:
    """A pool of worker processes for the runs of one experiment (use as a context
    manager, so that its parts share the workers and their start-up)."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = available_workers() if workers is None else max(1, workers)
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> Runner:
        if self.workers > 1:
            ctx = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], advance: Callable[[int], None]
    ) -> list[R]:
        """``[fn(item) for item in items]`` on the workers, in item order. ``fn`` must be a
        module-level function; an exception in a run is raised here, the runs not yet
        started are cancelled."""
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
