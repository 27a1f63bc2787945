"""Free loopback ports for local agents and jobs (the demo, benchmarks and tests).

An agent's ``--ports LO-HI`` is a range its tasks listen on (rendezvous stores), so fixed
ranges collide when two local clusters run on one machine. :func:`free_port_range` picks a
range whose every port binds now, below the kernel's ephemeral range (so outgoing
connections do not take its ports later), and never hands the same range out twice in one
process.
"""

from __future__ import annotations

import random
import socket
import threading

__all__ = ["DEFAULT_PORTS", "free_port", "free_port_range", "listen_port"]

#: An agent's default ``--ports`` (here, not in the agent's discovery module, so that the
#: command line can state it without importing what discovery needs).
DEFAULT_PORTS = (29500, 29999)

# Below Linux's default ephemeral range (32768-60999) and above the well-known services.
_LOW, _HIGH = 20_000, 32_767
_given: set[int] = set()
_lock = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """An unused port on ``host`` (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def listen_port(host: str = "127.0.0.1") -> int:
    """A port for a server started later (a rendezvous store, a restarted server): free
    now, below the ephemeral range so that no outgoing connection takes it meanwhile (an
    OS-picked :func:`free_port` can be), and never handed out twice in this process."""
    return int(free_port_range(1, host).split("-")[0])


def _binds(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port_range(count: int = 100, host: str = "127.0.0.1", tries: int = 200) -> str:
    """``"LO-HI"``: ``count`` consecutive ports on ``host`` that all bind now and overlap no
    range this process handed out before. RuntimeError when none is found in ``tries``."""
    if not 1 <= count <= _HIGH - _LOW:
        raise ValueError(f"count must be in 1..{_HIGH - _LOW}, got {count}")
    rng = random.Random()
    with _lock:
        for _ in range(tries):
            lo = rng.randrange(_LOW, _HIGH - count + 2)
            ports = range(lo, lo + count)
            if any(p in _given for p in ports):
                continue
            if all(_binds(host, p) for p in ports):
                _given.update(ports)
                return f"{lo}-{lo + count - 1}"
    raise RuntimeError(f"no {count} free consecutive ports on {host} in {tries} tries")
