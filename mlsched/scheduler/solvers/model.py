"""Building a MILP column by column and row by row, for :func:`.highs.solve_milp`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

__all__ = ["MilpModel"]


class MilpModel:
    """Columns (bounds, objective, integrality) and sparse ``A_ub x <= b_ub`` rows."""

    def __init__(self) -> None:
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.obj: list[float] = []
        self.kind: list[int] = []
        self.r: list[int] = []
        self.c: list[int] = []
        self.v: list[float] = []
        self.b: list[float] = []

    def var(self, lo: float, hi: float, obj: float = 0.0, integer: bool = True) -> int:
        """A new column; its index."""
        self.lo.append(lo)
        self.hi.append(hi)
        self.obj.append(obj)
        self.kind.append(1 if integer else 0)
        return len(self.lo) - 1

    def row(self, entries: Sequence[tuple[int, float]], rhs: float) -> None:
        """``sum(value * x[column] for column, value in entries) <= rhs``."""
        k = len(self.b)
        for col, val in entries:
            self.r.append(k)
            self.c.append(col)
            self.v.append(val)
        self.b.append(rhs)

    def a_ub(self, n_cols: int | None = None) -> csr_matrix:
        from scipy.sparse import coo_matrix  # lazily: importing a policy stays light

        n = len(self.lo) if n_cols is None else n_cols
        return coo_matrix((self.v, (self.r, self.c)), shape=(len(self.b), n)).tocsr()
