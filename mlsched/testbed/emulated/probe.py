"""Measure an emulated link: TCP throughput and round-trip time between two hosts.

``python -m mlsched.testbed.emulated.probe serve ADDR`` (inside the receiving host's namespace)
listens on ADDR, prints its port, serves one connection and prints what it measured as
JSON: a ``T`` connection is received until EOF and timed from its first byte to its last
(throughput), an ``E`` connection is echoed byte for byte (the sender times round trips).
``... send ADDR PORT SECONDS`` and ``... ping ADDR PORT COUNT`` are the other ends.

Standard library only, so the probe starts in tens of milliseconds in any namespace.
"""

from __future__ import annotations

import json
import socket
import statistics
import sys
import time

__all__ = ["main", "ping", "send", "serve"]

_CHUNK = 1 << 20
_ACCEPT_TIMEOUT_S = 30.0


def serve(addr: str) -> dict[str, float]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as lsock:
        lsock.bind((addr, 0))
        lsock.listen(1)
        lsock.settimeout(_ACCEPT_TIMEOUT_S)
        print(lsock.getsockname()[1], flush=True)
        conn, _ = lsock.accept()
    with conn:
        conn.settimeout(_ACCEPT_TIMEOUT_S)
        mode = conn.recv(1)
        if mode == b"E":
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            echoed = 0
            while data := conn.recv(64):
                conn.sendall(data)
                echoed += len(data)
            return {"echoed_bytes": float(echoed)}
        received, first, last = 0, 0.0, 0.0
        while data := conn.recv(_CHUNK):
            now = time.perf_counter()
            if not received:
                first = now
            received += len(data)
            last = now
        seconds = last - first
        gbps = received * 8 / seconds / 1e9 if seconds > 0 else 0.0
        return {"bytes": float(received), "seconds": seconds, "gbps": gbps}


def send(addr: str, port: int, seconds: float) -> dict[str, float]:
    buf = b"\0" * _CHUNK
    sent = 0
    with socket.create_connection((addr, port), timeout=_ACCEPT_TIMEOUT_S) as sock:
        sock.sendall(b"T")
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            sock.sendall(buf)
            sent += len(buf)
    return {"bytes": float(sent)}


def ping(addr: str, port: int, count: int) -> dict[str, float]:
    """Median and minimum round trip of one byte, in milliseconds."""
    rtts: list[float] = []
    with socket.create_connection((addr, port), timeout=_ACCEPT_TIMEOUT_S) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(b"E")
        for _ in range(count):
            t0 = time.perf_counter()
            sock.sendall(b"x")
            if not sock.recv(1):
                break
            rtts.append((time.perf_counter() - t0) * 1e3)
    if not rtts:
        return {"count": 0.0}
    return {"count": float(len(rtts)), "median_ms": statistics.median(rtts), "min_ms": min(rtts)}


def main(argv: list[str]) -> int:
    usage = "usage: probe serve ADDR | send ADDR PORT SECONDS | ping ADDR PORT COUNT"
    try:
        if argv[0] == "serve" and len(argv) == 2:
            result = serve(argv[1])
        elif argv[0] == "send" and len(argv) == 4:
            result = send(argv[1], int(argv[2]), float(argv[3]))
        elif argv[0] == "ping" and len(argv) == 4:
            result = ping(argv[1], int(argv[2]), int(argv[3]))
        else:
            print(usage, file=sys.stderr)
            return 2
    except (IndexError, ValueError):
        print(usage, file=sys.stderr)
        return 2
    except OSError as err:
        print(f"probe: {err}", file=sys.stderr)
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
