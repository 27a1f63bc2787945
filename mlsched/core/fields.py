"""Small helpers that read typed fields out of YAML/JSON mappings with field-naming errors."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from mlsched.core.errors import SpecError
from mlsched.core.limits import MAX_STRING_LEN, Bound

__all__ = [
    "bounded",
    "check_keys",
    "check_number",
    "opt_bounded",
    "req_float",
    "req_int",
    "req_mapping",
    "req_str",
]

_MISSING = object()
E = TypeVar("E")


def req_mapping(raw: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise SpecError(field, raw, "a mapping")
    return raw


def check_keys(raw: Mapping[str, Any], allowed: Iterable[str], field: str) -> None:
    """Refuse unknown keys: a typo must not silently fall back to a default."""
    allowed_set = allowed if isinstance(allowed, frozenset) else frozenset(allowed)
    if isinstance(raw, dict) and raw.keys() <= allowed_set:  # the common case, in C
        return
    for key in raw:
        if key not in allowed_set:
            prefix = f"{field}." if field else ""
            raise SpecError(
                f"{prefix}{key}",
                raw[key],
                f"one of the known fields: {', '.join(sorted(allowed_set))}",
            )


def _path(field: str, key: str) -> str:
    return f"{field}.{key}" if field else key


def req_str(
    raw: Mapping[str, Any],
    key: str,
    field: str,
    *,
    choices: Iterable[str] | None = None,
    default: Any = _MISSING,
) -> str:
    value = raw.get(key, default)
    if value is _MISSING:
        raise SpecError(_path(field, key), None, "a required string")
    if not isinstance(value, str) or not value or len(value) > MAX_STRING_LEN:
        raise SpecError(
            _path(field, key), value, f"a non-empty string of at most {MAX_STRING_LEN} characters"
        )
    if choices is not None:
        options = list(choices)
        if value not in options:
            raise SpecError(_path(field, key), value, f"one of {', '.join(options)}")
    return value


def _number(value: Any, path: str, what: str) -> float:
    """A finite int or float; strings ("16") and booleans are refused, never converted:
    a file that quotes a number has a mistake in it worth reporting."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(path, value, what)
    try:
        number = float(value)
    except OverflowError:  # an int beyond float range
        raise SpecError(path, value, what) from None
    if not math.isfinite(number):
        raise SpecError(path, value, what)
    return number


def check_number(value: Any, path: str, bound: Bound) -> float | int:
    """``value`` if it is a number of the right kind within ``bound``, else a SpecError."""
    kind = type(value)
    if kind is int:  # the common cases, checked cheaply (an int is compared exactly: one
        # beyond float range is out of bounds, not an OverflowError)
        if bound.holds(value):
            return value if bound.integer else float(value)
    elif kind is float and math.isfinite(value) and bound.holds(value):
        if not bound.integer:
            return value
        if value.is_integer():
            return int(value)
    what = bound.describe()  # built only for an error: it is a formatted string
    number = _number(value, path, what)
    if bound.integer:
        if isinstance(value, float) and not number.is_integer():
            raise SpecError(path, value, what)
        if not bound.holds(number):
            raise SpecError(path, value, what)
        return int(value)
    if not bound.holds(number):
        raise SpecError(path, value, what)
    return number


def bounded(
    raw: Mapping[str, Any], key: str, field: str, bound: Bound, *, default: Any = _MISSING
) -> Any:
    """A number under ``key`` within ``bound`` (``default`` when absent)."""
    value = raw.get(key, default)
    path = _path(field, key)
    if value is _MISSING:
        raise SpecError(path, None, f"a required {bound.describe().removeprefix('a ')}")
    if value is default and key not in raw:
        return default
    return check_number(value, path, bound)


def opt_bounded(raw: Mapping[str, Any], key: str, field: str, bound: Bound) -> Any:
    """Like :func:`bounded`, None when absent or null."""
    if raw.get(key) is None:
        return None
    return check_number(raw[key], _path(field, key), bound)


def req_float(
    raw: Mapping[str, Any],
    key: str,
    field: str,
    *,
    minimum: float | None = None,
    exclusive_min: bool = False,
    maximum: float | None = None,
    default: Any = _MISSING,
) -> float:
    value = raw.get(key, default)
    path = _path(field, key)
    if value is _MISSING:
        raise SpecError(path, None, "a required number")
    number = _number(value, path, "a finite number")
    _check_range(number, path, minimum, exclusive_min, maximum)
    return number


def req_int(
    raw: Mapping[str, Any],
    key: str,
    field: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    default: Any = _MISSING,
) -> int:
    value = raw.get(key, default)
    path = _path(field, key)
    if value is _MISSING:
        raise SpecError(path, None, "a required integer")
    number = _number(value, path, "an integer")
    if number != int(number):
        raise SpecError(path, value, "an integer")
    _check_range(number, path, minimum, False, maximum)
    return int(number)


def _check_range(
    number: float, path: str, minimum: float | None, exclusive_min: bool, maximum: float | None
) -> None:
    if minimum is not None:
        if exclusive_min and number <= minimum:
            raise SpecError(path, number, f"a number > {minimum:g}")
        if not exclusive_min and number < minimum:
            raise SpecError(path, number, f"a number >= {minimum:g}")
    if maximum is not None and number > maximum:
        raise SpecError(path, number, f"a number <= {maximum:g}")
