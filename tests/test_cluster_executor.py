"""The cluster executor's generation logic, driven by the agents' protocol messages (no
processes: heartbeats are built the way agents build them)."""

from __future__ import annotations

from typing import Any

import pytest

from mlsched.controller import serde
from mlsched.controller.agents import AgentInfo, AgentRegistry
from mlsched.controller.cluster_executor import ClusterExecutor
from mlsched.controller.runs import TaskSettings
from mlsched.core.allocation import Allocation, Placement
from mlsched.core.job import JobSpec
from mlsched.perfmodel.base import NicThroughput
from mlsched.v1 import agent_pb2

DONE = agent_pb2.TASK_STATE_EXITED
RUNNING = agent_pb2.TASK_STATE_RUNNING


def _setup(
    n_agents: int = 2, **job: Any
) -> tuple[AgentRegistry, ClusterExecutor, JobSpec, list[float]]:
    reg = AgentRegistry(timeout_s=5.0)
    for i in range(n_agents):
        reg.register(AgentInfo(agent_id=f"a{i}", host="127.0.0.1", capacity={"gpu": 2}))
    clock = [1000.0]
    ex = ClusterExecutor(
        reg,
        slot_seconds=10.0,
        settings=TaskSettings(checkpoint_root="/ckpt"),
        clock=lambda: clock[0],
    )
    cluster = reg.cluster()
    assert cluster is not None
    ex.set_cluster(cluster)
    spec = JobSpec.from_dict(
        {"job_id": "j", "model": "mlp", "arch": "allreduce", "batches_per_chunk": 100,
         "max_workers": 2, "training": {"launcher": "direct"}, **job}
    )  # fmt: skip
    return reg, ex, spec, clock


def _beat(
    reg: AgentRegistry,
    agent: str,
    tasks: list[agent_pb2.TaskStatus],
    ex: ClusterExecutor | None = None,
) -> None:
    """A heartbeat, answered as the controller's handler answers it (with ``ex``)."""
    request = agent_pb2.HeartbeatRequest(agent_id=agent, tasks=tasks)
    assert reg.heartbeat(serde.heartbeat_from_proto(request)) is not None
    if ex is not None:
        ex.desired_for(agent)


def _status(task_id: str, state: int, *, last: int = -1, ckpt: int = -1, cursor: int = -1,
            code: int = 0, timed: int = 0, compute: float = 0.0) -> agent_pb2.TaskStatus:  # fmt: skip
    s = agent_pb2.TaskStatus(task_id=task_id, job_id="j", state=state, exit_code=code)
    m = s.measurement
    m.iterations, m.last_step = (last + 1 if last >= 0 else 0), last
    m.checkpoint_step, m.checkpoint_cursor = ckpt, cursor
    m.timed_iterations, m.compute_time_s, m.comm_time_s = timed, compute, compute / 2
    m.first_iteration_unix = m.last_iteration_unix = 1001.0
    return s


def test_relayout_waits_for_every_exit_even_when_reported_in_separate_heartbeats() -> None:
    reg, ex, spec, _ = _setup()
    one = Placement(((0, 2),))  # both ranks on a0
    ex.apply(0, Allocation(0, {"j": one}), {"j": spec}, {"j": 100.0})
    tasks = [t.task_id for t in ex.desired_for("a0")]
    assert tasks == ["j.g1.r0", "j.g1.r1"] and ex.desired_for("a1") == []
    assert ex.desired_for("a0")[0].config.stop_step == 50  # 100 mini-batches, 2 per step
    # Slot 1 moves one rank to a1: generation 1 drains (no longer desired anywhere).
    ex.apply(1, Allocation(1, {"j": Placement(((0, 1), (1, 1)))}), {"j": spec}, {"j": 60.0})
    assert ex.desired_for("a0") == []
    # The ranks exit in two heartbeats; each exit is reported once, then acknowledged.
    _beat(reg, "a0", [_status("j.g1.r0", DONE, last=19, ckpt=20, cursor=40),
                      _status("j.g1.r1", RUNNING, last=19)])  # fmt: skip
    assert ex.desired_for("a0") == []
    _beat(reg, "a0", [_status("j.g1.r1", DONE, last=19)])
    new = ex.desired_for("a0") + ex.desired_for("a1")
    assert sorted(t.task_id for t in new) == ["j.g2.r0", "j.g2.r1"]
    assert {t.config.stop_step for t in new} == {
        20 + 30
    }  # from the checkpoint: 60 left, 2 per step
    assert ex.jobs["j"].run.step == 20 and ex.jobs["j"].run.cursor == 40


