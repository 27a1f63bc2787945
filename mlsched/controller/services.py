"""The controller's gRPC endpoint: thin translations between messages and the controller.

``AgentService`` (agents register and heartbeat; an agent credential speaks only for its
own agent id) and ``JobService`` (users submit, query and cancel, and read task logs through
the agents' heartbeats: ``logs.py``), behind the token interceptor and TLS, with
``grpc.health.v1``. Messages are converted by ``serde.py``; the controller sees plain data.
Errors become gRPC statuses with bounded details: a hostile id or document never makes a
large reply.
"""

from __future__ import annotations

import json
from concurrent import futures
from typing import TYPE_CHECKING

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from mlsched.controller import serde
from mlsched.controller.describe import describe_job
from mlsched.controller.logs import LogError, TaskLogs
from mlsched.controller.probes import ProbeBusy
from mlsched.controller.tenancy import QuotaError
from mlsched.core.errors import MlschedError, SpecError, shorten
from mlsched.core.ids import check_id
from mlsched.net.auth import TokenInterceptor, agent_of, server_credentials
from mlsched.net.task_wire import task_to_proto
from mlsched.net.users import User, UsersFile, user_of
from mlsched.v1 import agent_pb2, agent_pb2_grpc, jobs_pb2, jobs_pb2_grpc

if TYPE_CHECKING:
    from mlsched.controller.facade import ControllerFacade

__all__ = ["Endpoint", "add_services"]


class Endpoint:
    """The controller's services, listening on its configured address until :meth:`stop`."""

    def __init__(self, ctl: ControllerFacade) -> None:
        cfg = ctl.cfg
        users = UsersFile(cfg.users_file) if cfg.users_file is not None else None
        known = None if users is None else (lambda t: users.current().identify(t) is not None)
        interceptors = [TokenInterceptor(cfg.token, cfg.agent_secret, known)] if cfg.token else []
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=32), interceptors=interceptors)
        self.logs = add_services(ctl, server, users)
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        creds = server_credentials(cfg.tls_cert, cfg.tls_key, cfg.tls_ca)
        if creds is not None:
            self.port = server.add_secure_port(cfg.listen, creds)
        else:
            self.port = server.add_insecure_port(cfg.listen)
        if not self.port:
            raise SpecError("listen", cfg.listen, "an address this host can listen on")
        server.start()
        self.server = server
        for name in ("", "mlsched.v1.AgentService", "mlsched.v1.JobService"):
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)

    def stop(self, grace: float = 1.0) -> None:
        self.health.enter_graceful_shutdown()
        self.server.stop(grace=grace).wait()


def add_services(
    ctl: ControllerFacade, server: grpc.Server, users: UsersFile | None = None
) -> TaskLogs:
    """Serve the agent and job services of ``ctl`` on ``server`` (``users``: who a user
    token is); their log reads (shared: clients' requests wait for the agents' heartbeats)."""
    logs = TaskLogs(
        heartbeat_s=ctl.cfg.heartbeat_s,
        job=ctl.job,
        index=ctl.executor.task_index,
        agents=ctl.agents,
    )
    agent_pb2_grpc.add_AgentServiceServicer_to_server(_AgentService(ctl, logs), server)
    jobs_pb2_grpc.add_JobServiceServicer_to_server(_JobService(ctl, logs, users), server)
    return logs


def _abort(context: grpc.ServicerContext, err: Exception) -> None:
    if isinstance(err, PermissionError):
        context.abort(grpc.StatusCode.PERMISSION_DENIED, shorten(str(err), 1000))
    if isinstance(err, QuotaError):
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, shorten(str(err), 1000))
    if isinstance(err, KeyError):
        context.abort(grpc.StatusCode.NOT_FOUND, f"no job {shorten(repr(err.args[0]), 200)}")
    context.abort(grpc.StatusCode.INVALID_ARGUMENT, shorten(str(err), 1000))


def _check_identity(context: grpc.ServicerContext, claimed: str) -> None:
    """An agent credential speaks only for its own agent id."""
    bound = agent_of(context)
    if bound is not None and bound != claimed:
        context.abort(
            grpc.StatusCode.PERMISSION_DENIED,
            f"this credential belongs to agent {shorten(bound, 128)!r}, "
            f"not {shorten(claimed, 128)!r}",
        )


