"""The complete, explicit configuration of one training process (one role, one rank).

Agents launch ``python -m mlsched.trainers`` with every field on the command line; nothing is
read from defaults hidden in the environment, except what torchrun / horovodrun set for the
all-reduce backends (rank, world size, master address), which :mod:`mlsched.trainers.env`
reads in one place.

Parameter-server layout: the process group has ``num_ps + num_workers`` ranks; PS ``k`` is
global rank ``k`` and worker ``w`` is global rank ``num_ps + w``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from enum import Enum
from typing import Any

from mlsched.core.errors import SpecError
from mlsched.core.fields import check_number
from mlsched.core.ids import check_id, check_text
from mlsched.core.limits import MAX_PATH_LEN, TRAINING_LIMITS, Bound

__all__ = ["Backend", "Role", "TrainConfig"]

_ANY_FINITE = Bound(-1e300, 1e300)


class Role(str, Enum):
    WORKER = "worker"
    PS = "ps"
    RANK = "rank"  # an all-reduce rank


class Backend(str, Enum):
    DDP = "ddp"
    HOROVOD = "horovod"


@dataclass(frozen=True)
class TrainConfig:
    """One process's parameters; validated on construction (errors name the field)."""

    model: str
    arch: str = "ps"  # ps | allreduce
    mode: str = "async"  # async | sync (PS only; all-reduce is synchronous)
    role: Role = Role.WORKER
    rank: int = 0  # index within the role (worker w, PS k) or the all-reduce rank
    num_workers: int = 1
    num_ps: int = 1
    backend: Backend = Backend.DDP
    rendezvous: str = "127.0.0.1:29500"  # host:port of the PS process group's store
    stop_step: int = 100  # global step at which every role stops and checkpoints
    checkpoint_dir: str = ""
    metrics: str = ""  # JSON-lines sink: a file path, "tcp://host:port" or "-" (stdout)
    batch_size: int = 32
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 5e-4
    dataset: str = "synthetic"
    data_path: str | None = None
    num_samples: int = 50_000
    num_classes: int = 10
    image_size: int = 32
    seed: int = 0
    device: str = "cpu"  # cpu | cuda | auto
    threads: int = 1
    timeout_s: float = 60.0  # collective / point-to-point timeout
    checkpoint_keep: int = 2
    # Periodic checkpoints between the ones at a stop: whichever comes first (0: never). A
    # lost machine or a killed process loses at most this much work.
    checkpoint_every_s: float = 60.0
    checkpoint_every_steps: int = 0
    log_every: int = 0  # 0: no progress lines on stderr
    job_id: str = "job"
    overlap: bool = False  # DDP: let all-reduce overlap backward (comm time not measured)

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, expected: str) -> None:
            if not ok:
                raise SpecError(name, getattr(self, name), expected)

        _check_types(self)

        need(bool(self.model), "model", "a model name (see mlsched.trainers.models)")
        need(self.arch in ("ps", "allreduce"), "arch", "one of ps, allreduce")
        need(self.mode in ("async", "sync"), "mode", "one of async, sync")
        for enum_cls, name in ((Role, "role"), (Backend, "backend")):
            value = getattr(self, name)
            if not isinstance(value, enum_cls):
                try:
                    object.__setattr__(self, name, enum_cls(value))
                except ValueError:
                    raise SpecError(
                        name, value, "one of " + ", ".join(e.value for e in enum_cls)
                    ) from None
        if self.arch == "ps":
            need(self.role in (Role.WORKER, Role.PS), "role", "worker or ps for arch ps")
            limit = self.num_workers if self.role is Role.WORKER else self.num_ps
            need(0 <= self.rank < limit, "rank", f"an index in [0, {limit})")
        else:
            object.__setattr__(self, "role", Role.RANK)
            object.__setattr__(self, "mode", "sync")
        need(self.num_workers >= 1, "num_workers", "an integer >= 1")
        need(self.num_ps >= 1 or self.arch == "allreduce", "num_ps", "an integer >= 1")
        need(self.stop_step >= 0, "stop_step", "an integer >= 0")
        need(bool(self.checkpoint_dir), "checkpoint_dir", "a directory path")
        need(self.batch_size >= 1, "batch_size", "an integer >= 1")
        need(self.lr > 0, "lr", "a number > 0")
        need(0 <= self.momentum < 1, "momentum", "a number in [0, 1)")
        need(self.weight_decay >= 0, "weight_decay", "a number >= 0")
        need(
            self.dataset in ("synthetic", "cifar10", "folder"),
            "dataset",
            "one of synthetic, cifar10, folder",
        )
        need(self.num_samples >= 1, "num_samples", "an integer >= 1")
        need(self.device in ("cpu", "cuda", "auto"), "device", "one of cpu, cuda, auto")
        need(self.threads >= 1, "threads", "an integer >= 1")
        need(self.timeout_s > 0, "timeout_s", "a number of seconds > 0")
        need(":" in self.rendezvous, "rendezvous", "host:port")

    # Parameter-server layout ------------------------------------------------------------
    @property
    def world_size(self) -> int:
        return self.num_ps + self.num_workers if self.arch == "ps" else self.num_workers

    @property
    def global_rank(self) -> int:
        if self.arch != "ps":
            return self.rank
        return self.rank if self.role is Role.PS else self.num_ps + self.rank

    @property
    def master(self) -> tuple[str, int]:
        host, _, port = self.rendezvous.rpartition(":")
        return host, int(port)

    def to_args(self) -> list[str]:
        """The command-line arguments that rebuild this config (what launchers pass)."""
        out: list[str] = []
        for key, value in asdict(self).items():
            if value is None:
                continue
            if isinstance(value, Enum):
                value = value.value
            elif isinstance(value, bool):
                value = "true" if value else "false"
            out += [f"--{key.replace('_', '-')}", str(value)]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {k: (v.value if isinstance(v, Enum) else v) for k, v in asdict(self).items()}


def _check_types(cfg: TrainConfig) -> None:
    """Strict types for every field (no "16" for 16, no True for 1) and the shared numeric
    bounds for those a job may set: a config built from a user's mapping is checked as
    thoroughly as one built from command-line flags."""
    for f in fields(cfg):
        value = getattr(cfg, f.name)
        kind = str(f.type)
        if f.name in TRAINING_LIMITS:
            object.__setattr__(cfg, f.name, check_number(value, f.name, TRAINING_LIMITS[f.name]))
        elif kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise SpecError(f.name, value, "an integer")
        elif kind == "float":
            check_number(value, f.name, _ANY_FINITE)
            object.__setattr__(cfg, f.name, float(value))
        elif kind == "bool":
            if not isinstance(value, bool):
                raise SpecError(f.name, value, "true or false")
        elif kind in ("str", "str | None") and value is not None:
            if not isinstance(value, str):
                raise SpecError(f.name, value, "a string")
            if len(value) > MAX_PATH_LEN or "\x00" in value:
                raise SpecError(f.name, value, f"text of at most {MAX_PATH_LEN} characters")
    check_id(cfg.job_id, "job_id")
    if cfg.data_path is not None:
        check_text(cfg.data_path, "data_path", max_len=MAX_PATH_LEN)
