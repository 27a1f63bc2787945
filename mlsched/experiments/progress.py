"""How long work shows its progress: the factory a command or an experiment is given, and the
one that shows nothing (light to import: a simulation that shows no bar loads nothing else)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

__all__ = ["ProgressFactory", "no_progress"]


class ProgressFactory(Protocol):
    """Opens a progress display for ``total`` steps; the yielded callable advances it."""

    def __call__(
        self, total: int | None, desc: str
    ) -> AbstractContextManager[Callable[[int], None]]: ...


@contextmanager
def no_progress(total: int | None, desc: str) -> Iterator[Callable[[int], None]]:
    """A progress display that shows nothing."""

    def advance(n: int = 1) -> None:
        return None

    yield advance
