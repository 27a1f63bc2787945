"""Lazy re-exports for a package ``__init__``: a name is imported from its module on first
use, so importing a package (for its lightest module, or for ``--help``) loads nothing
heavy."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str,
    module_of: Mapping[str, str],
    names: Iterable[str],
    namespace: MutableMapping[str, Any],
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's ``__getattr__`` and ``__dir__``: ``module_of`` maps each exported name
    to its submodule; a name once imported is kept in ``namespace`` (the package's globals),
    so later look-ups do not come here."""
    exported = tuple(names)

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exported})

    return __getattr__, __dir__
