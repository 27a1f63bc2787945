"""The user a quoted price is put to in simulation: accept or decline."""

from __future__ import annotations

from collections.abc import Callable

from mlsched.core.allocation import Quote
from mlsched.core.job import JobSpec

__all__ = ["UserModel", "valuation_user"]

#: Whether the job's user accepts the quote.
UserModel = Callable[[JobSpec, Quote], bool]


def valuation_user(job: JobSpec, quote: Quote) -> bool:
    """The default user: accepts iff the total charge is within its private valuation."""
    return job.valuation is None or quote.total <= job.valuation + 1e-12
