"""Named experiments, registered on first look-up.

Add an experiment by writing a module (or package) here whose function carries
``@register_experiment(name, description)`` and naming it in :data:`base.BUILTIN`. The modules
are imported when the registry is first read (``experiments()``, ``get_experiment``), not
with the package, so a simulation that only needs the runner loads none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlsched.core.lazy import lazy_exports

__all__ = [
    "BUILTIN",
    "SCALES",
    "Check",
    "Experiment",
    "experiments",
    "get_experiment",
    "register_experiment",
    "run_experiment",
]

if TYPE_CHECKING:
    from mlsched.experiments.base import (
        BUILTIN,
        SCALES,
        Check,
        Experiment,
        experiments,
        get_experiment,
        register_experiment,
        run_experiment,
    )

__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(__all__, "base"), __all__, globals())