def test_lost_agent_fails_the_generation_and_it_restarts_from_the_last_checkpoint() -> None:
    reg, ex, spec, _ = _setup()
    p = Placement(((1, 1),))
    ex.apply(0, Allocation(0, {"j": p}), {"j": spec}, {"j": 100.0})
    (task,) = ex.desired_for("a1")
    _beat(reg, "a1", [_status(task.task_id, RUNNING, last=30, timed=29, compute=2.9)], ex)
    agent = reg.get("a1")
    assert agent is not None
    agent.alive = False  # declared lost (what expire() does after the timeout)
    ex.reconcile()
    run = ex.jobs["j"].run
    assert run.gen is None and run.step == 0  # no checkpoint yet
    # Counted and its cost recorded, but a lost machine is not the job's crash.
    assert (run.failed_generations, run.lost_steps, run.failures) == (1, 31, 0)
    # Re-planned on the survivor: generation 2 starts from step 0 with the whole work.
    cluster = reg.cluster()
    assert cluster is not None
    ex.set_cluster(cluster)
    ex.apply(1, Allocation(1, {"j": Placement(((0, 1),))}), {"j": spec}, {"j": 100.0})
    (task2,) = ex.desired_for("a0")
    assert (
        task2.task_id == "j.g2.r0"
        and task2.config.stop_step == 100
        and task2.config.num_workers == 1
    )


def test_slot_report_turns_cumulative_counters_into_progress_and_measurements() -> None:
    reg, ex, spec, clock = _setup()
    p = Placement(((0, 2),))
    ex.apply(0, Allocation(0, {"j": p}), {"j": spec}, {"j": 100.0})
    _beat(reg, "a0", [_status("j.g1.r0", RUNNING, last=9, timed=8, compute=0.8),
                      _status("j.g1.r1", RUNNING, last=9, timed=8, compute=0.8)])  # fmt: skip
    clock[0] += 10.0
    report = ex.collect(0)
    prog = report.progress["j"]
    assert prog.units == 20 and not prog.finished  # 10 steps x 2 ranks
    (m,) = report.measurements
    assert m.iterations == 8 and abs(m.compute_time_s - 0.1) < 1e-9
    assert abs(m.comm_time_s - 0.05) < 1e-9 and m.placement == p
    # Next slot: only the difference counts.
    ex.apply(1, Allocation(1, {"j": p}), {"j": spec}, {"j": 80.0})
    _beat(reg, "a0", [_status("j.g1.r0", RUNNING, last=49, timed=48, compute=4.8),
                      _status("j.g1.r1", RUNNING, last=49, timed=48, compute=4.8)])  # fmt: skip
    clock[0] += 10.0
    report = ex.collect(1)
    assert report.progress["j"].units == 80 and report.progress["j"].finished
    assert report.measurements[0].iterations == 40


def test_measurements_carry_the_achieved_comm_and_nic_throughput() -> None:
    reg, ex, spec, clock = _setup()
    p = Placement(((0, 2),))

    def beat(agent: str, tasks: list[agent_pb2.TaskStatus], t: float, gb: float) -> None:
        net = agent_pb2.Telemetry(net_interface="eth0", sampled_unix=t)
        net.net_sent_bytes, net.net_recv_bytes = gb * 1e9, 2 * gb * 1e9
        req = agent_pb2.HeartbeatRequest(agent_id=agent, tasks=tasks, telemetry=net)
        assert reg.heartbeat(serde.heartbeat_from_proto(req)) is not None

    def ranks(last: int, timed: int) -> list[agent_pb2.TaskStatus]:
        out = []
        for r in (0, 1):  # 1 MB each way per iteration; comm 0.05 s per timed iteration
            s = _status(f"j.g1.r{r}", RUNNING, last=last, timed=timed, compute=0.1 * timed)
            s.measurement.bytes_sent = s.measurement.bytes_recv = 1e6 * (last + 1)
            out.append(s)
        return out

    ex.apply(0, Allocation(0, {"j": p}), {"j": spec}, {"j": 100.0})
    beat("a0", ranks(9, 8), 1000.0, 0.0)
    beat("a1", [], 1000.0, 0.0)
    clock[0] += 10.0
    (m,) = ex.collect(0).measurements
    # 2 MB per iteration in 0.05 s of communication: 0.32 Gbit/s (warm-up bytes counted
    # with their iterations, warm-up seconds left out with theirs).
    assert m.comm_gbps == pytest.approx(2e6 * 8 / 0.05 / 1e9)
    assert m.nic == {}  # a first reading: no interval yet
    ex.apply(1, Allocation(1, {"j": p}), {"j": spec}, {"j": 80.0})
    beat("a0", ranks(29, 28), 1010.0, 1.25)  # 1.25 GB sent, 2.5 GB received in 10 s
    beat("a1", [], 1010.0, 5.0)
    clock[0] += 10.0
    (m,) = ex.collect(1).measurements
    assert m.comm_gbps == pytest.approx(0.32)
    assert set(m.nic) == {"a0"}  # the job's host only
    assert m.nic["a0"] == pytest.approx(NicThroughput(sent_gbps=1.0, recv_gbps=2.0))


