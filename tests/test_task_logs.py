"""``mlsched logs``: a task's log read through the agent that runs it, on a real controller
and a real agent process (loopback, ephemeral ports) training for real (the tests that share
one cluster, in this order); the agent's reader and the controller's broker on
their own, with their refusals and bounds."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from cluster_helpers import SMALL, agents, controller, kill_tree, mlp_job, stub, wait_for

from mlsched.agent.logs import answer, read_log
from mlsched.agent.task import MAX_TASK_ID_LEN
from mlsched.cli import main
from mlsched.controller.logs import LogBroker, LogError
from mlsched.controller.server import Controller
from mlsched.core import task_logs
from mlsched.core.task_logs import MAX_LOG_CHUNK, LogChunk, LogRequest
from mlsched.v1 import jobs_pb2

pytestmark = pytest.mark.processes  # training processes: one such test at a time


class Cluster:
    def __init__(self, ctl: Controller, tmp: Path, procs: list[subprocess.Popen[bytes]]) -> None:
        self.ctl, self.tmp, self.procs = ctl, tmp, procs

    @property
    def address(self) -> str:
        return self.ctl.address

    def fetch(self, job: str, task: str = "", offset: int = 0, max_bytes: int = 0) -> Any:
        request = jobs_pb2.GetTaskLogRequest(
            job_id=job, task_id=task, offset=offset, max_bytes=max_bytes
        )
        return stub(self.address).GetTaskLog(request, timeout=10)

    def log_file(self, task_id: str) -> bytes:
        return (self.tmp / "agent0" / task_id / "log.txt").read_bytes()


def _job(job_id: str, units: int, **training: Any) -> dict[str, Any]:
    # One process per rank (no torchrun in between): the quickest real launch.
    return mlp_job(job_id, units=units, training={**SMALL, "launcher": "direct", **training})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One controller, one agent, two jobs: ``short`` trains to its end, ``long`` (a checkpoint,
    and its log line, every 500 steps) keeps training until it is cancelled."""
    tmp = tmp_path_factory.mktemp("logs")
    ctl = controller(tmp, slot_seconds=2.0)
    try:
        with agents(ctl.address, tmp, 1) as procs:
            ctl.submit(
                yaml.safe_dump([_job("short", 20), _job("long", 10**6, checkpoint_every_steps=500)])
            )
            yield Cluster(ctl, tmp, procs)
    finally:
        ctl.stop(stop_tasks=True)


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err


