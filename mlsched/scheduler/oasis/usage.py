"""Resources committed to admitted jobs, per (slot, server, resource): g and v of Alg. 1.

Rows start at :attr:`CommittedUsage.base` (slots before it are gone: they are past) and
grow on demand, so the store works with and without a horizon.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["CommittedUsage"]

_TRIM_BATCH = 64


class CommittedUsage:
    """Committed amounts per slot; :meth:`window` views slots [start, stop)."""

    def __init__(self, n_servers: int, n_resources: int) -> None:
        self.base = 0
        self._rows = np.zeros((0, n_servers, n_resources))

    def _grow(self, stop: int) -> None:
        need = stop - self.base
        if need <= len(self._rows):
            return
        size = max(need, 2 * len(self._rows), 16)
        rows = np.zeros((size, *self._rows.shape[1:]))
        rows[: len(self._rows)] = self._rows
        self._rows = rows

    def window(self, start: int, stop: int) -> np.ndarray:
        """Committed usage of slots [start, stop), start >= base (a view: do not write)."""
        if start < self.base:
            raise ValueError(f"slot {start} is before the first kept slot {self.base}")
        self._grow(stop)
        return self._rows[start - self.base : stop - self.base]

    def at(self, slot: int) -> np.ndarray:
        return self.window(slot, slot + 1)[0]

    def add(self, slot: int, usage: Mapping[int, np.ndarray], sign: float = 1.0) -> None:
        """Add (``sign=-1``: remove) per-server amounts to a slot; past slots are ignored."""
        if slot < self.base:
            return
        self._grow(slot + 1)
        row = self._rows[slot - self.base]
        for server, amount in usage.items():
            row[server] += sign * amount
        if sign < 0:
            np.maximum(row, 0.0, out=row)  # float dust from add-then-remove

    def trim(self, before: int) -> None:
        """Forget slots before ``before`` (lazily: in batches, to copy rarely)."""
        drop = before - self.base
        if drop < _TRIM_BATCH:
            return
        if drop >= len(self._rows):
            self._rows = np.zeros((0, *self._rows.shape[1:]))
        else:
            self._rows = self._rows[drop:].copy()
        self.base = before