def test_a_crash_loop_ends_the_job_but_lost_machines_do_not() -> None:
    reg, ex, spec, _ = _setup(n_agents=1)
    for n in range(1, 4):  # three machines lost in a row, each after one checkpoint
        ex.apply(n, Allocation(n, {"j": Placement(((0, 1),))}), {"j": spec}, {"j": 100.0})
        (task,) = ex.desired_for("a0")
        _beat(reg, "a0", [_status(task.task_id, RUNNING, last=9 * n, ckpt=5 * n, cursor=5 * n)], ex)
        agent = reg.get("a0")
        assert agent is not None
        agent.alive = False
        ex.reconcile()
        agent.alive = True  # the machine comes back
    run = ex.jobs["j"].run
    assert not ex.jobs["j"].fatal and run.failed_generations == 3
    assert run.step == 15  # each lost generation's last reported checkpoint was kept
    for n in range(4, 7):  # the job's own process crashes three times in a row
        ex.apply(n, Allocation(n, {"j": Placement(((0, 1),))}), {"j": spec}, {"j": 85.0})
        (task,) = ex.desired_for("a0")
        _beat(reg, "a0", [_status(task.task_id, DONE, code=1)], ex)
    assert ex.jobs["j"].fatal.startswith("3 generations failed in a row")


def test_a_run_is_stored_when_it_changes_and_not_again_while_it_does_not() -> None:
    """Every slot boundary stores the jobs' runs; a run that did not change is not written
    again (at a thousand jobs these writes were the boundary's largest cost), but every
    change is, in one commit per chunk of jobs."""
    reg = AgentRegistry(timeout_s=5.0)
    reg.register(AgentInfo(agent_id="a0", host="127.0.0.1", capacity={"gpu": 2}))
    clock = [1000.0]
    writes: list[tuple[str, dict[str, Any] | None]] = []
    batches: list[int] = []

    class Batch:
        def __enter__(self) -> None:
            batches.append(len(writes))

        def __exit__(self, *exc: object) -> None:
            return None

    ex = ClusterExecutor(
        reg,
        slot_seconds=10.0,
        settings=TaskSettings(checkpoint_root="/ckpt"),
        clock=lambda: clock[0],
        on_change=lambda job_id, run: writes.append((job_id, run)),
        batch=Batch,
    )
    cluster = reg.cluster()
    assert cluster is not None
    ex.set_cluster(cluster)
    spec = JobSpec.from_dict(
        {"job_id": "j", "model": "mlp", "arch": "allreduce", "batches_per_chunk": 100,
         "max_workers": 2, "training": {"launcher": "direct"}}
    )  # fmt: skip
    p = Placement(((0, 2),))
    ex.apply(0, Allocation(0, {"j": p}), {"j": spec}, {"j": 100.0})
    launched = len(writes)
    assert launched >= 1 and writes[-1][1] is not None and writes[-1][1]["gen"]["number"] == 1
    _beat(reg, "a0", [_status("j.g1.r0", RUNNING, last=9), _status("j.g1.r1", RUNNING, last=9)])
    clock[0] += 10.0
    ex.collect(0)
    assert len(writes) == launched + 1  # progress reported: the run changed
    assert writes[-1][1] is not None and writes[-1][1]["reported_units"] == 20
    assert batches  # the report's writes went through the batch
    ex.apply(1, Allocation(1, {"j": p}), {"j": spec}, {"j": 80.0})
    clock[0] += 10.0
    ex.collect(1)  # nothing reported since: the same run, not written again
    assert len(writes) == launched + 1
    _beat(reg, "a0", [_status("j.g1.r0", RUNNING, last=19), _status("j.g1.r1", RUNNING, last=19)])
    ex.apply(2, Allocation(2, {"j": p}), {"j": spec}, {"j": 80.0})
    clock[0] += 10.0
    ex.collect(2)
    assert len(writes) == launched + 2 and writes[-1][1]["reported_units"] == 40  # type: ignore[index]
    # What was written is the run itself: it reads back as the executor holds it.
    assert writes[-1][1] == ex.jobs["j"].run.to_dict()


