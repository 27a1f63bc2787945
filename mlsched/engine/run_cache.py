"""Simulated runs shared between experiments: ``MLSCHED_RUN_CACHE=DIR``.

Some runs appear in more than one experiment: the baselines experiment runs every policy on
the same oasis-paper workloads on which the oasis experiment's H1 runs the paper's
baselines (Dorm's MILPs are most of the cost of both). A simulated run is a function of its
workload, its configuration (policy, options, seed, truth) and the code, and nothing else,
so with ``MLSCHED_RUN_CACHE`` naming a directory its result is stored there under a key
made of all three and read back when the same run comes again, in any process.

Off unless the variable is set; ``make reproduce`` sets it to a new directory for its
session and removes it after. A check that a repeated run gives the same result asks for a
fresh run (``simulate(..., cache=False)``).
"""

from __future__ import annotations

import dataclasses
import os
import pickle
from collections.abc import Mapping
from enum import Enum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from mlsched.engine.engine import RunResult

__all__ = ["ENV", "cache_dir", "load", "run_key", "store"]

ENV = "MLSCHED_RUN_CACHE"
#: The package directory (``mlsched/``), however deep this module sits in it.
_PACKAGE = Path(__file__).resolve().parents[__name__.count(".") - 1]


def cache_dir() -> Path | None:
    """The cache directory, or None when runs are not cached."""
    raw = os.environ.get(ENV, "")
    return Path(raw) if raw else None


@cache
def _code_fingerprint() -> bytes:
    """A digest of every module of the package: a result is reused only by the code that
    computed it."""
    import hashlib  # loads OpenSSL: only where runs are cached

    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(_PACKAGE)).encode())
        digest.update(path.read_bytes())
    return digest.digest()


def run_key(*inputs: Any) -> str:
    """The key of a run: its inputs, by value (:func:`canonical`), and the code."""
    import hashlib

    digest = hashlib.sha256(_code_fingerprint())
    digest.update(pickle.dumps(canonical(inputs), protocol=5))
    return digest.hexdigest()


def canonical(obj: Any) -> Any:
    """``obj`` as plain values: a dataclass by its fields only (what a cached property
    leaves in an instance's ``__dict__`` after a run is not part of it), mappings in their
    order, arrays by dtype, shape and bytes. TypeError for a value of another kind, so that
    no run is keyed by something that does not say what it is."""
    if isinstance(obj, str | bytes | int | float | bool | type(None)):
        return obj
    if isinstance(obj, Enum):
        return (type(obj).__qualname__, obj.value)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = dataclasses.fields(obj)
        return (
            type(obj).__qualname__,
            tuple((f.name, canonical(getattr(obj, f.name))) for f in fields),
        )
    if isinstance(obj, Mapping):
        return ("mapping", tuple((canonical(k), canonical(v)) for k, v in obj.items()))
    if isinstance(obj, list | tuple):
        return (type(obj).__name__, tuple(canonical(x) for x in obj))
    if isinstance(obj, set | frozenset):
        return ("set", tuple(sorted((canonical(x) for x in obj), key=repr)))
    if isinstance(obj, np.ndarray):
        return ("ndarray", obj.dtype.str, obj.shape, obj.tobytes())
    if isinstance(obj, np.generic):
        return canonical(obj.item())
    raise TypeError(f"cannot key a run by a {type(obj).__qualname__}")


def load(directory: Path, key: str) -> RunResult | None:
    path = directory / f"{key}.pickle"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    # Files this package wrote under the directory its user named, keyed by a digest.
    result: RunResult = pickle.loads(data)  # safe: our own results, not input
    return result


def store(directory: Path, key: str, result: RunResult) -> None:
    """Write atomically: a reader sees a whole result or none."""
    import tempfile  # only where runs are cached

    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".run-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(result, fh, protocol=5)
        os.replace(tmp, directory / f"{key}.pickle")
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
