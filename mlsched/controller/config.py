"""The controller's settings (``mlsched controller`` flags), checked before it starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlsched.core.cluster import Topology
from mlsched.core.device_types import TypeCatalogue
from mlsched.core.errors import SpecError
from mlsched.net.auth import check_listen

__all__ = ["ControllerConfig"]


@dataclass
class ControllerConfig:
    listen: str = "127.0.0.1:50051"
    policy: str = "fifo"
    policy_options: dict[str, Any] = field(default_factory=dict)
    slot_seconds: float = 60.0
    db: str = "mlsched.db"
    checkpoint_root: str = "checkpoints"
    data_root: str = ""  # jobs' training.data_path is relative to it (none allowed if unset)
    token: str | None = None  # the user token (JobService)
    agent_secret: str | None = None  # agents' credentials derive from it (AgentService)
    users_file: str | None = None  # users, roles and quotas (mlsched/net/users.py)
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    heartbeat_s: float = 1.0
    agent_timeout_s: float = 10.0
    lease_s: float = 120.0
    min_agents: int = 1
    task_timeout_s: float = 60.0
    seed: int = 0
    max_failures: int = 3
    metrics_listen: str | None = None  # HOST:PORT of the Prometheus endpoint (None: off)
    topology: Topology | None = None  # link speeds between racks (None: Topology's defaults)
    types: TypeCatalogue | None = None  # worker and PS types (None: none declared)
    profile: str | None = None  # a measured profile: the runtime model's prior (docs/profiles.md)

    def policy_settings(self) -> dict[str, Any]:
        """The options the controller runs its policy with: the policy's testbed settings
        (``Policy.testbed_defaults``) under the operator's ``policy_options``. ValueError
        for an unknown policy or a bad option."""
        from mlsched.scheduler.registry import create

        given = create(self.policy, **self.policy_options)
        settings = {**type(given).testbed_defaults, **self.policy_options}
        create(self.policy, **settings)
        return settings

    def validate(self) -> None:
        if not self.slot_seconds > 0:
            raise SpecError("slot_seconds", self.slot_seconds, "a number of seconds > 0")
        if not self.heartbeat_s > 0:
            raise SpecError("heartbeat_s", self.heartbeat_s, "a number of seconds > 0")
        if not self.agent_timeout_s > self.heartbeat_s:
            raise SpecError(
                "agent_timeout_s",
                self.agent_timeout_s,
                f"more than heartbeat_s ({self.heartbeat_s})",
            )
        if self.min_agents < 1:
            raise SpecError("min_agents", self.min_agents, "an integer >= 1")
        if self.agent_secret is not None and self.token is None:
            raise SpecError("agent_secret", "set", "a user token (--token) beside it")
        if self.users_file is not None and self.token is None:
            raise SpecError(
                "users_file", self.users_file, "the operator's token (--token) beside it"
            )
        check_listen(self.listen, self.token, self.agent_secret, tls=self.tls_cert is not None)
        if self.metrics_listen is not None:
            host, sep, port = self.metrics_listen.rpartition(":")
            if not (sep and host and port.isdigit() and 0 <= int(port) <= 65535):
                raise SpecError(
                    "metrics_listen", self.metrics_listen, "HOST:PORT (port 0: any free one)"
                )
