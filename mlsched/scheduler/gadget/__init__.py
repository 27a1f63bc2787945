"""GADGET (spec 003): online scheduling of ring-all-reduce jobs with ring embedding.

Modules: :mod:`~.problem` (one slot's G-VNE: the jobs' ring-size gains, demands and hop
reservations; free server and link capacity), :mod:`~.embeddings` (rings on the two-tier
tree and the cheapest at given prices), :mod:`~.config_lp` (the LP over candidate rings,
by column generation), :mod:`~.rounding` (randomized rounding, strict repair and greedy
fill), :mod:`~.lp_rs_mde` (Algorithm 2) and :mod:`~.policy` (Algorithm 1, registered as
``gadget``).
"""

from mlsched.scheduler.gadget.lp_rs_mde import SlotSolution, lp_rs_mde
from mlsched.scheduler.gadget.policy import GadgetPolicy, SlotRecord
from mlsched.scheduler.gadget.problem import RingJob, SlotProblem

__all__ = ["GadgetPolicy", "RingJob", "SlotProblem", "SlotRecord", "SlotSolution", "lp_rs_mde"]
