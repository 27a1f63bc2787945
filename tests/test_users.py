"""Users, ownership, quotas and the audit record: two users and an admin over real gRPC (a
controller on loopback, no agents: jobs stay queued), the users file and its command."""

from __future__ import annotations

import json
import sqlite3
import stat
import time
from pathlib import Path

import grpc
import pytest
import yaml
from cluster_helpers import controller, mlp_job

from mlsched.cli import get_args_parser, main
from mlsched.controller.tenancy import QuotaError, most_gpus
from mlsched.core.errors import SpecError
from mlsched.core.job import JobSpec
from mlsched.net.auth import ClientAuth, client_channel
from mlsched.net.users import Quota, User, add_user, load_users, parse_users, token_digest
from mlsched.v1 import jobs_pb2, jobs_pb2_grpc

OPERATOR = "operator-token"


def _stub(address: str, token: str) -> jobs_pb2_grpc.JobServiceStub:
    return jobs_pb2_grpc.JobServiceStub(client_channel(address, ClientAuth(token)))


def _code(call: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()  # type: ignore[operator]
    return info.value.code(), info.value.details() or ""


def _submit(stub: jobs_pb2_grpc.JobServiceStub, *jobs: dict) -> list[str]:
    request = jobs_pb2.SubmitJobsRequest(document=yaml.safe_dump(list(jobs)))
    return list(stub.SubmitJobs(request, timeout=10).job_ids)


def _ids(stub: jobs_pb2_grpc.JobServiceStub, user: str = "") -> list[str]:
    jobs = stub.ListJobs(jobs_pb2.ListJobsRequest(user=user), timeout=10).jobs
    return [j.job_id for j in jobs]


def test_two_users_and_an_admin_own_their_jobs_within_quotas_and_are_audited(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    users = tmp_path / "users.yaml"
    alice = add_user(users, "alice", quota=Quota(gpus=3, queued=2))
    bob = add_user(users, "bob")
    assert alice not in users.read_text() and token_digest(alice) in users.read_text()
    ctl = controller(tmp_path, token=OPERATOR, users_file=str(users))
    try:
        a, b, op = (_stub(ctl.address, t) for t in (alice, bob, OPERATOR))
        me = a.WhoAmI(jobs_pb2.WhoAmIRequest(), timeout=10)
        assert (me.user, me.role, me.quota_gpus, me.quota_queued) == ("alice", "user", 3, 2)
        assert op.WhoAmI(jobs_pb2.WhoAmIRequest(), timeout=10).role == "admin"
        code, _ = _code(lambda: _stub(ctl.address, "nobody's").WhoAmI(jobs_pb2.WhoAmIRequest()))
        assert code == grpc.StatusCode.UNAUTHENTICATED

        assert _submit(a, mlp_job("a1")) == ["a1"]  # may grow to 2 workers: 2 GPUs
        assert _submit(b, mlp_job("b1")) == ["b1"]
        assert _ids(a) == ["a1", "b1"]  # everyone sees the queue
        assert _ids(a, "alice") == ["a1"] and _ids(a, "bob") == ["b1"]
        owners = {j.job_id: j.owner for j in a.ListJobs(jobs_pb2.ListJobsRequest()).jobs}
        assert owners == {"a1": "alice", "b1": "bob"}

        # Another's job: neither cancelled nor its logs read; an unknown job is NOT_FOUND.
        code, why = _code(lambda: b.CancelJob(jobs_pb2.CancelJobRequest(job_id="a1")))
        assert code == grpc.StatusCode.PERMISSION_DENIED and "'alice'" in why
        code, _ = _code(lambda: b.GetTaskLog(jobs_pb2.GetTaskLogRequest(job_id="a1"), timeout=5))
        assert code == grpc.StatusCode.PERMISSION_DENIED
        code, _ = _code(lambda: a.GetTaskLog(jobs_pb2.GetTaskLogRequest(job_id="a1"), timeout=5))
        assert code == grpc.StatusCode.FAILED_PRECONDITION  # hers: no task has run yet
        code, _ = _code(lambda: b.CancelJob(jobs_pb2.CancelJobRequest(job_id="zz")))
        assert code == grpc.StatusCode.NOT_FOUND

        # Quotas, at intake, with the figures; nothing of a refused submission is stored.
        code, why = _code(lambda: _submit(a, mlp_job("a2")))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "quota.gpus" in why and "may hold 2" in why and "2 more" in why
        assert _submit(a, mlp_job("a2", max_workers=1)) == ["a2"]  # 2 + 1 <= 3
        code, why = _code(lambda: _submit(a, mlp_job("a3", max_workers=1)))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "quota.queued" in why
        assert "a3" not in _ids(op)
        code, _ = _code(lambda: _submit(b, mlp_job("bad", model="nope")))
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert _submit(b, mlp_job("b2"), mlp_job("b3")) == ["b2", "b3"]  # bob: no quota

        # The admin cancels anyone's job; the owner their own.
        assert op.CancelJob(jobs_pb2.CancelJobRequest(job_id="a1")).job.state == "cancelling"
        assert b.CancelJob(jobs_pb2.CancelJobRequest(job_id="b1")).job.state == "cancelling"

        rows = op.GetAudit(jobs_pb2.GetAuditRequest(), timeout=10).entries
        seen = [(e.user, e.action, e.job_id, e.outcome) for e in rows]
        assert seen == [
            ("alice", "submit", "a1", "ok"),
            ("bob", "submit", "b1", "ok"),
            ("bob", "cancel", "a1", "refused"),
            ("bob", "read the logs of", "a1", "refused"),
            ("alice", "submit", "", "refused"),
            ("alice", "submit", "a2", "ok"),
            ("alice", "submit", "", "refused"),
            ("bob", "submit", "", "refused"),
            ("bob", "submit", "b2", "ok"),
            ("bob", "submit", "b3", "ok"),
            ("admin", "cancel", "a1", "ok"),
            ("bob", "cancel", "b1", "ok"),
        ]
        assert "quota.gpus" in rows[4].detail and "jobs[0]" in rows[7].detail
        assert [e.job_id for e in op.GetAudit(jobs_pb2.GetAuditRequest(job_id="a1")).entries] \
            == ["a1"] * 4  # fmt: skip
        mine = b.GetAudit(jobs_pb2.GetAuditRequest(user="bob")).entries
        assert {e.user for e in mine} == {"bob"} and len(mine) == 7
        assert b.GetAudit(jobs_pb2.GetAuditRequest()).entries == mine  # a user: their own
        code, _ = _code(lambda: b.GetAudit(jobs_pb2.GetAuditRequest(user="alice")))
        assert code == grpc.StatusCode.PERMISSION_DENIED
        probe = jobs_pb2.StartProbeRequest(job=json.dumps(mlp_job("p")), placement="host")
        code, why = _code(lambda: a.StartProbe(probe, timeout=10))
        assert code == grpc.StatusCode.PERMISSION_DENIED and "admins" in why

        # The command line: status by user, whoami, audit.
        flags = ["--controller", ctl.address, "--token", alice]
        assert main(["status", "--user", "bob", *flags]) == 0
        out = capsys.readouterr().out
        assert "b2" in out and "a2" not in out and "bob" in out
        assert main(["whoami", *flags]) == 0
        assert "alice (user); quota: gpus 3, queued 2" in capsys.readouterr().out
        assert main(["cancel", "b2", *flags]) == 1
        assert "PERMISSION_DENIED" in capsys.readouterr().err
        assert main(["audit", "--user", "alice", *flags]) == 0
        rows_out = capsys.readouterr().out.splitlines()[1:]
        assert [r.split()[2:4] for r in rows_out] == [
            ["alice", "submit"], ["alice", "submit"], ["alice", "submit"], ["alice", "submit"],
            ["alice", "cancel"],  # b2, refused
        ]  # fmt: skip
        # A user added while the controller runs is known within a second or so.
        carol = add_user(users, "carol")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                _submit(_stub(ctl.address, carol), mlp_job("c1"))
                break
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.UNAUTHENTICATED
                time.sleep(0.2)
        assert _ids(op, "carol") == ["c1"]
    finally:
        ctl.stop()

    # Owners and the record outlive a restart; the record refuses to change or shrink.
    ctl = controller(tmp_path, token=OPERATOR, users_file=str(users))
    try:
        owners = {j.job_id: j.owner for j in ctl.jobs()}
        assert owners["a2"] == "alice" and owners["b3"] == "bob" and owners["c1"] == "carol"
        assert len(ctl.tenancy.audit(limit=1000)) == 14  # 12 above, b2's refusal, c1's submit
    finally:
        ctl.stop()
    db = sqlite3.connect(tmp_path / "state.db")
    for sql in ("UPDATE audit SET user = 'x'", "DELETE FROM audit"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            db.execute(sql)
    assert db.execute("SELECT COUNT(*) FROM audit").fetchone()[0] == 14
    db.close()


def test_without_a_users_file_the_one_token_is_everyone_with_every_right(tmp_path: Path) -> None:
    ctl = controller(tmp_path, token=OPERATOR)
    try:
        op = _stub(ctl.address, OPERATOR)
        _submit(op, mlp_job("j"))
        assert op.ListJobs(jobs_pb2.ListJobsRequest()).jobs[0].owner == "admin"
        assert op.CancelJob(jobs_pb2.CancelJobRequest(job_id="j")).job.state == "cancelling"
    finally:
        ctl.stop()


def test_most_gpus_counts_every_worker_a_job_may_grow_to() -> None:
    job = JobSpec.from_dict(mlp_job("x", max_workers=4, requested_workers=1))
    assert most_gpus(job) == 4
    typed = mlp_job("y", max_workers=2, worker_types={"big": {"gpu": 2, "cpu": 1}})
    assert most_gpus(JobSpec.from_dict(typed)) == 4  # its hungriest type


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"name": "../x", "token_sha256": "a" * 64}, "users[0].name"),
        ({"name": "admin", "token_sha256": "a" * 64}, "users[0].name"),
        ({"name": "x", "token_sha256": "zz"}, "users[0].token_sha256"),
        ({"name": "x", "token_sha256": "a" * 64, "role": "root"}, "users[0].role"),
        ({"name": "x", "token_sha256": "a" * 64, "quota": {"gpus": -1}}, "users[0].quota.gpus"),
        ({"name": "x", "token_sha256": "a" * 64, "quota": {"gpus": True}}, "users[0].quota.gpus"),
        ({"name": "x", "token_sha256": "a" * 64, "quota": {"cpu": 1}}, "users[0].quota.cpu"),
        ({"name": "x", "token_sha256": "a" * 64, "token": "t"}, "users[0].token"),
    ],
)
def test_a_bad_users_file_entry_is_named(entry: dict, field: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_users({"users": [entry]}, "users.yaml")
    assert info.value.field == field and "users.yaml" in str(info.value)


def test_names_and_tokens_are_each_one_users(tmp_path: Path) -> None:
    one = {"name": "x", "token_sha256": "a" * 64}
    with pytest.raises(SpecError, match=r"users\[1\]\.name"):
        parse_users({"users": [one, {**one, "token_sha256": "b" * 64}]}, "f")
    with pytest.raises(SpecError, match=r"users\[1\]\.token_sha256"):
        parse_users({"users": [one, {**one, "name": "y"}]}, "f")
    path = tmp_path / "users.yaml"
    add_user(path, "x")
    assert (
        stat.S_IMODE(path.stat().st_mode) == 0o644
    )  # no secret: a controller of another uid reads it
    with pytest.raises(SpecError, match="not in"):
        add_user(path, "x")
    path.chmod(path.stat().st_mode | stat.S_IWOTH)
    with pytest.raises(SpecError, match="only its owner can write"):
        load_users(path)


def test_a_new_token_never_starts_with_a_dash_so_the_command_line_takes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One urlsafe draw in 64 starts with ``-``, which argparse reads as an option after
    ``--token`` ("expected one argument"): such a draw is drawn again."""
    import mlsched.net.auth as auth

    draws = iter(["-leads-with-a-dash", "_fine-after-all"])
    monkeypatch.setattr(auth.secrets, "token_urlsafe", lambda n: next(draws))
    token = add_user(tmp_path / "users.yaml", "carol")
    assert token == "_fine-after-all"
    args = get_args_parser().parse_args(["status", "--token", token])
    assert args.token == token


def test_the_user_command_adds_lists_and_removes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "users.yaml"
    token_file = tmp_path / "alice.token"
    argv = ["user", "add", "alice", "--users-file", str(path), "--gpus", "8", "--queued", "20"]
    assert main([*argv, "--token-out", str(token_file)]) == 0
    assert token_file.stat().st_mode & 0o077 == 0
    token = token_file.read_text().strip()
    assert main(["user", "add", "ops", "--admin", "--users-file", str(path)]) == 0
    printed = capsys.readouterr().out
    assert "token (shown once)" in printed and token not in printed
    assert load_users(path).identify(token).name == "alice"  # type: ignore[union-attr]
    assert main(["user", "list", "--users-file", str(path)]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[1].split() == ["alice", "user", "8", "20"]
    assert listed[2].split() == ["ops", "admin", "-", "-"]
    assert main(["user", "remove", "alice", "--users-file", str(path)]) == 0
    assert load_users(path).identify(token) is None
    assert main(["user", "remove", "alice", "--users-file", str(path)]) == 2
    assert "field 'name'" in capsys.readouterr().err


def test_the_queued_quota_counts_every_waiting_state_and_no_running_job(tmp_path: Path) -> None:
    """The queued quota counts the jobs that wait for a place (pending, admitted, paused)
    and none that runs, on a controller's own record of owners. Plausible bugs: admitted or
    paused jobs escaping the count, running jobs counted as waiting."""
    users = tmp_path / "users.yaml"
    alice = add_user(users, "alice")
    ctl = controller(tmp_path, token=OPERATOR, users_file=str(users))
    try:
        assert _submit(_stub(ctl.address, alice), mlp_job("a1"), mlp_job("a2")) == ["a1", "a2"]
        user = User("alice", quota=Quota(queued=1))
        one, two = (JobSpec.from_dict(mlp_job(j)) for j in ("a1", "a2"))
        new = [JobSpec.from_dict(mlp_job("a3"))]
        for state in ("pending", "admitted", "paused"):
            with pytest.raises(QuotaError, match=r"quota\.queued.*1 wait"):
                ctl.tenancy.check_quota(user, new, [(one, state), (two, "running")])
        ctl.tenancy.check_quota(user, new, [(one, "running"), (two, "running")])
        # Another user's waiting jobs are not alice's.
        bob = User("bob", quota=Quota(queued=1))
        ctl.tenancy.check_quota(bob, new, [(one, "pending"), (two, "pending")])
    finally:
        ctl.stop()
