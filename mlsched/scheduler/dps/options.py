"""Checks of the DPS policies' options: a bad value is a ValueError naming the option."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["check_choice", "check_count", "check_flag", "check_number", "check_prices"]


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_number(
    option: str, value: object, *, low: float, high: float = math.inf, low_open: bool = False
) -> float:
    """``value`` as a float when it is a finite number in [low, high] (``(low, high]`` with
    ``low_open``)."""
    ok = _is_number(value) and math.isfinite(float(value))  # type: ignore[arg-type]
    if ok:
        v = float(value)  # type: ignore[arg-type]
        ok = (v > low if low_open else v >= low) and v <= high
    if not ok:
        lo = "(" if low_open else "["
        hi = "]" if math.isfinite(high) else ")"
        raise ValueError(
            f"{option} must be a finite number in {lo}{low:g}, {high:g}{hi}, got {value!r}"
        )
    return float(value)  # type: ignore[arg-type]


def check_count(option: str, value: object, *, low: int = 1) -> int:
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= low):
        raise ValueError(f"{option} must be an integer >= {low}, got {value!r}")
    return value


def check_choice(option: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{option} must be one of {', '.join(choices)}; got {value!r}")
    return str(value)


def check_flag(option: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{option} must be true or false, got {value!r}")
    return value


def check_prices(
    option: str, value: object, *, low: float, high: float, pairs: bool = False
) -> dict[str, Any]:
    """A mapping ``"worker:<type>"``/``"ps:<type>"`` -> a number in [low, high] (or, with
    ``pairs``, a two-item list ``[lower, upper]`` of such numbers, lower > 0 and <= upper)."""
    if not isinstance(value, Mapping):
        raise ValueError(
            f"{option} must map 'worker:<type>' or 'ps:<type>' to prices, got {value!r:.80}"
        )
    out: dict[str, Any] = {}
    for key, entry in value.items():
        role, _, name = str(key).partition(":")
        if role not in ("worker", "ps") or not name:
            raise ValueError(f"{option}: key {key!r} must be 'worker:<type>' or 'ps:<type>'")
        where = f"{option}[{key!r}]"
        if not pairs:
            out[str(key)] = check_number(where, entry, low=low, high=high)
            continue
        if isinstance(entry, (str, bytes)) or not hasattr(entry, "__len__") or len(entry) != 2:
            raise ValueError(f"{where} must be [lower, upper], got {entry!r:.80}")
        lower = check_number(f"{where}[0]", entry[0], low=0.0, high=high, low_open=True)
        upper = check_number(f"{where}[1]", entry[1], low=lower, high=high)
        out[str(key)] = (lower, upper)
    return out
