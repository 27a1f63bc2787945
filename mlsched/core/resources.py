"""Resource vectors over named resource types.

A :class:`ResourceVector` is an immutable mapping from a resource name (``gpu``, ``cpu``,
``mem_gb``, ``bw_gbps``, ``storage_gb`` or any other identifier) to a non-negative amount.
Units live in the names, never in the values. Hot paths (the engine, the policies) convert
vectors once into numpy arrays over a cluster's fixed resource order with :meth:`to_array`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from mlsched.core.errors import SpecError
from mlsched.core.fields import check_number
from mlsched.core.limits import MAX_RESOURCE, Bound

__all__ = ["STANDARD_RESOURCES", "ResourceVector"]

#: Resource names every part of the project knows; others are allowed if they are identifiers.
STANDARD_RESOURCES: tuple[str, ...] = ("gpu", "cpu", "mem_gb", "storage_gb", "bw_gbps")

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_PARSED: dict[tuple[Any, ...], ResourceVector] = {}


class ResourceVector(Mapping[str, float]):
    """Immutable, validated amounts of named resources; missing names read as 0."""

    __slots__ = ("_hash", "_items")

    def __init__(
        self,
        amounts: Mapping[str, float] | Iterable[tuple[str, float]] = (),
        /,
        *,
        field: str = "resources",
    ) -> None:
        items = dict(amounts.items() if isinstance(amounts, Mapping) else amounts)
        clean: dict[str, float] = {}
        for name, value in items.items():
            if not isinstance(name, str) or not _NAME.match(name):
                raise SpecError(field, name, "a lowercase identifier such as gpu, cpu, mem_gb")
            try:
                amount = float(value)
            except (TypeError, ValueError):
                raise SpecError(f"{field}.{name}", value, "a number") from None
            if not math.isfinite(amount) or amount < 0:
                raise SpecError(f"{field}.{name}", value, "a finite number >= 0")
            if amount > 0:
                clean[name] = amount
        self._items: dict[str, float] = dict(sorted(clean.items()))
        self._hash: int | None = None

    # Mapping protocol -------------------------------------------------------------------
    def __getitem__(self, name: str) -> float:
        return self._items.get(name, 0.0)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(self._items.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ResourceVector):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._items == ResourceVector(other)._items
        return NotImplemented

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v:g}" for k, v in self._items.items())
        return f"ResourceVector({inner})"

    # Arithmetic ---------------------------------------------------------------------------
    def __add__(self, other: Mapping[str, float]) -> ResourceVector:
        out = dict(self._items)
        for k, v in other.items():
            out[k] = out.get(k, 0.0) + v
        return ResourceVector(out)

    def __sub__(self, other: Mapping[str, float]) -> ResourceVector:
        """Difference clipped at zero (a vector never holds negative amounts)."""
        out = dict(self._items)
        for k, v in other.items():
            out[k] = max(0.0, out.get(k, 0.0) - v)
        return ResourceVector(out)

    def __mul__(self, factor: float) -> ResourceVector:
        return ResourceVector({k: v * factor for k, v in self._items.items()})

    __rmul__ = __mul__

    def fits_in(self, capacity: Mapping[str, float], *, tol: float = 1e-9) -> bool:
        """True when every amount here is at most the same amount in ``capacity``."""
        return all(v <= capacity.get(k, 0.0) + tol for k, v in self._items.items())

    def to_array(self, names: tuple[str, ...]) -> np.ndarray:
        """Amounts in the order of ``names`` (names absent here are 0)."""
        return np.array([self._items.get(n, 0.0) for n in names], dtype=float)

    def as_dict(self) -> dict[str, float]:
        return dict(self._items)

    @classmethod
    def parse(cls, raw: Any, *, field: str) -> ResourceVector:
        """Build from a YAML/JSON mapping, naming ``field`` in any error."""
        if raw is None:
            return cls()
        if isinstance(raw, ResourceVector):
            return raw
        if not isinstance(raw, Mapping):
            raise SpecError(field, raw, "a mapping of resource name to amount")
        # A mapping read before gives the same (immutable) vector: a trace's thousands of
        # jobs ask for a handful of demands. Types are part of the key (True is not 1).
        try:
            key: tuple[Any, ...] | None = tuple((k, type(v), v) for k, v in raw.items())
            known = _PARSED.get(key)  # type: ignore[arg-type]
        except TypeError:  # an unhashable value: checked below, and refused there
            key = known = None
        if known is not None:
            return known
        bound = Bound(0.0, MAX_RESOURCE)
        for name, value in raw.items():
            if isinstance(name, str) and _NAME.match(name) and len(name) <= 64:
                check_number(value, f"{field}.{name}", bound)
            else:
                raise SpecError(field, name, "a lowercase identifier such as gpu, cpu, mem_gb")
        vector = cls(raw, field=field)
        if key is not None and len(_PARSED) < 4096:
            _PARSED[key] = vector
        return vector
