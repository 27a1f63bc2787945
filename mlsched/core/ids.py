"""Identifiers and the paths built from them.

Job and agent ids become directory names, process arguments, log lines and gRPC fields, so
they are restricted to a portable charset: ``[A-Za-z0-9._-]``, not starting with a dot (no
``.``/``..``, no hidden files), at most :data:`MAX_ID_LEN` characters. Anything built from an
id or a user-supplied path goes through :func:`contained`, which resolves the result and
refuses it unless it stays under its root.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from mlsched.core.errors import SpecError

__all__ = [
    "ID_CHARSET",
    "MAX_ID_LEN",
    "check_id",
    "check_text",
    "check_under",
    "contained",
    "is_id",
]

MAX_ID_LEN = 128
ID_CHARSET = "letters, digits, '.', '_' and '-', not starting with '.'"
_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
#: Short ids found valid (bounded): GPU and worker type names recur in every job spec.
_VALID: set[tuple[str, int]] = set()
_VALID_MAX = 4096


def is_id(value: Any, max_len: int = MAX_ID_LEN) -> bool:
    return isinstance(value, str) and 0 < len(value) <= max_len and _ID.fullmatch(value) is not None


def check_id(value: Any, field: str, *, max_len: int = MAX_ID_LEN) -> str:
    """``value`` if it is a valid id, else a :class:`SpecError` naming ``field``."""
    if type(value) is str and (value, max_len) in _VALID:  # a type name, again
        return value
    if not is_id(value, max_len):
        raise SpecError(field, value, f"an id of 1-{max_len} characters: {ID_CHARSET}")
    if len(_VALID) < _VALID_MAX and len(value) <= 16:  # short names recur (GPU types)
        _VALID.add((value, max_len))
    return str(value)


def check_text(value: Any, field: str, *, max_len: int) -> str:
    """A non-empty printable string (no control characters) of at most ``max_len``."""
    if not isinstance(value, str) or not 0 < len(value) <= max_len or not value.isprintable():
        raise SpecError(field, value, f"printable text of 1-{max_len} characters")
    return value


def contained(root: str | os.PathLike[str], *parts: str, field: str = "path") -> Path:
    """``root/parts...`` resolved (links followed), refused unless it stays under ``root``.

    Absolute parts are refused too: ``Path("/a") / "/etc"`` would silently drop the root.
    """
    base = Path(root).resolve()
    for part in parts:
        if not isinstance(part, str) or "\x00" in part or os.path.isabs(part):
            raise SpecError(field, part, f"a relative path under {base}")
    target = base.joinpath(*parts).resolve()
    if target != base and base not in target.parents:
        raise SpecError(field, os.path.join(*parts) if parts else "", f"a path under {base}")
    return target


def check_under(root: str | os.PathLike[str], path: str, *, field: str = "path") -> Path:
    """``path`` (absolute or relative to the working directory) resolved, refused unless it
    lies under ``root``."""
    base = Path(root).resolve()
    if not isinstance(path, str) or not path or "\x00" in path:
        raise SpecError(field, path, f"a path under {base}")
    target = Path(path).resolve()
    if target != base and base not in target.parents:
        raise SpecError(field, path, f"a path under {base}")
    return target
