"""PD-ORS (Yu et al., spec 000): online primal-dual scheduling of synchronous PS jobs whose
speed depends on locality, with LP relaxation and randomised rounding per slot.

``needs`` (per-job work, internal/external rates), ``constants`` (U^r, L, mu), ``slot``
(Alg. 4), ``schedule`` (Alg. 2-3), ``policy`` (Alg. 1, registered as ``pd_ors``).
"""

from mlsched.scheduler.pdors.policy import PdorsPolicy

__all__ = ["PdorsPolicy"]
