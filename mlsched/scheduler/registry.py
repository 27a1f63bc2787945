"""Policies by name: ``register`` binds a name once; ``create`` builds one with options."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from mlsched.scheduler.policy import Policy

__all__ = ["available", "create", "register", "registered"]

P = TypeVar("P", bound=type[Policy])

_REGISTRY: dict[str, type[Policy]] = {}


def register(cls: P) -> P:
    """Class decorator: add a policy under its ``name``; a name binds only once."""
    name = cls.name
    if not name:
        raise ValueError(f"{cls.__qualname__} has no name")
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ValueError(
            f"policy name {name!r} is already registered by "
            f"{_REGISTRY[name].__module__}.{_REGISTRY[name].__qualname__}"
        )
    if not cls.description:
        raise ValueError(f"policy {name!r} needs a one-line description")
    _REGISTRY[name] = cls
    return cls


def _load_builtin() -> None:
    # Importing the package registers every built-in policy.
    import mlsched.scheduler  # noqa: F401


def available() -> dict[str, str]:
    """Name -> one-line description of every registered policy, sorted by name."""
    _load_builtin()
    return {n: _REGISTRY[n].description for n in sorted(_REGISTRY)}


def registered() -> dict[str, type[Policy]]:
    _load_builtin()
    return dict(sorted(_REGISTRY.items()))


def create(name: str, **options: Any) -> Policy:
    """A new policy instance; unknown names and bad options raise ValueError."""
    _load_builtin()
    try:
        cls: Callable[..., Policy] = _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown policy {name!r}; known: {', '.join(sorted(_REGISTRY))}. "
            "Did you forget to register it?"
        ) from None
    try:
        return cls(**options)
    except TypeError as err:
        raise ValueError(f"policy {name!r}: {err}") from None
