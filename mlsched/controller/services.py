"""The controller's gRPC services: thin translations between messages and the controller.

``AgentService`` (agents register and heartbeat; an agent credential speaks only for its
own agent id) and ``JobService`` (users submit, query and cancel). Errors become gRPC
statuses with bounded details: a hostile id or document never makes a large reply.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import grpc

from mlsched.controller import serde
from mlsched.core.errors import MlschedError, SpecError, shorten
from mlsched.net.auth import agent_of
from mlsched.v1 import agent_pb2, agent_pb2_grpc, jobs_pb2, jobs_pb2_grpc

if TYPE_CHECKING:
    from mlsched.controller.server import Controller

__all__ = ["add_services"]

log = logging.getLogger(__name__)


def add_services(ctl: Controller, server: grpc.Server) -> None:
    """Serve the agent and job services of ``ctl`` on ``server``."""
    agent_pb2_grpc.add_AgentServiceServicer_to_server(_AgentService(ctl), server)
    jobs_pb2_grpc.add_JobServiceServicer_to_server(_JobService(ctl), server)


def _abort(context: grpc.ServicerContext, err: Exception) -> None:
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
    def __init__(self, ctl: Controller) -> None:
        self.ctl = ctl

    def Register(
        self, request: agent_pb2.RegisterRequest, context: grpc.ServicerContext
    ) -> agent_pb2.RegisterResponse:
        _check_identity(context, request.name)
        try:
            info = serde.agent_info_from_proto(request)
        except SpecError as err:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(err))
        info = self.ctl.agents.register(info)
        self.ctl.store.upsert_agent(info.agent_id, info.to_dict(), alive=True)
        log.info(
            "[controller] agent %s registered (%s, %s)",
            info.agent_id,
            info.host,
            " ".join(f"{k}={v:g}" for k, v in sorted(info.capacity.items())),
        )
        return agent_pb2.RegisterResponse(
            agent_id=info.agent_id,
            heartbeat_interval_s=self.ctl.cfg.heartbeat_s,
            slot_seconds=self.ctl.cfg.slot_seconds,
        )

    def Heartbeat(
        self, request: agent_pb2.HeartbeatRequest, context: grpc.ServicerContext
    ) -> agent_pb2.HeartbeatResponse:
        _check_identity(context, request.agent_id)
        agent = self.ctl.agents.heartbeat(serde.heartbeat_from_proto(request))
        if agent is None:
            return agent_pb2.HeartbeatResponse(reregister=True)
        self.ctl.executor.poke()
        return agent_pb2.HeartbeatResponse(tasks=self.ctl.executor.desired_for(agent.agent_id))


class _JobService(jobs_pb2_grpc.JobServiceServicer):
    def __init__(self, ctl: Controller) -> None:
        self.ctl = ctl

    def SubmitJobs(
        self, request: jobs_pb2.SubmitJobsRequest, context: grpc.ServicerContext
    ) -> jobs_pb2.SubmitJobsResponse:
        try:
            return jobs_pb2.SubmitJobsResponse(job_ids=self.ctl.submit(request.document))
        except MlschedError as err:
            _abort(context, err)
            raise

    def GetJob(
        self, request: jobs_pb2.GetJobRequest, context: grpc.ServicerContext
    ) -> jobs_pb2.GetJobResponse:
        try:
            return jobs_pb2.GetJobResponse(job=self.ctl.job(request.job_id))
        except KeyError as err:
            _abort(context, err)
            raise

    def ListJobs(
        self, request: jobs_pb2.ListJobsRequest, context: grpc.ServicerContext
    ) -> jobs_pb2.ListJobsResponse:
        return jobs_pb2.ListJobsResponse(jobs=self.ctl.jobs())

    def CancelJob(
        self, request: jobs_pb2.CancelJobRequest, context: grpc.ServicerContext
    ) -> jobs_pb2.CancelJobResponse:
        try:
            return jobs_pb2.CancelJobResponse(job=self.ctl.cancel(request.job_id))
        except (KeyError, MlschedError) as err:
            _abort(context, err)
            raise

    def GetClusterStatus(
        self, request: jobs_pb2.GetClusterStatusRequest, context: grpc.ServicerContext
    ) -> jobs_pb2.GetClusterStatusResponse:
        return self.ctl.cluster_status()
