"""Agents coming back to a controller spread out: 50 real agents (threads of this process,
each with its own gRPC channel) against a stand-in controller on loopback.

Two ways a fleet returns at once: agents started before their controller retry their
registration on the same exponential schedule, and a restarted controller asks every agent
to register again at its next heartbeat, when agents started together heartbeat together.
The plausible bug each test catches: backoff without jitter, or an immediate re-registration,
which puts the whole fleet into one burst (every registration within a few tens of ms)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent import futures
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import grpc
from cluster_helpers import running
from test_agent import FakeController

from mlsched.agent import Agent, discover
from mlsched.net.auth import ClientAuth
from mlsched.net.ports import listen_port
from mlsched.v1 import agent_pb2, agent_pb2_grpc

AGENTS = 50
WINDOW_S = 0.1


class _Restarted(FakeController):
    """Answers each agent's first heartbeat after :meth:`restart` with ``reregister``, as a
    controller that lost its agents does; records when each registration arrived."""

    def __init__(self, interval_s: float) -> None:
        super().__init__(interval_s=interval_s)
        self.register_times: list[float] = []
        self._old: set[str] = set()  # ids given before the restart, not yet asked again

    def Register(self, request: Any, context: Any) -> agent_pb2.RegisterResponse:
        with self.lock:
            self.register_times.append(time.monotonic())
        return super().Register(request, context)

    def Heartbeat(self, request: Any, context: Any) -> agent_pb2.HeartbeatResponse:
        with self.lock:
            if request.agent_id in self._old:
                self._old.discard(request.agent_id)
                self.beats.append(request)
                return agent_pb2.HeartbeatResponse(reregister=True)
        return super().Heartbeat(request, context)

    def restart(self) -> float:
        with self.lock:
            self._old = {f"agent-{n}" for n in range(1, len(self.registers) + 1)}
            return time.monotonic()

    def registered_since(self, t: float) -> list[float]:
        with self.lock:
            return [r for r in self.register_times if r >= t]


@contextmanager
def _serving(ctl: FakeController, port: int) -> Iterator[None]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    agent_pb2_grpc.add_AgentServiceServicer_to_server(ctl, server)
    assert server.add_insecure_port(f"127.0.0.1:{port}") == port
    server.start()
    try:
        yield
    finally:
        server.stop(grace=None)


def _fleet(
    target: str, tmp: Path, backoff_s: tuple[float, float]
) -> AbstractContextManager[list[Agent]]:
    """``AGENTS`` agents started together, each run in a thread; shut down afterwards."""
    return running(
        [
            Agent(
                target,
                discover(controller=target, name=f"n{i:02d}", cpus=1, mem_gb=1, use_nvml=False),
                workdir=tmp / f"n{i:02d}",
                auth=ClientAuth(None),
                poll_s=0.05,
                rpc_timeout_s=2.0,
                backoff_s=backoff_s,
                use_nvml=False,
            )
            for i in range(AGENTS)
        ]
    )


def _densest(times: list[float], window: float = WINDOW_S) -> int:
    """The most registrations in any ``window`` seconds."""
    times = sorted(times)
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while t - times[lo] > window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def _wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.05)


def test_agents_started_before_their_controller_do_not_register_in_one_burst(
    tmp_path: Path,
) -> None:
    # Nothing listens for 2 s: every agent fails its first attempts at the same moments,
    # then retries on its own draws (without jitter: 0.25, 0.75, 1.75 and 3.75 s, all 50).
    port = listen_port()
    ctl = _Restarted(interval_s=1.0)
    with _fleet(f"127.0.0.1:{port}", tmp_path, backoff_s=(0.25, 4.0)):
        time.sleep(2.0)
        with _serving(ctl, port):
            _wait(lambda: len(ctl.registered_since(0.0)) >= AGENTS, 30, "every agent registered")
            times = ctl.registered_since(0.0)
    densest = _densest(times)
    assert densest <= AGENTS // 2, f"{densest} of {AGENTS} registrations within {WINDOW_S} s"
    assert max(times) - min(times) >= 0.5, "the registrations span less than half a second"


def test_a_restarted_controller_is_not_flooded_by_its_agents_registering_again(
    tmp_path: Path,
) -> None:
    port = listen_port()
    ctl = _Restarted(interval_s=1.0)
    with _serving(ctl, port), _fleet(f"127.0.0.1:{port}", tmp_path, backoff_s=(0.25, 4.0)):
        _wait(lambda: len(ctl.registered_since(0.0)) >= AGENTS, 30, "every agent registered")
        time.sleep(1.5)  # heartbeating
        since = ctl.restart()
        _wait(lambda: len(ctl.registered_since(since)) >= AGENTS, 30, "every agent came back")
        time.sleep(1.0)  # none registers twice
        times = ctl.registered_since(since)
    assert len(times) == AGENTS
    densest = _densest(times)
    assert densest <= AGENTS // 2, f"{densest} of {AGENTS} registrations within {WINDOW_S} s"
    # Spread over about one heartbeat interval, not stalled beyond it.
    assert 0.4 <= max(times) - min(times) <= 5.0, times
