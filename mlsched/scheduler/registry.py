"""Policies by name, built in or from another package.

A policy is found, in this order, as
* a built-in (:data:`BUILTIN`: name -> ``module:Class``, imported on first use);
* a class registered at run time with :func:`register` (``mlsched.register``);
* an installed plugin: an entry point in the group ``mlsched.policies`` whose name is the
  policy's name and whose value is ``package.module:Class``;
* a ``package.module:Class`` reference given as the name itself (``--policy
  mypkg.policies:Srtf``), for a policy in a file on ``PYTHONPATH`` and not installed.

Every route gives the same class to the same code: the simulator, the experiments, the
demo and the controller all call :func:`create`. The registry imports no policy module
itself until a name asks for one, so a policy's module may import this one.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from mlsched.core.job import JobSpec
from mlsched.scheduler.policy import Policy

__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "PolicyOption",
    "available",
    "create",
    "policy_class",
    "policy_options",
    "register",
    "registered",
    "ring_placement_for",
]

P = TypeVar("P", bound=type[Policy])

#: The entry-point group an installed package names its policies in.
ENTRY_POINT_GROUP = "mlsched.policies"

#: The built-in policies: name -> ``module:Class``.
BUILTIN: dict[str, str] = {
    "antman": "mlsched.scheduler.baselines.antman:AntManPolicy",
    "bfp": "mlsched.scheduler.dps.bfp:FixedPricePolicy",
    "dorm": "mlsched.scheduler.baselines.dorm:DormPolicy",
    "dps": "mlsched.scheduler.dps.policy:DpsPolicy",
    "dps-simple": "mlsched.scheduler.dps.variants:DpsSimplePolicy",
    "drf": "mlsched.scheduler.baselines.drf:DrfPolicy",
    "fifo": "mlsched.scheduler.baselines.fifo:FifoPolicy",
    "gadget": "mlsched.scheduler.gadget.policy:GadgetPolicy",
    "gavel-fifo": "mlsched.scheduler.external.gavel_fifo:GavelFifoPolicy",
    "hetero": "mlsched.scheduler.hetero.policy:HeteroPolicy",
    "las2d": "mlsched.scheduler.baselines.las2d:Las2dPolicy",
    "oasis": "mlsched.scheduler.oasis.policy:OasisPolicy",
    "optimus": "mlsched.scheduler.baselines.optimus:OptimusPolicy",
    "pd_ors": "mlsched.scheduler.pdors.policy:PdorsPolicy",
    "random-price": "mlsched.scheduler.dps.random_price:RandomPricePolicy",
    "rrh": "mlsched.scheduler.baselines.rrh:RrhPolicy",
    "rs": "mlsched.scheduler.dps.variants:DpsRsPolicy",
    "tiresias": "mlsched.scheduler.baselines.tiresias:TiresiasPolicy",
    "top": "mlsched.scheduler.dps.top:TopPolicy",
}

_REGISTERED: dict[str, type[Policy]] = {}


def register(cls: P) -> P:
    """Class decorator: make a policy known by its ``name`` for the rest of the process.
    A name binds once; a built-in's name cannot be taken."""
    _check_class(cls, f"{cls.__module__}.{cls.__qualname__}")
    name = cls.name
    taken = _REGISTERED.get(name)
    if taken is not None and taken is not cls:
        raise ValueError(
            f"policy name {name!r} is already registered by {taken.__module__}.{taken.__qualname__}"
        )
    if name in BUILTIN and BUILTIN[name] != f"{cls.__module__}:{cls.__qualname__}":
        raise ValueError(f"policy name {name!r} is a built-in policy's ({BUILTIN[name]})")
    _REGISTERED[name] = cls
    return cls


