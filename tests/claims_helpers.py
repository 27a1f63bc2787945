"""What the experiments' smoke tests assert about the reproduction table's claims."""

from __future__ import annotations

from typing import Any

from mlsched.experiments.claims import PAPERS, claims_of


def assert_claims_checked(results: dict[str, Any]) -> None:
    """Every claim the registry gives ``results``'s experiment names a check it has (a
    renamed check would leave its claim 'not run' in docs/reproduction.md)."""
    names = {c["name"] for c in results["checks"]}
    spec = next(s for s, (_, exp) in PAPERS.items() if exp == results["experiment"])
    missing = [c.check for c in claims_of(spec) if c.check and c.check not in names]
    assert missing == [], (missing, sorted(names))
