"""Achieved throughput over a slot: a job's communication, and each host's NIC.

A job's communication throughput comes from its workers' counters: the bytes a worker sent
plus received per iteration over the seconds it spent communicating per iteration. A host's
NIC throughput comes from the cumulative NIC counters of its agent's heartbeats (the
``Telemetry`` message): bytes between two readings over the time between them, read once
per slot. Both are Gbit/s; what was not measured is absent, never zero.
"""

from __future__ import annotations

from collections.abc import Iterable

from mlsched.controller.agents import AgentInfo
from mlsched.perfmodel.base import GBIT, NicThroughput

__all__ = ["NicMeter", "comm_gbps"]


def comm_gbps(moved_bytes: float, iterations: float, comm_s: float, timed: float) -> float | None:
    """Gbit/s a worker achieved while communicating: ``moved_bytes`` over ``iterations``
    (every iteration moves bytes) per ``comm_s`` over ``timed`` (the timed iterations, after
    warm-up); None when either side is not measured."""
    if moved_bytes <= 0 or iterations <= 0 or comm_s <= 0 or timed <= 0:
        return None
    return moved_bytes / iterations * 8 / (comm_s / timed * GBIT)


class NicMeter:
    """Each host's NIC throughput over the last slot.

    :meth:`rates` reads every given agent's latest telemetry once per slot and compares it
    with the reading of the slot before: a host read for the first time, after a slot without
    a reading, or whose agent now counts another interface (or whose counters went back, a
    reboot) has no rate for this slot.
    """

    def __init__(self) -> None:
        # agent id -> (slot, interface, sampled unix, sent bytes, received bytes)
        self._last: dict[str, tuple[int, str, float, float, float]] = {}
        self._slot: int | None = None
        self._rates: dict[str, NicThroughput] = {}

    def rates(self, slot: int, agents: Iterable[AgentInfo]) -> dict[str, NicThroughput]:
        if slot == self._slot:
            return self._rates
        self._slot, self._rates = slot, {}
        for agent in agents:
            t = agent.telemetry
            if t is None or t.net_sent_bytes is None or t.net_recv_bytes is None:
                continue
            now = (slot, t.net_interface, t.sampled_unix, t.net_sent_bytes, t.net_recv_bytes)
            before = self._last.get(agent.agent_id)
            self._last[agent.agent_id] = now
            if before is None or before[0] != slot - 1 or before[1] != now[1]:
                continue
            dt, sent, recv = now[2] - before[2], now[3] - before[3], now[4] - before[4]
            if dt > 0 and sent >= 0 and recv >= 0:
                self._rates[agent.agent_id] = NicThroughput(
                    sent * 8 / (dt * GBIT), recv * 8 / (dt * GBIT)
                )
        return self._rates
