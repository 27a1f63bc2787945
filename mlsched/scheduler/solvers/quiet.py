"""Keep a native solver's prints off standard output.

HiGHS writes some diagnostics with C ``printf`` whatever its options say (for example
``HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();``), straight into
file descriptor 1, where they interleave with the tables and JSON the commands print.
:func:`stdout_to_stderr` points descriptor 1 at standard error for the duration of a solve:
nothing is lost, and standard output stays the command's own. Descriptors are process-wide,
so a lock serialises the swap between threads (the controller solves in its slot loop while
other threads run); where descriptor 1 or 2 is closed, nothing is redirected.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["silenced", "stdout_to_stderr"]

_LOCK = threading.Lock()


def _libc_fflush() -> Callable[[Any], Any] | None:
    try:
        return ctypes.CDLL(None).fflush
    except (OSError, AttributeError):  # no libc symbols here: Python's own buffers only
        return None


_FFLUSH = _libc_fflush()


def _redirect() -> int | None:
    """Point fd 1 at fd 2; the saved fd 1, or None where either is closed."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError, AttributeError):  # fd 1 closed, or sys.stdout gone
        return None
    try:
        os.dup2(2, 1)
    except OSError:
        os.close(saved)
        return None
    return saved


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Within the block, whatever is written to file descriptor 1 goes to descriptor 2."""
    with _LOCK:
        saved = _redirect()
        try:
            yield
        finally:
            if saved is not None:
                if _FFLUSH is not None:
                    _FFLUSH(None)  # what the solver buffered goes to stderr, not later to fd 1
                os.dup2(saved, 1)
                os.close(saved)


@contextmanager
def silenced() -> Iterator[None]:
    """Within the block, descriptors 1 and 2 go to the null device: for a library's banner,
    printed whatever its options say (highspy's, when a solver is made)."""
    with _LOCK:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            saved = (os.dup(1), os.dup(2))
        except (OSError, ValueError, AttributeError):
            yield
            return
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 1)
            os.dup2(null, 2)
            yield
        finally:
            if _FFLUSH is not None:
                _FFLUSH(None)
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in (*saved, null):
                os.close(fd)
