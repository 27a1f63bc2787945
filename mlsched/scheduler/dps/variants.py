"""DPS's two variants under their scheme names (spec 004 §3.7), so they can be run by name
like any policy (``mlsched simulate --policy dps,dps-simple,rs``):

* ``dps-simple``: DPS without the zero-price exploration (``explore_fraction`` fixed at 0);
* ``rs``: DPS-RS, DPS's pricing with random placement (``placement`` fixed at ``random``).

Each refuses the option its name fixes, naming it, rather than silently running something
else under that name; every other ``dps`` option applies.
"""

from __future__ import annotations

from typing import Any

from mlsched.scheduler.dps.policy import DpsPolicy

__all__ = ["DpsRsPolicy", "DpsSimplePolicy"]


def _fixed(name: str, option: str, value: object, options: dict[str, Any]) -> None:
    if option in options:
        raise ValueError(
            f"{option}: {name} fixes it to {value!r} (that is the scheme); set it on "
            "policy 'dps' instead"
        )


class DpsSimplePolicy(DpsPolicy):
    """DPS-simple: DPS with no exploration phase (θ = 0)."""

    name = "dps-simple"
    description = "DPS-simple (spec 004): DPS's bandit prices without the zero-price exploration"

    def __init__(self, **options: Any) -> None:
        _fixed(self.name, "explore_fraction", 0.0, options)
        super().__init__(explore_fraction=0.0, **options)


class DpsRsPolicy(DpsPolicy):
    """DPS-RS: DPS's prices, each task placed on a uniformly drawn server with room."""

    name = "rs"
    description = "DPS-RS (spec 004): DPS's bandit prices with random placement instead of PA"

    def __init__(self, **options: Any) -> None:
        _fixed(self.name, "placement", "random", options)
        super().__init__(placement="random", **options)
