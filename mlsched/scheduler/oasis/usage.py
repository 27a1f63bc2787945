"""Resources committed to admitted jobs, per (slot, server, resource): g and v of Alg. 1.

Shared with PD-ORS: the class lives in :mod:`mlsched.scheduler.committed`.
"""

from mlsched.scheduler.committed import CommittedUsage

__all__ = ["CommittedUsage"]
