"""The runtime model's errors of a run, in the order they were measured.

A steady job's model error is the same each slot but for the slot's number: a coasted
job (:mod:`.coast`) keeps one entry, shared by all its slots, and each slot that adds
shared entries marks where its own begin. What is read back is one
:class:`~mlsched.engine.results.ModelError` per job and slot, as if each had been kept on
its own; only the memory and the time to keep them differ (an integer appended to an array
instead of a tuple per job-slot, hundreds of thousands in a long trace simulation).

The errors are kept as distinct entries and, in order, the index of each error's entry
(an array of C ints): the columns a summary reads are the entries' columns taken at those
indices, without a Python object per error. A coasting job makes a new shared entry only
when its prediction changes (:mod:`.coast`), so entries no error uses stay few.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from operator import itemgetter
from typing import Any, overload

import numpy as np

from mlsched.engine.results import ModelError

__all__ = ["SHARED", "ModelErrors"]

#: The slot a shared entry holds: its slot is its mark's.
SHARED = -1
#: The index array's type code: a C int, as numpy's ``intc``.
_INDEX = "i"

_model_error = partial(tuple.__new__, ModelError)


class ModelErrors(Sequence[ModelError]):
    """A list of :class:`ModelError` that keeps a steady job's repeated errors shared."""

    __slots__ = ("_at", "_entries", "_order", "_slots")

    def __init__(self, errors: Iterable[ModelError] = ()) -> None:
        self._entries: list[ModelError] = list(errors)
        #: Each error's entry, in order (C ints: read as a numpy array without a copy;
        #: half the memory of a list of references, a long run keeping millions).
        self._order = array(_INDEX, range(len(self._entries)))
        # Where each marked slot's shared entries begin (ascending), and that slot.
        self._at: list[int] = []
        self._slots: list[int] = []

    def append(self, error: ModelError) -> None:
        """Keep one error (its own slot, >= 0)."""
        self._order.append(len(self._entries))
        self._entries.append(error)

    def shared(self, slot: int) -> Callable[[int], None]:
        """Mark ``slot``'s shared entries as beginning here; returns what keeps one (an
        index from :meth:`entry`), read back as ``slot``'s. Call again for another slot
        before keeping its own."""
        n = len(self._order)
        if self._at and self._at[-1] == n:
            self._slots[-1] = slot
        else:
            self._at.append(n)
            self._slots.append(slot)
        return self._order.append

    def entry(self, job_id: str, predicted_s: float, measured_s: float) -> int:
        """A shared entry, one job's error for every slot it is kept in: its index."""
        self._entries.append(_model_error((job_id, SHARED, predicted_s, measured_s)))
        return len(self._entries) - 1

    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """(predicted, measured) seconds, in order: the entries' columns at each error's
        index (no tuple read per error)."""
        entries, k = self._entries, len(self._entries)
        if not self._order:
            return np.zeros(0), np.zeros(0)
        order = np.frombuffer(self._order, dtype=np.intc)  # a view, let go on return
        predicted = np.fromiter(map(itemgetter(2), entries), float, count=k)
        measured = np.fromiter(map(itemgetter(3), entries), float, count=k)
        return predicted[order], measured[order]

    def copy(self) -> ModelErrors:
        return _rebuild(
            list(self._entries), array(_INDEX, self._order), list(self._at), list(self._slots)
        )

    def _read(self, i: int, e: ModelError) -> ModelError:
        if e[1] != SHARED:
            return e
        k = bisect.bisect_right(self._at, i) - 1
        return _model_error((e[0], self._slots[k], e[2], e[3]))

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, index: int) -> ModelError: ...

    @overload
    def __getitem__(self, index: slice) -> list[ModelError]: ...

    def __getitem__(self, index: int | slice) -> ModelError | list[ModelError]:
        entries, order = self._entries, self._order
        if isinstance(index, slice):
            return [self._read(i, entries[order[i]]) for i in range(*index.indices(len(self)))]
        i = index + len(order) if index < 0 else index
        return self._read(i, entries[order[index]])

    def __iter__(self) -> Iterator[ModelError]:
        entries, at, slots, n_marks = self._entries, self._at, self._slots, len(self._at)
        k, slot = 0, SHARED
        upcoming = at[0] if n_marks else -1
        for i, j in enumerate(self._order):
            while i == upcoming:
                slot = slots[k]
                k += 1
                upcoming = at[k] if k < n_marks else -1
            e = entries[j]
            yield e if e[1] != SHARED else _model_error((e[0], slot, e[2], e[3]))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ModelErrors({list(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self._entries, self._order, self._at, self._slots))


def _rebuild(
    entries: list[ModelError], order: array[int], at: list[int], slots: list[int]
) -> ModelErrors:
    out = ModelErrors()
    out._entries, out._order, out._at, out._slots = entries, order, at, slots
    return out