def test_logs_print_the_task_log_and_offsets_advance(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    ctl = cluster.ctl
    wait_for(lambda: ctl.job("short").state == "done", 90, "job short to finish", every=0.3)
    # The job is done once its last step is measured; its process may still be writing its
    # last lines and exiting, and only the agent's next heartbeat says it has ended.
    wait_for(lambda: cluster.fetch("short").ended, 30, "short's task to be reported ended")
    first = cluster.fetch("short", max_bytes=100)
    task = first.task_id
    assert task == "short.g1.r0" and first.agent_id == "agent0" and list(first.task_ids) == [task]
    text = cluster.log_file(task)
    assert b"done at step" in text  # the trainer's own last words
    assert first.data == text[:100] and first.offset == 0 and first.next_offset == 100
    assert first.size == len(text) and first.ended and first.job_state == "done"
    # A second read from the returned offset gets only what follows.
    second = cluster.fetch("short", task, first.next_offset, 100)
    assert second.data == text[100:200] and second.next_offset == 200
    past = cluster.fetch("short", task, len(text) + 10)
    assert past.data == b"" and past.next_offset == len(text) + 10
    # The command prints the whole log (more than one 64 KiB chunk would take several).
    assert main(["logs", "short", "--controller", cluster.address]) == 0
    assert capsys.readouterr().out == text.decode()
    assert main(["logs", "short", "--tail", "2", "--controller", cluster.address]) == 0
    assert capsys.readouterr().out.splitlines() == text.decode().splitlines()[-2:]
    # --follow of an ended task of a finished job prints it and returns.
    assert main(["logs", "short", "-f", "--task", task, "--controller", cluster.address]) == 0
    assert capsys.readouterr().out == text.decode()


def test_a_running_task_log_grows_and_follow_ends_with_the_job(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    ctl = cluster.ctl
    wait_for(lambda: ctl.job("long").state == "running", 60, "job long to run", every=0.3)
    task = "long.g1.r0"
    path = cluster.tmp / "agent0" / task / "log.txt"
    wait_for(lambda: path.exists() and path.stat().st_size > 0, 60, "long's first log lines")
    one = cluster.fetch("long")
    assert one.task_id == task and not one.ended and one.job_state == "running"
    wait_for(lambda: path.stat().st_size > one.next_offset, 60, "more log lines")
    two = cluster.fetch("long", task, one.next_offset)
    assert two.offset == one.next_offset and two.data  # only what came after the first read
    assert path.read_bytes().startswith(one.data + two.data)
    # A follow keeps reading while the job runs and ends once it is cancelled.
    done: list[int] = []
    follower = threading.Thread(
        target=lambda: done.append(main(["logs", "long", "-f", "--controller", cluster.address]))
    )
    follower.start()
    printed: list[str] = []

    def following() -> bool:
        printed.append(capsys.readouterr().out)
        return bool("".join(printed))

    wait_for(following, 60, "the follower to print the log so far", every=0.2)
    ctl.cancel("long")  # (through the controller: the command would print to the same stdout)
    follower.join(timeout=60)
    assert done == [0]
    assert "".join(printed) + capsys.readouterr().out == cluster.log_file(task).decode()


def test_unknown_jobs_tasks_and_bad_fields_are_named(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    address = cluster.address
    assert main(["logs", "nope", "--controller", address]) == 2
    assert "NOT_FOUND" in (err := _err(capsys)) and "'nope'" in err
    assert main(["logs", "short", "--task", "short.g9.r0", "--controller", address]) == 2
    err = _err(capsys)
    assert "'short.g9.r0'" in err and "short.g1.r0" in err  # the job's tasks are listed
    assert main(["logs", "short", "--task", "../../etc/passwd", "--controller", address]) == 2
    assert "INVALID_ARGUMENT" in (err := _err(capsys)) and "task_id" in err
    for fields in ({"offset": -1}, {"max_bytes": MAX_LOG_CHUNK + 1}, {"max_bytes": -5}):
        with pytest.raises(grpc.RpcError) as info:
            cluster.fetch("short", **fields)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert next(iter(fields)) in info.value.details()
    # A job with no task yet: nothing to read, and the job named.
    cluster.ctl.submit(yaml.safe_dump([mlp_job("huge", worker={"gpu": 8})]))
    assert main(["logs", "huge", "--controller", address]) == 1
    assert "FAILED_PRECONDITION" in (err := _err(capsys)) and "'huge'" in err


def test_the_agent_reads_only_the_logs_of_its_own_tasks(cluster: Cluster) -> None:
    """Whatever a request names, the real agent answers from its own task table: a file at
    the very path it would use for a task it never ran stays unread."""
    planted = cluster.tmp / "agent0" / "planted.g1.r0"
    planted.mkdir(parents=True, exist_ok=True)
    (planted / "log.txt").write_text("not a log of this agent's tasks\n")
    assert cluster.ctl.endpoint is not None
    broker = cluster.ctl.endpoint.logs.broker
    for task_id in ("planted.g1.r0", "../../etc/passwd", "/etc/passwd", "short.g1.r0/../x"):
        chunk = broker.ask(
            "agent0", task_id, 0, 1000, wait_s=10, lost=lambda: False, what=repr(task_id)
        )
        assert chunk.error and chunk.data == b"", task_id
    refused = broker.ask(
        "agent0", "short.g1.r0", -1, 10**9, wait_s=10, lost=lambda: False, what="short"
    )
    assert "invalid log request" in refused.error and refused.data == b""


def test_a_lost_agent_is_named(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    kill_tree(cluster.procs[0].pid)  # the machine goes down
    wait_for(lambda: not cluster.ctl.agents.alive(), 30, "the agent to be declared lost")
    assert main(["logs", "short", "--controller", cluster.address]) == 1
    err = _err(capsys)
    assert "UNAVAILABLE" in err and "'agent0'" in err and "'short'" in err


# The agent's reader and the controller's broker, on their own -------------------------------
def _lookup(files: dict[str, Path]) -> Any:
    return lambda task_id: (files[task_id], False) if task_id in files else None


def test_the_agent_reader_refuses_links_fifos_ranges_and_strangers(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("do not read\n")
    log = tmp_path / "t1" / "log.txt"
    log.parent.mkdir()
    log.write_bytes(b"x" * (3 * MAX_LOG_CHUNK))
    files = {"t1": log}
    asked = [
        LogRequest(1, "t1", 0, 0),  # 0: the largest chunk
        LogRequest(2, "t1", 10, 5),
        LogRequest(3, "t2", 0, 10),  # not this agent's task
        LogRequest(4, "../secret", 0, 10),
        LogRequest(5, "t1", -1, 10),
        LogRequest(6, "t1", 0, MAX_LOG_CHUNK + 1),
    ]
    got = answer(asked, _lookup(files))
    assert [len(c.data) for c in got] == [MAX_LOG_CHUNK, 5, 0, 0, 0, 0]
    assert got[0].size == 3 * MAX_LOG_CHUNK and got[1].offset == 10
    assert all(c.error for c in got[2:]) and not any(c.error for c in got[:2])
    # The log replaced by a link (to anything) or a FIFO: refused, nothing read, no hang.
    log.unlink()
    log.symlink_to(secret)
    (refused,) = answer([LogRequest(7, "t1", 0, 100)], _lookup(files))
    assert refused.error and refused.data == b""
    log.unlink()
    os.mkfifo(log)
    (refused,) = answer([LogRequest(8, "t1", 0, 100)], _lookup(files))
    assert refused.error and refused.data == b""
    with pytest.raises(OSError):
        read_log(log, 0, 10)
    # At most 8 answers per heartbeat, however many requests.
    assert len(answer([LogRequest(i, "t2", 0, 1) for i in range(50)], _lookup(files))) == 8
    assert task_logs.MAX_TASK_ID_LEN == MAX_TASK_ID_LEN  # both sides bound task ids alike


def test_the_broker_times_out_names_lost_agents_and_ignores_strangers() -> None:
    broker = LogBroker(max_pending=2, max_waiting=3)
    with pytest.raises(LogError) as info:
        broker.ask("a", "t", 0, 10, wait_s=0.3, lost=lambda: False, what="task 't' of job 'j'")
    assert info.value.kind == "timeout" and "'a'" in str(info.value) and "'j'" in str(info.value)
    with pytest.raises(LogError) as info:
        broker.ask("a", "t", 0, 10, wait_s=5, lost=lambda: True, what="task 't'")
    assert info.value.kind == "lost"
    assert broker.requests_for("a") == []  # nothing left behind

    results: list[LogChunk | LogError] = []

    def ask() -> None:
        try:
            results.append(broker.ask("a", "t", 0, 10, wait_s=5, lost=lambda: False, what="t"))
        except LogError as err:
            results.append(err)

    thread = threading.Thread(target=ask)
    thread.start()
    wait_for(lambda: bool(broker.requests_for("a")), 5, "the request")
    (request,) = broker.requests_for("a")
    # Another agent's answer, and an answer larger than asked for, do not settle it as data.
    broker.deliver("b", [LogChunk(request.request_id, "t", 0, b"forged")])
    assert broker.requests_for("a") == [request]
    broker.deliver("a", [LogChunk(request.request_id, "t", 0, b"x" * 11)])
    thread.join(timeout=5)
    (chunk,) = results
    assert isinstance(chunk, LogChunk) and chunk.error and chunk.data == b""