def policy_class(name: str) -> type[Policy]:
    """The class a policy name or ``module:Class`` reference stands for; ValueError names
    what is wrong (an unknown name, a module that does not import, a class that is not a
    policy)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a policy name, got {name!r}")
    if name in BUILTIN:
        return _load(BUILTIN[name], name)
    if name in _REGISTERED:
        return _REGISTERED[name]
    if ":" in name:
        return _load(name, None)
    plugins = _plugins()
    if name in plugins:
        return _load(plugins[name], name)
    known = ", ".join(sorted({*BUILTIN, *_REGISTERED, *plugins}))
    raise ValueError(
        f"unknown policy {name!r}; known: {known} (or a package.module:Class reference)"
    )


def registered() -> dict[str, type[Policy]]:
    """Name -> class of every known policy (built-in, registered, installed), by name."""
    found = {name: policy_class(name) for name in BUILTIN}
    found.update(_REGISTERED)
    for name, ref in _plugins().items():
        found.setdefault(name, _load(ref, name))
    return dict(sorted(found.items()))


def available() -> dict[str, str]:
    """Name -> one-line description of every known policy, sorted by name."""
    return {name: cls.description for name, cls in registered().items()}


def create(name: str, **options: Any) -> Policy:
    """A new instance of the policy ``name`` (:func:`policy_class`); unknown names and bad
    options raise ValueError."""
    cls: Callable[..., Policy] = policy_class(name)
    try:
        return cls(**options)
    except TypeError as err:
        raise ValueError(f"policy {name!r}: {err}") from None


@dataclass(frozen=True)
class PolicyOption:
    """One keyword a policy takes: its name, type (as written), default, and whether it
    must be given (no default)."""

    name: str
    type: str
    default: Any
    required: bool = False

    def to_dict(self) -> dict[str, Any]:
        default = self.default
        if not isinstance(default, str | int | float | bool | type(None)):
            default = repr(default)
        return {"name": self.name, "type": self.type, "default": default, "required": self.required}


def policy_options(cls: type[Policy]) -> list[PolicyOption]:
    """The options a policy class takes (its ``__init__`` keywords and those it passes on
    to its bases with ``**options``), in the order they are declared."""
    out: dict[str, PolicyOption] = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is Policy:
            continue
        params = inspect.signature(init).parameters.values()
        for p in params:
            if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            annotation = p.annotation
            written = (
                annotation
                if isinstance(annotation, str)
                else getattr(annotation, "__name__", repr(annotation))
            )
            default = None if p.default is p.empty else p.default
            out.setdefault(
                p.name, PolicyOption(p.name, "" if annotation is p.empty else written, default)
            )
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break  # takes nothing more: its bases' options are not reachable
    return list(out.values())


def ring_placement_for(
    name: str, options: Mapping[str, Any], jobs: Iterable[JobSpec]
) -> dict[str, Any] | None:
    """``options`` with ``placement="ring"`` where some of ``jobs`` reserve bandwidth on
    ring hops (``hop_gbps``) and the policy has a ring placement the options leave unset
    (spec 003's baselines place such jobs with their hop reservations; the default
    placement ignores links, and the engine refuses the over-reserved allocation it makes).
    None when nothing changes."""
    if "placement" in options or not policy_class(name).ring_placement:
        return None
    if not any(j.hop_gbps for j in jobs):
        return None
    return {**options, "placement": "ring"}


def _plugins() -> dict[str, str]:
    """Name -> ``module:Class`` of every installed plugin policy."""
    from importlib.metadata import entry_points  # only where a name is not built in

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _load(ref: str, name: str | None) -> type[Policy]:
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise ValueError(f"policy reference {ref!r}: write it as package.module:Class")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"policy reference {ref!r}: cannot import {module_name}: {err}") from None
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ValueError(f"policy reference {ref!r}: {module_name} has no {attr}")
    _check_class(obj, ref)
    if name is not None and obj.name != name:
        raise ValueError(f"policy {name!r} ({ref}) calls itself {obj.name!r}")
    cls: type[Policy] = obj
    return cls


def _check_class(obj: Any, where: str) -> None:
    if not (isinstance(obj, type) and issubclass(obj, Policy)):
        raise ValueError(f"{where} is not a Policy subclass (mlsched.Policy)")
    if not obj.name:
        raise ValueError(f"{where} has no name (set the class attribute name)")
    if not obj.description:
        raise ValueError(f"policy {obj.name!r} ({where}) needs a one-line description")