def test_views_are_the_single_job_answers_and_sweeps_cover_every_job() -> None:
    """Many jobs, more than one chunk of the lock: the bulk view agrees with the per-job
    calls, and one sweep launches every job that its allocation places."""
    reg = AgentRegistry(timeout_s=5.0)
    for i in range(4):
        reg.register(AgentInfo(agent_id=f"a{i}", host="127.0.0.1", capacity={"gpu": 40}))
    ex = ClusterExecutor(reg, slot_seconds=10.0, settings=TaskSettings(checkpoint_root="/c"))
    cluster = reg.cluster()
    assert cluster is not None
    ex.set_cluster(cluster)
    n = 3 * 25 + 7  # three full chunks and a part
    base = {"model": "mlp", "arch": "allreduce", "batches_per_chunk": 100, "max_workers": 1}
    specs = {
        f"j{k}": JobSpec.from_dict({"job_id": f"j{k}", **base, "training": {"launcher": "direct"}})
        for k in range(n)
    }
    alloc = {j: Placement(((k % 4, 1),)) for k, j in enumerate(specs)}
    ex.apply(0, Allocation(0, alloc), specs, {j: 100.0 for j in specs})
    launched = [j for j in specs if ex.jobs[j].run.gen is not None]
    assert launched == list(specs)
    views = ex.views([*specs, "nobody"])
    for j in specs:
        assert views[j] == (ex.live(j), ex.failures_of(j), ex.live_state(j))
        assert views[j].doing is not None and views[j].doing.layout == ex.jobs[j].want
    assert views["nobody"] == (None, None, None)


def test_start_up_is_reported_once_and_a_paused_restart_loses_its_stop_not_its_wait() -> None:
    """The first launch reports launch-to-first-iteration as start-up, once. A job paused
    for three slots and resumed loses its stop (drain to exit) and its relaunch (launch to
    first iteration), not the 30 s it waited: before, its restart read stop-to-first-
    iteration and counted the wait."""
    reg, ex, spec, clock = _setup()
    p = Placement(((0, 2),))
    ex.apply(0, Allocation(0, {"j": p}), {"j": spec}, {"j": 100.0})  # launched at 1000
    first = [_status(f"j.g1.r{r}", RUNNING, last=4, timed=4, compute=0.4) for r in (0, 1)]
    for s in first:
        s.measurement.first_iteration_unix = 1003.5 + 0.5 * int(s.task_id[-1])
    _beat(reg, "a0", first)
    clock[0] = 1010.0
    prog = ex.collect(0).progress["j"]
    assert (prog.startup_s, prog.restart_s) == (4.0, 0.0)  # the slower rank's first iteration
    ex.apply(1, Allocation(1, {"j": p}), {"j": spec}, {"j": 90.0})
    _beat(reg, "a0", [_status(f"j.g1.r{r}", RUNNING, last=9) for r in (0, 1)])
    clock[0] = 1020.0
    assert ex.collect(1).progress["j"].startup_s == 0.0  # once
    # Paused at 1020; its ranks have checkpointed and exited by 1022.
    ex.apply(2, Allocation(2, {}), {"j": spec}, {"j": 80.0})
    clock[0] = 1022.0
    _beat(reg, "a0", [_status(f"j.g1.r{r}", DONE, last=9, ckpt=10, cursor=20) for r in (0, 1)])
    ex.desired_for("a0")
    clock[0] = 1030.0
    ex.collect(2)
    for slot in (3, 4):
        ex.apply(slot, Allocation(slot, {}), {"j": spec}, {"j": 80.0})
        clock[0] += 10.0
        ex.collect(slot)
    assert clock[0] == 1050.0  # resumed after three slots idle
    ex.apply(5, Allocation(5, {"j": p}), {"j": spec}, {"j": 80.0})
    again = [_status(f"j.g2.r{r}", RUNNING, last=14, timed=4, compute=0.4) for r in (0, 1)]
    for s in again:
        s.measurement.first_iteration_unix = 1053.0
    _beat(reg, "a0", again)
    clock[0] = 1060.0
    prog = ex.collect(5).progress["j"]
    assert prog.restart_s == pytest.approx(2.0 + 3.0) and prog.startup_s == 0.0
