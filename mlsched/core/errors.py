"""Error families of the domain layer.

Every bad-input error names the field, the value it got and what was expected, so a user can
fix a job file or a trace row without reading code. Loaders prefix the location (file, row).
"""

from __future__ import annotations

import reprlib
from typing import Any

__all__ = ["MAX_MESSAGE", "MlschedError", "PolicyError", "SpecError", "shorten"]

#: Longest error message: a hostile value (a megabyte id, an expanded YAML bomb) must not
#: make the message itself the problem.
MAX_MESSAGE = 600

# reprlib stops walking a container after a few items, so the cost of showing a value is
# bounded whatever its size (repr() of a shared-reference YAML bomb is not).
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6
_REPR.maxlevel = 3


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, marked when cut."""
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."


class MlschedError(Exception):
    """Base of the project's own errors."""


class SpecError(MlschedError, ValueError):
    """A job spec, cluster, trace row or config field is invalid.

    ``field`` is a dotted path (``jobs[3].utility.kind``), ``value`` what was given and
    ``expected`` a short description of what is allowed.
    """

    def __init__(self, field: str, value: Any, expected: str, *, where: str = "") -> None:
        self.field = field
        self.value = value
        self.expected = expected
        self.where = where
        shown = shorten(_REPR.repr(value), 80)
        prefix = f"{shorten(where, 160)}: " if where else ""
        text = f"{prefix}field '{shorten(str(field), 160)}': got {shown}, expected {expected}"
        super().__init__(shorten(text, MAX_MESSAGE))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Crosses process boundaries (documents parsed in a worker) with the value shown
        # as its bounded repr: the value itself may be large or not picklable.
        return (_rebuild, (self.field, _REPR.repr(self.value)[:80], self.expected, self.where))

    def at(self, where: str, *, field_prefix: str = "") -> SpecError:
        """The same error located in ``where`` (a file or row) under ``field_prefix``."""
        field = f"{field_prefix}.{self.field}" if field_prefix else self.field
        loc = f"{where}: {self.where}" if self.where else where
        return SpecError(field, self.value, self.expected, where=loc)


class _Shown(str):
    """A value that arrived as its repr: shown as is, not quoted again."""

    def __repr__(self) -> str:
        return str(self)


def _rebuild(field: str, shown: str, expected: str, where: str) -> SpecError:
    return SpecError(field, _Shown(shown), expected, where=where)


class PolicyError(MlschedError, RuntimeError):
    """A policy returned something the engine cannot accept (a bug in the policy)."""

    def __init__(self, policy: str, message: str) -> None:
        self.policy = policy
        super().__init__(f"policy {policy!r}: {message}")
