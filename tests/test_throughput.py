"""Achieved throughput over a slot: a job's communication and each host's NIC."""

from __future__ import annotations

import pytest

from mlsched.controller import serde
from mlsched.controller.agents import AgentInfo
from mlsched.controller.throughput import NicMeter, comm_gbps
from mlsched.perfmodel.base import NicThroughput
from mlsched.v1 import agent_pb2


def test_comm_throughput_is_bytes_per_iteration_over_comm_seconds_per_iteration() -> None:
    # 100 iterations moved 1 GB; 90 timed ones spent 9 s communicating: 10 MB in 0.1 s.
    assert comm_gbps(1e9, 100, 9.0, 90) == pytest.approx(0.8)
    for unmeasured in ((0.0, 100, 9.0, 90), (1e9, 0, 9.0, 90), (1e9, 100, 0.0, 90)):
        assert comm_gbps(*unmeasured) is None


def _agent(name: str, t: float, sent: float | None, recv: float, nic: str = "eth0") -> AgentInfo:
    tel = agent_pb2.Telemetry(net_interface=nic, sampled_unix=t)
    if sent is not None:
        tel.net_sent_bytes, tel.net_recv_bytes = sent, recv
    report = serde.telemetry_from_proto(tel)  # as the controller holds it
    return AgentInfo(agent_id=name, host="10.0.0.1", capacity={}, telemetry=report)


def test_nic_meter_compares_successive_slots_only() -> None:
    meter = NicMeter()
    assert meter.rates(0, [_agent("a", 100.0, 0.0, 0.0), _agent("b", 100.0, None, 0.0)]) == {}
    rates = meter.rates(1, [_agent("a", 110.0, 2.5e9, 1.25e9), _agent("b", 110.0, None, 0.0)])
    assert rates == {"a": pytest.approx(NicThroughput(2.0, 1.0))}  # b has no counters
    # Read once per slot: a later call of the same slot keeps the slot's figures.
    assert meter.rates(1, [_agent("a", 115.0, 9e9, 9e9)]) is rates
    # A slot without a reading breaks the chain: the next one only starts a new interval.
    assert meter.rates(3, [_agent("a", 130.0, 5e9, 5e9)]) == {}
    assert meter.rates(4, [_agent("a", 140.0, 6.25e9, 5e9)]) == {
        "a": pytest.approx(NicThroughput(1.0, 0.0))
    }
    # Counters that went back (a reboot) or of another interface give no rate.
    assert meter.rates(5, [_agent("a", 150.0, 1e3, 1e3)]) == {}
    assert meter.rates(6, [_agent("a", 160.0, 2e9, 2e9, nic="eth1")]) == {}
    assert meter.rates(7, [_agent("a", 170.0, 3.25e9, 2e9, nic="eth1")]) == {
        "a": pytest.approx(NicThroughput(1.0, 0.0))
    }
