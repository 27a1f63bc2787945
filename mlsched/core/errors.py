"""Error families of the domain layer.

Every bad-input error names the field, the value it got and what was expected, so a user can
fix a job file or a trace row without reading code. Loaders prefix the location (file, row).
"""

from __future__ import annotations

from typing import Any

__all__ = ["MlschedError", "PolicyError", "SpecError"]


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
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}field '{field}': got {shown}, expected {expected}")

    def at(self, where: str, *, field_prefix: str = "") -> SpecError:
        """The same error located in ``where`` (a file or row) under ``field_prefix``."""
        field = f"{field_prefix}.{self.field}" if field_prefix else self.field
        loc = f"{where}: {self.where}" if self.where else where
        return SpecError(field, self.value, self.expected, where=loc)


class PolicyError(MlschedError, RuntimeError):
    """A policy returned something the engine cannot accept (a bug in the policy)."""

    def __init__(self, policy: str, message: str) -> None:
        self.policy = policy
        super().__init__(f"policy {policy!r}: {message}")