class _AgentService(agent_pb2_grpc.AgentServiceServicer):
    def __init__(self, ctl: ControllerFacade, logs: TaskLogs) -> None:
        self.ctl = ctl
        self.logs = logs

    def Register(
        self, request: agent_pb2.RegisterRequest, context: grpc.ServicerContext
    ) -> agent_pb2.RegisterResponse:
        _check_identity(context, request.name)
        try:
            info = serde.agent_info_from_proto(request)
        except SpecError as err:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(err))
        info = self.ctl.register_agent(info)
        return agent_pb2.RegisterResponse(
            agent_id=info.agent_id,
            heartbeat_interval_s=self.ctl.cfg.heartbeat_s,
            slot_seconds=self.ctl.cfg.slot_seconds,
        )

    def Heartbeat(
        self, request: agent_pb2.HeartbeatRequest, context: grpc.ServicerContext
    ) -> agent_pb2.HeartbeatResponse:
        _check_identity(context, request.agent_id)
        agent = self.ctl.heartbeat(serde.heartbeat_from_proto(request))
        if agent is None:
            return agent_pb2.HeartbeatResponse(reregister=True)
        broker = self.logs.broker
        broker.deliver(agent.agent_id, serde.log_chunks_from_proto(request.logs))
        executor = self.ctl.executor
        plans, lease = executor.desired_for(agent.agent_id), executor.lease_expiry()
        return agent_pb2.HeartbeatResponse(
            tasks=[task_to_proto(p, lease_expires_unix=lease) for p in plans],
            log_requests=[
                serde.log_request_to_proto(r) for r in broker.requests_for(agent.agent_id)
            ],
        )


# How each reason a log cannot be read reaches the client.
_LOG_CODES = {
    "not_found": grpc.StatusCode.NOT_FOUND,
    "no_task": grpc.StatusCode.FAILED_PRECONDITION,
    "refused": grpc.StatusCode.FAILED_PRECONDITION,
    "lost": grpc.StatusCode.UNAVAILABLE,
    "timeout": grpc.StatusCode.DEADLINE_EXCEEDED,
    "busy": grpc.StatusCode.RESOURCE_EXHAUSTED,
}


