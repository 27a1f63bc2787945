"""A faster ``__init__`` for frozen dataclasses made by the thousand (a trace's job specs).

A frozen dataclass's own ``__init__`` sets each field with ``object.__setattr__``, one call
per field: for :class:`~mlsched.core.job.JobSpec`'s 35 fields that was half of building a
spec, and building specs a sixth of simulating a 5,000-job trace. :func:`fill_at_once`
replaces it with one made from the same fields that fills the instance's ``__dict__`` in
one update, in field order, then calls ``__post_init__``: the same signature, defaults,
default factories, errors for missing or unknown arguments, and the same instance.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["fill_at_once"]

_T = TypeVar("_T")


class _Factory:
    """The default of a parameter whose field has a default factory."""

    def __repr__(self) -> str:
        return "<factory>"  # as dataclasses shows it


def fill_at_once(cls: type[_T]) -> type[_T]:
    """Give the frozen dataclass ``cls`` the ``__init__`` described above (a class
    decorator, under ``@dataclass``)."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__}: a frozen dataclass with an instance __dict__ only")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if any(not f.init or f.kw_only or isinstance(f.type, dataclasses.InitVar) for f in fields):
        raise TypeError(f"{cls.__name__}: every field an init field, none keyword-only")
    namespace: dict[str, Any] = {"FACTORY": _Factory()}
    args, items = [], []
    for f in fields:
        name, value = f.name, f.name
        if f.default is not dataclasses.MISSING:
            namespace[f"default_{name}"] = f.default
            args.append(f"{name}=default_{name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"factory_{name}"] = f.default_factory
            args.append(f"{name}=FACTORY")
            value = f"factory_{name}() if {name} is FACTORY else {name}"
        else:
            args.append(name)
        items.append(f"{name!r}: {value}")
    body = [f"    self.__dict__.update({{{', '.join(items)}}})"]
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    source = f"def __init__(self, {', '.join(args)}) -> None:\n" + "\n".join(body) + "\n"
    exec(source, namespace)  # made here from the class's own fields, as dataclasses does
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)  # the dataclass's own
    setattr(cls, "__init__", init)  # noqa: B010 - mypy refuses a method assigned directly
    return cls
