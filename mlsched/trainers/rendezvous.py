"""The process group's rendezvous store, listening on one address only.

``init_process_group(init_method="tcp://host:port")`` makes rank 0 start a TCPStore that
listens on every interface, unauthenticated: anyone who can reach the machine could write
keys into a job's rendezvous. Here the store's rank binds its own socket to ``host`` (the
address its agent was told to use) and hands it to the TCPStore (``master_listen_fd``), so
the store is reachable exactly where the job's peers expect it and nowhere else. Gloo's own
sockets follow ``GLOO_SOCKET_IFNAME``, which agents set to the interface of that address.
"""

from __future__ import annotations

import socket
from datetime import timedelta

import torch.distributed as dist

__all__ = ["bound_socket", "rendezvous_store"]

# The listening socket must outlive the store's use of its descriptor.
_KEEP: list[socket.socket] = []


def bound_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (the first address ``host`` resolves to)."""
    family, kind, proto, _, addr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICSERV
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    return sock


def rendezvous_store(
    host: str, port: int, *, world_size: int, is_master: bool, timeout: timedelta
) -> dist.TCPStore:
    """The job's store: served on ``host:port`` only by the master, joined by the others."""
    if not is_master:
        return dist.TCPStore(host, port, world_size, False, timeout=timeout)
    sock = bound_socket(host, port)
    _KEEP.append(sock)
    return dist.TCPStore(
        host, port, world_size, True, timeout=timeout, master_listen_fd=sock.fileno()
    )
