"""Agreeing to stop, for all-reduce trainers, without a synchronous round trip per step.

Every rank must leave the loop at the same step or a collective hangs, so a local stop
request (SIGTERM, a lease) is put to a MAX vote. A blocking vote per step costs a full
network latency each iteration (a third of a 3-5 ms step on CPU); instead the vote for step
``s`` is started asynchronously before step ``s`` trains and read before step ``s + 1``:
the latency hides behind the step, and a stop lands one step later, on the same step
everywhere (every rank reads the same vote at the same boundary).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import torch

from mlsched.trainers.common import StopFlag

__all__ = ["Reducer", "StopVote"]


class Reducer(Protocol):
    def start(self, value: float) -> None:
        """Begin the MAX reduction of ``value`` over all ranks."""

    def result(self) -> float:
        """Wait for the reduction begun last; its value."""


class StopVote:
    def __init__(self, stop: StopFlag, reducer: Reducer) -> None:
        self.stop = stop
        self.reducer = reducer
        self.pending = False
        self.seconds = 0.0  # time spent starting/waiting this step (counted as comm)

    def should_stop(self) -> bool:
        """At a step boundary: read the vote begun a step ago, start the next one."""
        t0 = time.perf_counter()
        if self.pending:
            self.pending = False
            if self.reducer.result() > 0:
                if not self.stop:
                    self.stop.set("requested by a peer")
                self.seconds = time.perf_counter() - t0
                return True
        self.reducer.start(1.0 if self.stop else 0.0)
        self.pending = True
        self.seconds = time.perf_counter() - t0
        return False

    def finish(self) -> None:
        """Complete the outstanding vote (every rank started it) before leaving the loop."""
        if self.pending:
            self.pending = False
            self.reducer.result()


class TorchReducer:
    """``torch.distributed`` asynchronous all-reduce of a one-element flag."""

    def __init__(self, device: torch.device) -> None:
        import torch.distributed as dist

        self._dist = dist
        self._flag = torch.zeros(1, device=device)
        self._work: dist.Work | None = None

    def start(self, value: float) -> None:
        self._flag.fill_(value)
        self._work = self._dist.all_reduce(self._flag, op=self._dist.ReduceOp.MAX, async_op=True)

    def result(self) -> float:
        if self._work is not None:
            self._work.wait()
            self._work = None
        return float(self._flag.item())


class CallbackReducer:
    """A reducer from two callables (Horovod's ``allreduce_async`` / ``synchronize``)."""

    def __init__(self, start: Callable[[float], object], wait: Callable[[object], float]) -> None:
        self._start, self._wait = start, wait
        self._handle: object = None

    def start(self, value: float) -> None:
        self._handle = self._start(value)

    def result(self) -> float:
        return self._wait(self._handle)
