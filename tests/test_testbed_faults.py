"""The testbed under faults, with real processes: a job re-laid-out between slots resumes
from its checkpoint; a machine going down mid-slot; the controller killed and restarted."""

from __future__ import annotations

import signal
import subprocess
from abc import abstractmethod
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from cluster_helpers import (
    agents,
    controller,
    controller_process,
    finished,
    free_port,
    job_status,
    kill_tree,
    metrics,
    mlp_job,
    slow,
    stub,
    wait_for,
)

from mlsched.controller.store import Store
from mlsched.core.allocation import Admission, Allocation, Placement
from mlsched.core.job import JobSpec
from mlsched.scheduler.policy import Policy
from mlsched.scheduler.registry import register
from mlsched.scheduler.view import ClusterView
from mlsched.trainers.allreduce.horovod import horovod_available
from mlsched.trainers.launch import flag_value, is_trainer
from mlsched.v1 import jobs_pb2

pytestmark = [pytest.mark.processes, pytest.mark.slow]

# Checkpoints only where a generation stops: the tests below follow each generation's one
# checkpoint (periodic ones have tests of their own: test_trainers_periodic, the chaos test).
SLOW = slow()


class _TwoPhase(Policy):
    """Admits everything; a job runs ``first`` until it has made progress, then ``then``.

    Switching on progress rather than on a slot number keeps the test deterministic
    whatever the trainers' start-up time: the first generation has always trained (and so
    checkpoints a step > 0) when its layout changes.
    """

    def on_arrival(self, job: JobSpec, view: ClusterView) -> Admission:
        return Admission.admit(reason="test policy")

    def allocate(self, slot: int, view: ClusterView) -> Allocation:
        n = len(view.cluster)
        return Allocation(
            slot,
            {j: self.then(n) if view[j].progress > 0 else self.first(n) for j in view},
        )

    def first(self, n: int) -> Placement:
        return Placement(((0, 1),))

    @abstractmethod
    def then(self, n: int) -> Placement:
        """The layout once the job has made progress, on a cluster of ``n`` servers."""


@register
class _Spread(_TwoPhase):
    name = "test-relayout"
    description = "test: one worker on server 0, then one worker on each of two servers"

    def then(self, n: int) -> Placement:
        return Placement(((0, 1), (1, 1)))


@register
class _Move(_TwoPhase):
    name = "test-move"
    description = "test: one worker on server 0, then one on server 1 (0 if it is alone)"

    def then(self, n: int) -> Placement:
        return Placement(((1 % n, 1),))


def _events(records: list[dict[str, Any]], event: str) -> list[int]:
    return [r["step"] for r in records if r.get("type") == "event" and r.get("event") == event]


def _iters(records: list[dict[str, Any]]) -> list[int]:
    return [r["step"] for r in records if r.get("type") == "iter"]


