"""Trainer sockets listen on the agent's address only: the rendezvous store (which
``init_method=tcp://`` would serve on every interface) and Gloo's own sockets."""

from __future__ import annotations

import os
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import psutil
import pytest
from trainer_helpers import ENV, make_config, reap, wait_all, wait_for_iterations, with_port

from mlsched.agent.discovery import interface_of
from mlsched.trainers.launch import commands, free_port
from mlsched.trainers.rendezvous import rendezvous_store

pytestmark = pytest.mark.processes  # training processes: one such test at a time

BIG = 1_000_000


def _listening(pid: int) -> set[tuple[str, int]]:
    conns = psutil.Process(pid).net_connections(kind="tcp")
    return {(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN}


def test_the_store_listens_on_its_host_only() -> None:
    port = free_port()
    store = rendezvous_store(
        "127.0.0.1", port, world_size=1, is_master=True, timeout=timedelta(seconds=10)
    )
    store.set("k", "v")
    assert store.get("k") == b"v"
    assert ("127.0.0.1", port) in _listening(os.getpid())
    assert not any(p == port and ip != "127.0.0.1" for ip, p in _listening(os.getpid()))


def test_the_interface_of_an_address() -> None:
    assert interface_of("127.0.0.1") == "lo"
    assert interface_of("192.0.2.77") is None  # TEST-NET-1: no interface here holds it


def test_every_socket_of_a_running_ps_job_is_on_loopback(tmp_path: Path) -> None:
    cfg = with_port(
        make_config(tmp_path, "bind", arch="ps", mode="sync", num_workers=2, stop_step=BIG)
    )
    env = {**ENV, "GLOO_SOCKET_IFNAME": "lo"}  # what an agent with --host 127.0.0.1 sets
    started = [subprocess.Popen(cmd, env=env, start_new_session=True) for cmd in commands(cfg)]
    with reap(started) as procs:
        wait_for_iterations(cfg.metrics, 20, procs=procs)
        time.sleep(0.2)
        listening = {i: _listening(p.pid) for i, p in enumerate(procs)}
        for p in procs:
            p.terminate()
        wait_all(procs, 30)
    port = int(cfg.rendezvous.rpartition(":")[2])
    assert ("127.0.0.1", port) in listening[0]  # PS 0 serves the store
    everything = {ip for socks in listening.values() for ip, _ in socks}
    assert everything == {"127.0.0.1"}, listening
