"""Named experiments; importing this package registers the built-in ones.

Add an experiment by writing a module here whose function carries
``@register_experiment(name, description)`` and importing the module below.
"""

from mlsched.testbed.experiments import baselines, oasis, pdors
from mlsched.testbed.experiments.base import (
    SCALES,
    Check,
    Experiment,
    experiments,
    get_experiment,
    register_experiment,
    run_experiment,
)

__all__ = [
    "SCALES",
    "Check",
    "Experiment",
    "baselines",
    "experiments",
    "get_experiment",
    "oasis",
    "pdors",
    "register_experiment",
    "run_experiment",
]