class _JobService(jobs_pb2_grpc.JobServiceServicer):
    def __init__(self, ctl: ControllerFacade, logs: TaskLogs, users: UsersFile | None) -> None:
        self.ctl = ctl
        self.logs = logs
        self.users = users

    def _user(self, context: grpc.ServicerContext) -> User:
        user = user_of(context, self.ctl.cfg.token, self.users)
        if user is None:  # the interceptor let through a token the users file just lost
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "this token is no user's (now)")
            raise AssertionError("unreachable")
        return user

    def _owned(self, context: grpc.ServicerContext, user: User, job_id: str, action: str) -> None:
        """PERMISSION_DENIED unless ``user`` owns ``job_id`` or is an admin (audited by
        :meth:`Tenancy.authorize`). An unknown job passes, for the handler's NOT_FOUND."""
        try:
            self.ctl.job(job_id)
            self.ctl.tenancy.authorize(user, action, job_id)
        except KeyError:
            return
        except PermissionError as err:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(err))

    def SubmitJobs(
        self, request: jobs_pb2.SubmitJobsRequest, context: grpc.ServicerContext
    ) -> jobs_pb2.SubmitJobsResponse:
        try:
            ids = self.ctl.submit(request.document, self._user(context), dry_run=request.dry_run)
            return jobs_pb2.SubmitJobsResponse(job_ids=ids, dry_run=request.dry_run)
        except MlschedError as err:
            _abort(context, err)
            raise

    def GetJob(
        self, request: jobs_pb2.GetJobRequest, context: grpc.ServicerContext
    ) -> jobs_pb2.GetJobResponse:
        try:
            return jobs_pb2.GetJobResponse(
                job=serde.job_status_to_proto(self.ctl.job(request.job_id))
            )
        except KeyError as err:
            _abort(context, err)
            raise

    def ListJobs(
        self, request: jobs_pb2.ListJobsRequest, context: grpc.ServicerContext
    ) -> jobs_pb2.ListJobsResponse:
        jobs = self.ctl.jobs()
        if request.user:
            jobs = [j for j in jobs if j.owner == request.user]
        return jobs_pb2.ListJobsResponse(jobs=[serde.job_status_to_proto(j) for j in jobs])

    def CancelJob(
        self, request: jobs_pb2.CancelJobRequest, context: grpc.ServicerContext
    ) -> jobs_pb2.CancelJobResponse:
        try:
            status = self.ctl.cancel(request.job_id, self._user(context))
            return jobs_pb2.CancelJobResponse(job=serde.job_status_to_proto(status))
        except (KeyError, MlschedError, PermissionError) as err:
            _abort(context, err)
            raise

    def DescribeJob(
        self, request: jobs_pb2.DescribeJobRequest, context: grpc.ServicerContext
    ) -> jobs_pb2.DescribeJobResponse:
        try:
            status = self.ctl.job(request.job_id)
            detail = describe_job(
                self.ctl.store, self.ctl.tenancy, request.job_id, request.limit or 50
            )
        except KeyError as err:
            _abort(context, err)
            raise
        return jobs_pb2.DescribeJobResponse(
            job=serde.job_status_to_proto(status),
            detail_json=json.dumps(detail, default=str),
        )

    def WhoAmI(
        self, request: jobs_pb2.WhoAmIRequest, context: grpc.ServicerContext
    ) -> jobs_pb2.WhoAmIResponse:
        user = self._user(context)
        quota = user.quota
        return jobs_pb2.WhoAmIResponse(
            user=user.name,
            role=user.role,
            quota_gpus=-1 if quota.gpus is None else quota.gpus,
            quota_queued=-1 if quota.queued is None else quota.queued,
        )

    def GetAudit(
        self, request: jobs_pb2.GetAuditRequest, context: grpc.ServicerContext
    ) -> jobs_pb2.GetAuditResponse:
        user = self._user(context)
        asked = request.user or ("" if user.admin else user.name)  # a user: their own rows
        if not user.admin and asked != user.name:
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"a user reads their own audit rows only (user: {user.name!r})",
            )
        try:
            who = check_id(asked, "user", max_len=64) if asked else ""
            job = check_id(request.job_id, "job_id") if request.job_id else ""
        except SpecError as err:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(err))
            raise
        entries = self.ctl.tenancy.audit(user=who, job_id=job, limit=request.limit or 100)
        return jobs_pb2.GetAuditResponse(
            entries=[
                jobs_pb2.AuditEntry(id=e.id, at_unix=e.at, user=e.user, action=e.action,
                                    job_id=e.job_id, outcome=e.outcome, detail=e.detail)
                for e in entries
            ]
        )  # fmt: skip

    def GetClusterStatus(
        self, request: jobs_pb2.GetClusterStatusRequest, context: grpc.ServicerContext
    ) -> jobs_pb2.GetClusterStatusResponse:
        return serde.cluster_status_to_proto(self.ctl.cluster_status())

    def StartProbe(
        self, request: jobs_pb2.StartProbeRequest, context: grpc.ServicerContext
    ) -> jobs_pb2.ProbeStatus:
        if not self._user(context).admin:  # it holds the slot loop: the operator's tool
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED, "profiling through the agents is for admins"
            )
        try:
            status = self.ctl.probe(
                request.job,
                request.placement,
                int(request.steps or 20),
                int(request.warmup),
                float(request.timeout_s or 600.0),
                float(request.seconds or 10.0),
            )
        except ProbeBusy as err:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, shorten(str(err), 1000))
            raise
        except MlschedError as err:
            _abort(context, err)
            raise
        return serde.probe_status_to_proto(status)

    def GetProbe(
        self, request: jobs_pb2.GetProbeRequest, context: grpc.ServicerContext
    ) -> jobs_pb2.ProbeStatus:
        try:
            return serde.probe_status_to_proto(self.ctl.probes.get(request.probe_id))
        except KeyError:
            context.abort(
                grpc.StatusCode.NOT_FOUND, f"no probe {shorten(repr(request.probe_id), 200)}"
            )
            raise

    def GetTaskLog(
        self, request: jobs_pb2.GetTaskLogRequest, context: grpc.ServicerContext
    ) -> jobs_pb2.GetTaskLogResponse:
        self._owned(context, self._user(context), request.job_id, "read the logs of")
        wait_s = self.logs.wait_s()
        left = context.time_remaining()
        if left is not None:  # answer before the client gives up, with the reason
            wait_s = max(0.0, min(wait_s, left - 0.25))
        try:
            log = self.logs.read(
                request.job_id, request.task_id, request.offset, request.max_bytes, wait_s=wait_s
            )
        except LogError as err:
            context.abort(_LOG_CODES.get(err.kind, grpc.StatusCode.UNAVAILABLE), str(err))
            raise
        except SpecError as err:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(err))
            raise
        return serde.task_log_to_proto(log)
