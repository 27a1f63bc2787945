"""A measurement <-> the store's row: the one stored form, written after each slot and read
back by a restarted controller (its runtime model replays them) and by the reports.

A row names where the job ran by agent (``layout``: ``[agent, workers, PSs]`` entries), not
by server index, so it stays true when a restarted controller numbers its servers anew; the
reader turns the layout back into a placement of its own cluster. Rows come from a file that
may be damaged or older: :func:`measurement_from_row` checks every field it reads and names
the one it refuses.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mlsched.controller.runs import Layout
from mlsched.core.allocation import Placement
from mlsched.core.job import JobSpec
from mlsched.perfmodel.base import Measurement, NicThroughput
from mlsched.perfmodel.estimator import RuntimeEstimator

__all__ = ["measurement_from_row", "measurement_row", "replay", "row_layout"]

log = logging.getLogger(__name__)


def measurement_row(m: Measurement, layout: Layout, predicted_s: float | None) -> dict[str, Any]:
    """The row of ``m`` (the store adds its slot and job id), where ``layout`` is where it
    ran and ``predicted_s`` what the runtime model predicted of its iteration time."""
    return {
        "layout": [list(e) for e in layout],
        "iterations": m.iterations,
        "iteration_s": m.iteration_time_s,
        "compute_s": m.compute_time_s,
        "comm_s": m.comm_time_s,
        "bytes_sent": m.bytes_sent,
        "bytes_recv": m.bytes_recv,
        "comm_gbps": m.comm_gbps,
        "nic_gbps": {h: list(r) for h, r in m.nic.items()},
        "predicted_s": predicted_s,
    }


def row_layout(row: Mapping[str, Any]) -> Layout:
    """The row's layout; ValueError naming ``layout`` when it is not one."""
    raw = row.get("layout")
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"measurement layout {raw!r:.80}: expected [[agent, workers, PSs], ...]")
    out = []
    for entry in raw:
        if (
            not isinstance(entry, list)
            or len(entry) != 3
            or not isinstance(entry[0], str)
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in entry[1:])
        ):
            raise ValueError(f"measurement layout entry {entry!r:.80}: expected [agent, w, p]")
        out.append((entry[0], int(entry[1]), int(entry[2])))
    return tuple(out)


def measurement_from_row(
    row: Mapping[str, Any], placement_of: Callable[[Layout], Placement | None]
) -> Measurement | None:
    """The measurement a stored row describes, placed by ``placement_of`` (None: the layout
    names an agent this cluster does not have). ValueError naming the field on a row that
    does not hold what :func:`measurement_row` writes."""
    placement = placement_of(row_layout(row))
    if placement is None:
        return None
    gbps = row.get("comm_gbps")  # rows stored before it was measured have none
    nic = row.get("nic_gbps") or {}
    if not isinstance(nic, dict):
        raise ValueError(f"measurement nic_gbps {nic!r:.80}: expected a mapping")
    return Measurement(
        job_id=_text(row, "job_id"),
        slot=int(_number(row, "slot")),
        placement=placement,
        iterations=_number(row, "iterations"),
        iteration_time_s=_number(row, "iteration_s"),
        compute_time_s=_number(row, "compute_s"),
        comm_time_s=_number(row, "comm_s"),
        bytes_sent=_number(row, "bytes_sent", 0.0),
        bytes_recv=_number(row, "bytes_recv", 0.0),
        comm_gbps=None if gbps is None else _number(row, "comm_gbps"),
        nic={str(h): _nic(h, r) for h, r in nic.items()},
    )


def replay(
    rows: Iterable[Mapping[str, Any]],
    specs: Mapping[str, JobSpec],
    placement_of: Callable[[Layout], Placement | None],
    runtime: RuntimeEstimator,
) -> tuple[int, int]:
    """Observe the stored measurements of the jobs in ``specs`` in ``runtime`` (a restarted
    controller's model learns again what its predecessor measured); the caller refits.
    A damaged row costs its sample, never the restart. Returns (replayed, damaged)."""
    replayed = damaged = 0
    for row in rows:
        spec = specs.get(str(row.get("job_id", "")))
        if spec is None:
            continue
        try:
            m = measurement_from_row(row, placement_of)
        except ValueError as err:
            damaged += 1
            log.warning("[controller] a measurement of job %s skipped: %s", spec.job_id, err)
            continue
        if m is not None:
            runtime.observe(m, spec)
            replayed += 1
    return replayed, damaged


def _text(row: Mapping[str, Any], name: str) -> str:
    value = row.get(name)
    if not isinstance(value, str) or not value:
        raise ValueError(f"measurement {name} {value!r:.80}: expected text")
    return value


def _number(row: Mapping[str, Any], name: str, default: float | None = None) -> float:
    value = row.get(name, default)
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"measurement {name} {value!r:.80}: expected a finite number >= 0")
    return float(value)


def _nic(host: str, rates: Any) -> NicThroughput:
    if (
        not isinstance(rates, list)
        or len(rates) != 2
        or not all(
            isinstance(r, (int, float)) and not isinstance(r, bool) and math.isfinite(r)
            for r in rates
        )
    ):
        raise ValueError(f"measurement nic_gbps[{host!r}] {rates!r:.80}: expected [sent, recv]")
    return NicThroughput(float(rates[0]), float(rates[1]))
