"""DPS (spec 004; Zhang, Zhou, Lui, Li): dynamic posted prices learnt by a bandit per worker
and PS type, and the runtime-minimising placement PA, with the spec's baselines.

Modules: :mod:`~.types` (a job's worker/PS types and counts; capacity and occupancy per
type), :mod:`~.grid` (δ, the price levels, θ, η), :mod:`~.bandit` (one type's arms and
index), :mod:`~.placement` (PA and random placement), :mod:`~.posted` (what the pricing
schemes share: capacity check, quote, placement, run to completion, the decision record),
:mod:`~.policy` (Alg. 1, registered as ``dps``; ``explore_fraction=0`` is DPS-simple,
``placement=random`` DPS-RS; both are registered under their scheme names, ``dps-simple``
and ``rs``, by :mod:`~.variants`) and the baselines :mod:`~.bfp` (``bfp``), :mod:`~.top`
(``top``) and :mod:`~.random_price` (``random-price``). The best fixed prices are found by
:mod:`mlsched.scheduler.offline.fixed_price`.
"""

from mlsched.scheduler.dps.bandit import Arms, Choice
from mlsched.scheduler.dps.bfp import FixedPricePolicy
from mlsched.scheduler.dps.grid import price_grid, theorem_delta, theorem_theta
from mlsched.scheduler.dps.placement import pa, random_placement
from mlsched.scheduler.dps.policy import DEFAULT_EXPLORE_FRACTION, DpsPolicy
from mlsched.scheduler.dps.posted import Offer, PostedPricePolicy, Prices
from mlsched.scheduler.dps.random_price import RandomPricePolicy
from mlsched.scheduler.dps.top import TopPolicy
from mlsched.scheduler.dps.types import Shape, TypeBook, TypeState, shape_of
from mlsched.scheduler.dps.variants import DpsRsPolicy, DpsSimplePolicy

__all__ = [
    "DEFAULT_EXPLORE_FRACTION",
    "Arms",
    "Choice",
    "DpsPolicy",
    "DpsRsPolicy",
    "DpsSimplePolicy",
    "FixedPricePolicy",
    "Offer",
    "PostedPricePolicy",
    "Prices",
    "RandomPricePolicy",
    "Shape",
    "TopPolicy",
    "TypeBook",
    "TypeState",
    "pa",
    "price_grid",
    "random_placement",
    "shape_of",
    "theorem_delta",
    "theorem_theta",
]
