"""What clients are told about prices: each job's quote and answer, and the market's totals.

A pricing policy (spec 004's DPS and its baselines) quotes a price when a job arrives; the
engine puts it to the user (the job's private valuation: accept iff the charge is within
it; a job without one accepts any price) and records the quote on the job. These turn the
records into the fields of ``JobStatus`` and ``ClusterStatus``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mlsched.engine.results import JobRecord

__all__ = ["market", "quote_fields"]


def quote_fields(record: JobRecord) -> dict[str, Any]:
    """A job's price (the quote's total), the user's answer, the charge and unit prices."""
    quote = record.quote
    if quote is None:
        return {}
    return {
        "price": quote.total,
        "quote_decision": record.quote_decision,
        "price_paid": record.price_paid,
        "worker_price": float(quote.unit_prices.get("worker", 0.0)),
        "ps_price": float(quote.unit_prices.get("ps", 0.0)),
    }


def market(records: Iterable[JobRecord]) -> dict[str, Any]:
    """Revenue, prices put to users and prices accepted, over ``records``."""
    revenue, quotes, accepted = 0.0, 0, 0
    for r in records:
        revenue += r.price_paid
        decision = r.quote_decision
        quotes += bool(decision)
        accepted += decision == "accepted"
    return {"revenue": revenue, "quotes": quotes, "quotes_accepted": accepted}
