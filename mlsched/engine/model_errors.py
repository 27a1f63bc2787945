"""The runtime model's errors of a run, in the order they were measured.

A steady job's model error is the same each slot but for the slot's number: a coasted
job (:mod:`.coast`) keeps one entry, shared by all its slots, and each slot that adds
shared entries marks where its own begin. What is read back is one
:class:`~mlsched.engine.results.ModelError` per job and slot, as if each had been kept on
its own; only the memory and the time to keep them differ (a list append instead of a
tuple per job-slot, hundreds of thousands in a long trace simulation).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from operator import itemgetter
from typing import Any, overload

import numpy as np

from mlsched.engine.results import ModelError

__all__ = ["SHARED", "ModelErrors"]

#: The slot a shared entry holds: its slot is its mark's.
SHARED = -1

_model_error = partial(tuple.__new__, ModelError)


class ModelErrors(Sequence[ModelError]):
    """A list of :class:`ModelError` that keeps a steady job's repeated errors shared."""

    __slots__ = ("_at", "_items", "_slots")

    def __init__(self, errors: Iterable[ModelError] = ()) -> None:
        self._items: list[ModelError] = list(errors)
        # Where each marked slot's shared entries begin (ascending), and that slot.
        self._at: list[int] = []
        self._slots: list[int] = []

    def append(self, error: ModelError) -> None:
        """Keep one error (its own slot, >= 0)."""
        self._items.append(error)

    def shared(self, slot: int) -> Callable[[ModelError], None]:
        """Mark ``slot``'s shared entries as beginning here; returns what keeps one: an
        entry whose slot is :data:`SHARED`, read back as ``slot``'s. Call again for another
        slot before keeping its own."""
        n = len(self._items)
        if self._at and self._at[-1] == n:
            self._slots[-1] = slot
        else:
            self._at.append(n)
            self._slots.append(slot)
        return self._items.append

    @staticmethod
    def entry(job_id: str, predicted_s: float, measured_s: float) -> ModelError:
        """A shared entry: one job's error for every slot it is kept in."""
        return _model_error((job_id, SHARED, predicted_s, measured_s))

    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """(predicted, measured) seconds, in order: read without building a tuple each."""
        items, n = self._items, len(self._items)
        return (
            np.fromiter(map(itemgetter(2), items), float, count=n),
            np.fromiter(map(itemgetter(3), items), float, count=n),
        )

    def copy(self) -> ModelErrors:
        return _rebuild(list(self._items), list(self._at), list(self._slots))

    def _read(self, i: int, e: ModelError) -> ModelError:
        if e[1] != SHARED:
            return e
        k = bisect.bisect_right(self._at, i) - 1
        return _model_error((e[0], self._slots[k], e[2], e[3]))

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> ModelError: ...

    @overload
    def __getitem__(self, index: slice) -> list[ModelError]: ...

    def __getitem__(self, index: int | slice) -> ModelError | list[ModelError]:
        if isinstance(index, slice):
            return [self._read(i, self._items[i]) for i in range(*index.indices(len(self)))]
        i = index + len(self._items) if index < 0 else index
        return self._read(i, self._items[index])

    def __iter__(self) -> Iterator[ModelError]:
        at, slots, n_marks = self._at, self._slots, len(self._at)
        k, slot = 0, SHARED
        upcoming = at[0] if n_marks else -1
        for i, e in enumerate(self._items):
            while i == upcoming:
                slot = slots[k]
                k += 1
                upcoming = at[k] if k < n_marks else -1
            yield e if e[1] != SHARED else _model_error((e[0], slot, e[2], e[3]))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ModelErrors({list(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self._items, self._at, self._slots))


def _rebuild(items: list[ModelError], at: list[int], slots: list[int]) -> ModelErrors:
    out = ModelErrors()
    out._items, out._at, out._slots = items, at, slots
    return out