def _checkpoints(records: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [
        (r["step"], r["data_cursor"])
        for r in records
        if r.get("type") == "event" and r.get("event") == "checkpoint"
    ]


LAUNCHES = [
    # A rank per process re-lays out as torchrun does (make test keeps torchrun): make soak.
    pytest.param({"launcher": "direct"}, "r", id="direct", marks=pytest.mark.soak),
    pytest.param({"launcher": "torchrun"}, "n", id="torchrun"),
    pytest.param(
        {"backend": "horovod"},
        "n",
        id="horovod",
        marks=[
            pytest.mark.skipif(
                not horovod_available(), reason="Horovod is not installed (`make horovod`)"
            ),
            # The same generation logic as torchrun's, through Horovod: make soak (CI).
            pytest.mark.soak,
        ],
    ),
]


@pytest.mark.parametrize(("launch", "tag"), LAUNCHES)
def test_relayout_between_slots_resumes_from_the_checkpoint(
    tmp_path: Path, launch: dict[str, str], tag: str
) -> None:
    """One rank, then one on each of two agents: the same for a rank per process (direct),
    a torchrun per node and Horovod's ranks per node (one rank per node here, so the task
    ids differ only in their tag). Over 20 s: two generations of real training on two agent
    processes; the re-layout through agents (stop, checkpoint, relaunch on another world
    size) has no faster test (the trainers' resume tests start no agent)."""
    ctl = controller(tmp_path, min_agents=2, slot_seconds=2.0, policy="test-relayout")
    total = 1200
    job = mlp_job("grow", units=total, **slow(**launch))
    try:
        with agents(ctl.address, tmp_path, 2):
            ctl.submit(yaml.safe_dump([job]))
            status = finished(ctl.address, "grow", 90, "the job to finish")
            assert status.state == "done", (status.state, status.reason)
            assert status.progress == status.total_work == total
            assert status.restarts >= 1
            # Generation 1: one rank, stopped by the re-layout at a checkpoint mid-way.
            (g1,) = metrics(tmp_path, f"grow.g1.{tag}0")
            assert _events(g1, "start") == [0]
            ((step1, cursor1),) = _checkpoints(g1)
            assert 0 < step1 < total
            assert cursor1 == step1  # one worker: one mini-batch per step
            assert _iters(g1)[-1] == step1 - 1
            # Generation 2: two ranks on two agents, both from that checkpoint.
            g2 = metrics(tmp_path, f"grow.g2.{tag}0") + metrics(tmp_path, f"grow.g2.{tag}1")
            assert len(g2) == 2
            for records in g2:
                assert _events(records, "start") == [step1]
                assert _iters(records)[0] == step1
            # Rank 0 checkpoints the end; the data cursor continued from cursor1, two
            # mini-batches a step, to the job's total.
            ((step2, cursor2),) = _checkpoints(g2[0])
            assert cursor2 == cursor1 + 2 * (step2 - step1)
            assert total <= cursor2 <= total + 1
            assert metrics(tmp_path, f"grow.g3.{tag}0") == []  # no other relaunch
            # The store saw the relaunch cost and both layouts.
            rows = ctl.store.progress("grow")
            assert any(r["restart_s"] > 0 for r in rows), rows
            assert rows[-1]["finished"]
            layouts = {len(a["placement"]["layout"]) for a in ctl.store.allocations(job_id="grow")}
            assert layouts == {1, 2}
    finally:
        ctl.stop()


@pytest.mark.soak  # about 40 s a launcher; make soak (CI). make test keeps the re-layout
@pytest.mark.parametrize(("launch", "tag"), LAUNCHES[1:])
def test_a_lost_rank_fails_its_generation_and_the_job_resumes(
    tmp_path: Path, launch: dict[str, str], tag: str
) -> None:
    """A rank of a job spread over two nodes is killed: its launcher (torchrun, the Horovod
    node launcher) exits with an error, the other node's rank loses its peer, the generation
    fails, and the next one resumes from the last checkpoint and finishes the job."""
    ctl = controller(tmp_path, min_agents=2, slot_seconds=2.0, policy="test-relayout")
    # As in the re-layout test: generation 2 needs seconds to finish this, and the rank is
    # killed at its first step.
    total = 1200
    job = mlp_job("grow", units=total, **slow(checkpoint_every_s=0.5, **launch))
    try:
        with agents(ctl.address, tmp_path, 2):
            ctl.submit(yaml.safe_dump([job]))
            wait_for(
                lambda: any(_iters(r) for r in metrics(tmp_path, f"grow.g2.{tag}1")),
                90,
                "the two-node generation to train",
            )
            (victim,) = [
                p
                for p in psutil.process_iter(["cmdline"])
                if is_trainer(cmd := p.info["cmdline"] or [])
                and f"grow.g2.{tag}1" in (flag_value(cmd, "--metrics") or "")
            ]
            victim.kill()
            status = finished(ctl.address, "grow", 120, "the job to finish")
            assert status.state == "done", (status.state, status.reason)
            assert status.progress == status.total_work == total
            assert status.failed_generations >= 1
            # Both nodes' launchers of the failed generation exited with an error, and a
            # later generation started from a checkpoint the failed one wrote.
            g3 = metrics(tmp_path, f"grow.g3.{tag}0")
            assert g3 and _events(g3[0], "start")[0] > 0
    finally:
        ctl.stop()


@pytest.mark.soak  # about 40 s; make soak (CI). make test keeps the agent-loss status test
def test_agent_lost_mid_slot_job_resumes_on_the_survivor(tmp_path: Path) -> None:
    ctl = controller(tmp_path, min_agents=2, slot_seconds=2.0, policy="test-move")
    total = 1200
    try:
        with agents(ctl.address, tmp_path, 2) as procs:
            ctl.submit(yaml.safe_dump([mlp_job("hop", units=total, **SLOW)]))
            # Generation 1 trains and is moved (checkpointing); generation 2 trains on the
            # other agent: that machine goes down.
            wait_for(
                lambda: any(_iters(r) for r in metrics(tmp_path, "hop.g2.n0")),
                60,
                "generation 2 to train",
                every=0.2,
            )
            (victim,) = [p.parent.name for p in tmp_path.glob("agent*/hop.g2.n0")]
            (survivor,) = {"agent0", "agent1"} - {victim}
            status = job_status(ctl.address, "hop")
            assert status.state == "running"
            assert [(p.agent_id, p.workers) for p in status.placement] == [(victim, 1)]
            kill_tree(procs[int(victim.removeprefix("agent"))].pid, signal.SIGKILL)

            def alive(agent_id: str) -> bool:
                status = stub(ctl.address).GetClusterStatus(
                    jobs_pb2.GetClusterStatusRequest(), timeout=5
                )
                return next(a.alive for a in status.agents if a.agent_id == agent_id)

            wait_for(lambda: not alive(victim), 20, f"{victim} to be declared lost")
            assert alive(survivor)
            status = finished(ctl.address, "hop", 60, "the job to finish on the survivor")
            assert status.state == "done", (status.state, status.reason)
            assert status.progress == status.total_work == total
            # Generation 2 died without a checkpoint: generation 3, on the survivor,
            # resumed from generation 1's.
            (g1,) = metrics(tmp_path, "hop.g1.n0")
            ((step1, _),) = _checkpoints(g1)
            assert step1 > 0
            (g2,) = metrics(tmp_path, "hop.g2.n0")
            assert _checkpoints(g2) == []
            assert not (tmp_path / survivor / "hop.g2.n0").exists()
            assert (tmp_path / survivor / "hop.g3.n0").exists()
            (g3,) = metrics(tmp_path, "hop.g3.n0")
            assert _events(g3, "start") == [step1]
            ((_, cursor3),) = _checkpoints(g3)
            assert cursor3 == total
    finally:
        ctl.stop()


@pytest.mark.soak  # 40 s; the chaos soak kills the controller too (make soak, CI)
def test_controller_killed_and_restarted_loses_no_admitted_job(tmp_path: Path) -> None:
    port = free_port()
    address = f"127.0.0.1:{port}"
    db = tmp_path / "state.db"
    ids = ["a", "b", "c"]
    total = 1500

    def start(n: int) -> subprocess.Popen[bytes]:
        log = tmp_path / f"controller{n}.log"
        return controller_process(tmp_path, port, log, slot_seconds=3.0, min_agents=2)

    first = start(1)
    second: subprocess.Popen[bytes] | None = None
    try:
        wait_for(lambda: _serving(address), 30, "the controller to serve")
        with agents(address, tmp_path, 2):
            document = yaml.safe_dump([mlp_job(j, units=total, **SLOW) for j in ids])
            resp = stub(address).SubmitJobs(
                jobs_pb2.SubmitJobsRequest(document=document), timeout=5
            )
            assert list(resp.job_ids) == ids
            # Killed once a slot in which jobs trained has been recorded (admissions,
            # progress, measured iterations) and the jobs train on.
            wait_for(
                lambda: any(j.iterations > 0 for j in _jobs(address)),
                60,
                "a job to train",
                every=0.5,
            )
            before = {j.job_id: j for j in _jobs(address)}
            kill_tree(first.pid, signal.SIGKILL)
            first.wait(timeout=10)
            with Store(str(db)) as store:
                assert [r["job_id"] for r in store.jobs()] == ids
                decided = store.decisions()
            assert sorted(d["job_id"] for d in decided) == ids
            assert all(d["admitted"] for d in decided)

            second = start(2)
            wait_for(lambda: _serving(address), 30, "the restarted controller to serve")
            assert sorted(j.job_id for j in _jobs(address)) == ids
            wait_for(
                lambda: all(j.state in ("done", "failed", "cancelled") for j in _jobs(address)),
                120,
                "every job to finish",
                every=0.5,
            )
            after = {j.job_id: j for j in _jobs(address)}
            assert sorted(after) == ids  # none lost, none duplicated
            for job_id, j in after.items():
                assert j.state == "done", (job_id, j.state, j.reason)
                assert j.progress == j.total_work
                assert 0 < j.iterations <= total  # an adopted process is not counted twice
            # The processes running at the kill were adopted, not restarted.
            running = [j for j, s in before.items() if s.state == "running"]
            assert running
            for job_id in running:
                assert metrics(tmp_path, f"{job_id}.g2.n0") == [], job_id
                (records,) = metrics(tmp_path, f"{job_id}.g1.n0")
                assert _checkpoints(records)[-1][1] == total
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                kill_tree(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
    with Store(str(db)) as store:
        assert [r["job_id"] for r in store.jobs()] == ids
        assert all(r["status"] == "done" for r in store.jobs())
        assert store.decisions() == decided  # the admissions stand, none taken again


def _serving(address: str) -> bool:
    try:
        stub(address).ListJobs(jobs_pb2.ListJobsRequest(), timeout=1)
    except Exception:
        return False
    return True


def _jobs(address: str) -> list[jobs_pb2.JobStatus]:
    return list(stub(address).ListJobs(jobs_pb2.ListJobsRequest(), timeout=5).jobs)


def test_agent_loss_is_noticed_within_the_slot_and_status_tells_the_truth(
    tmp_path: Path,
) -> None:
    """Slots are long (20 s); the agent timeout is 4 s with 0.3-s heartbeats. A lost agent
    is declared lost by the heartbeat watcher inside the slot, not at the slot boundary;
    its job reads ``re-placing`` meanwhile, ``running`` again on the survivor after the
    boundary, with the failure and the steps it lost counted. Over 20 s: it must wait out
    a slot; noticing a loss inside a slot cannot be shown in a shorter one than the
    detection takes."""
    ctl = controller(tmp_path, min_agents=2, slot_seconds=20.0)
    try:
        with agents(ctl.address, tmp_path, 2) as procs:
            ctl.submit(yaml.safe_dump([mlp_job("long", units=10**6, **SLOW)]))
            wait_for(
                lambda: any(_iters(r) for r in metrics(tmp_path, "long.g1.n0")),
                30,
                "generation 1 to train",
            )
            # Still the first slot of the job: it runs, and says so.
            wait_for(
                lambda: job_status(ctl.address, "long").iterations > 0,
                10,
                "the controller to hear of the trained steps",
            )
            status = job_status(ctl.address, "long")
            assert status.state == "running", (status.state, status.reason)
            assert ctl.engine is not None and ctl.engine.slot <= 1
            (victim,) = [p.parent.name for p in tmp_path.glob("agent*/long.g1.n0")]
            (survivor,) = {"agent0", "agent1"} - {victim}
            kill_tree(procs[int(victim.removeprefix("agent"))].pid, signal.SIGKILL)
            slot_then = ctl.engine.slot

            def alive(agent_id: str) -> bool:
                agents_now = (
                    stub(ctl.address)
                    .GetClusterStatus(jobs_pb2.GetClusterStatusRequest(), timeout=5)
                    .agents
                )
                return next(a.alive for a in agents_now if a.agent_id == agent_id)

            wait_for(lambda: not alive(victim), 30, f"{victim} to be declared lost", every=0.05)
            # Noticed inside the slot (by the heartbeat watcher), not at the slot's end; how
            # fast is benchmarks/failure_cost.py's figure.
            assert ctl.engine.slot == slot_then
            wait_for(
                lambda: job_status(ctl.address, "long").state == "re-placing",
                15,
                "the job to read re-placing",
                every=0.05,
            )
            assert victim in job_status(ctl.address, "long").reason
            # Re-placed on the survivor at the next boundary (from step 0: no checkpoint).
            wait_for(
                lambda: any(_iters(r) for r in metrics(tmp_path, "long.g2.n0")),
                40,
                "generation 2 to train on the survivor",
            )
            assert (tmp_path / survivor / "long.g2.n0").exists()
            status = job_status(ctl.address, "long")
            assert status.state == "running"
            assert [p.agent_id for p in status.placement] == [survivor]
            assert status.failed_generations == 1
            assert status.lost_steps > 0
            ctl.cancel("long")
    finally:
        ctl.stop(stop_tasks=True)
