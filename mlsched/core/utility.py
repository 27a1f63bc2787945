"""Utility functions of jobs, as the five specs use them.

Two families:

* **duration utilities** ``f(x)``, x = completion slot - arrival slot (non-increasing in x):
  ``sigmoid`` (001/000: gamma1 / (1 + exp(gamma2 (x - gamma3)))), ``constant``, ``linear``
  (value * max(0, 1 - x / deadline)) and ``step`` (value while x <= deadline, else 0);
* **progress utilities** ``mu(k)``, k = progress (iterations), non-decreasing (003 GADGET):
  ``sigmoid_progress`` (l1 / (1 + exp(-l2 (k - l3)))), ``sqrt`` (c * sqrt(k)), ``log1p``
  (c * log(1 + k)) and ``energy`` (value * k - cost * k^2 up to its peak at
  k* = value / (2 cost), flat after: spec 003's energy instance made non-decreasing, A15).

:meth:`Utility.log_value` is computed stably (a time-critical sigmoid underflows to 0 at large
x, and OASiS works with ln f; see spec 001 A7).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from mlsched.core.errors import SpecError
from mlsched.core.fields import check_keys, req_float, req_mapping, req_str
from mlsched.core.limits import MAX_UTILITY_PARAM

__all__ = ["Utility", "UtilityKind"]


class UtilityKind(str, Enum):
    SIGMOID = "sigmoid"
    CONSTANT = "constant"
    LINEAR = "linear"
    STEP = "step"
    SIGMOID_PROGRESS = "sigmoid_progress"
    SQRT = "sqrt"
    LOG1P = "log1p"
    ENERGY = "energy"

    @property
    def over_progress(self) -> bool:
        return self in (
            UtilityKind.SIGMOID_PROGRESS,
            UtilityKind.SQRT,
            UtilityKind.LOG1P,
            UtilityKind.ENERGY,
        )


# Parameters each kind takes, with what they mean (shown in errors).
_PARAMS: dict[UtilityKind, tuple[str, ...]] = {
    UtilityKind.SIGMOID: ("priority", "decay", "target"),
    UtilityKind.CONSTANT: ("value",),
    UtilityKind.LINEAR: ("value", "deadline"),
    UtilityKind.STEP: ("value", "deadline"),
    UtilityKind.SIGMOID_PROGRESS: ("priority", "sensitivity", "expected"),
    UtilityKind.SQRT: ("scale",),
    UtilityKind.LOG1P: ("scale",),
    UtilityKind.ENERGY: ("value", "cost"),
}


def _softplus(z: float) -> float:
    # log(1 + e^z) without overflow for large z or loss for small z.
    return z + math.log1p(math.exp(-z)) if z > 0 else math.log1p(math.exp(z))


@dataclass(frozen=True)
class Utility:
    """A job's utility function; ``params`` holds the kind's named parameters."""

    kind: UtilityKind
    params: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.kind, UtilityKind):
            try:
                object.__setattr__(self, "kind", UtilityKind(self.kind))
            except ValueError:
                raise SpecError(
                    "utility.kind", self.kind, f"one of {', '.join(k.value for k in UtilityKind)}"
                ) from None
        names = _PARAMS[self.kind]
        raw = dict(self.params)
        check_keys(raw, names, "utility")
        clean: dict[str, float] = {}
        for name in names:
            clean[name] = req_float(raw, name, "utility", minimum=0.0, maximum=MAX_UTILITY_PARAM)
        if self.kind in (UtilityKind.LINEAR, UtilityKind.STEP) and clean["deadline"] <= 0:
            raise SpecError("utility.deadline", clean["deadline"], "a number > 0")
        object.__setattr__(self, "params", clean)

    # Constructors ---------------------------------------------------------------------
    @classmethod
    def sigmoid(cls, priority: float, decay: float, target: float) -> Utility:
        return cls(UtilityKind.SIGMOID, {"priority": priority, "decay": decay, "target": target})

    @classmethod
    def constant(cls, value: float) -> Utility:
        return cls(UtilityKind.CONSTANT, {"value": value})

    @classmethod
    def from_dict(cls, raw: Any, field_name: str = "utility") -> Utility:
        data = dict(req_mapping(raw, field_name))
        kind = req_str(data, "kind", field_name, choices=[k.value for k in UtilityKind])
        data.pop("kind")
        try:
            return cls(UtilityKind(kind), data)
        except SpecError as err:
            raise SpecError(
                err.field.replace("utility", field_name, 1), err.value, err.expected
            ) from None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, **self.params}

    # Evaluation -----------------------------------------------------------------------
    @property
    def over_progress(self) -> bool:
        """True for progress utilities mu(k); False for duration utilities f(x)."""
        return self.kind.over_progress

    def __call__(self, x: float) -> float:
        p = self.params
        k = self.kind
        if k is UtilityKind.SIGMOID:
            z = p["decay"] * (x - p["target"])
            if z > 700:
                return 0.0
            return p["priority"] / (1.0 + math.exp(z))
        if k is UtilityKind.CONSTANT:
            return p["value"]
        if k is UtilityKind.LINEAR:
            return p["value"] * max(0.0, 1.0 - x / p["deadline"])
        if k is UtilityKind.STEP:
            return p["value"] if x <= p["deadline"] else 0.0
        if k is UtilityKind.SIGMOID_PROGRESS:
            z = -p["sensitivity"] * (x - p["expected"])
            if z > 700:
                return 0.0
            return p["priority"] / (1.0 + math.exp(z))
        if k is UtilityKind.SQRT:
            return p["scale"] * math.sqrt(max(0.0, x))
        if k is UtilityKind.ENERGY:
            # Training pays value per unit of progress and burns energy quadratic in it;
            # past the peak more training only costs, so the utility stays at the peak.
            v, c = p["value"], p["cost"]
            y = max(0.0, x) if c == 0 else min(max(0.0, x), v / (2 * c))
            return v * y - c * y * y
        return p["scale"] * math.log1p(max(0.0, x))

    def log_value(self, x: float) -> float:
        """ln of the utility at x, stable where the value underflows; -inf where it is 0."""
        p = self.params
        if self.kind is UtilityKind.SIGMOID:
            if p["priority"] == 0:
                return -math.inf
            return math.log(p["priority"]) - _softplus(p["decay"] * (x - p["target"]))
        if self.kind is UtilityKind.SIGMOID_PROGRESS:
            if p["priority"] == 0:
                return -math.inf
            return math.log(p["priority"]) - _softplus(-p["sensitivity"] * (x - p["expected"]))
        value = self(x)
        return math.log(value) if value > 0 else -math.inf

    def log_increment(self, a: float, b: float) -> float:
        """ln(u(b) - u(a)) for a progress utility, stable where the difference underflows
        (a sigmoid far below its rise) or cancels (one saturated): -inf where it is not
        positive. GADGET's gains are these increments, and it must see every positive one."""
        p = self.params
        if self.kind is UtilityKind.SIGMOID_PROGRESS:
            s = p["sensitivity"]
            if not b > a or p["priority"] == 0 or s == 0:
                return -math.inf
            za, zb = s * (a - p["expected"]), s * (b - p["expected"])
            # sigma(zb) - sigma(za) = sigma(zb) sigma(-za) (1 - e^(za - zb)).
            return (
                math.log(p["priority"])
                - _softplus(-zb)
                - _softplus(za)
                + math.log(-math.expm1(za - zb))
            )
        gain = self(b) - self(a)
        return math.log(gain) if gain > 0 else -math.inf

    def values(self, xs: np.ndarray) -> np.ndarray:
        """Vectorised evaluation over an array of x."""
        return np.array([self(float(x)) for x in np.asarray(xs).ravel()]).reshape(np.shape(xs))

    @property
    def max_value(self) -> float:
        """Supremum over x >= 0 (duration) or the value at the largest progress (progress)."""
        p = self.params
        if self.kind is UtilityKind.SIGMOID:
            return self(0.0)
        if self.kind in (UtilityKind.CONSTANT, UtilityKind.LINEAR, UtilityKind.STEP):
            return p["value"]
        if self.kind is UtilityKind.SIGMOID_PROGRESS:
            return p["priority"]
        if self.kind is UtilityKind.ENERGY and p["cost"] > 0:
            return p["value"] ** 2 / (4 * p["cost"])
        return math.inf
