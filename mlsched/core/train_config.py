"""The complete, explicit configuration of one training process: the one definition of a
trainer's settings and their defaults.

Everything on the way from a job spec to a process uses it: a job's ``training:`` mapping is
checked against the fields marked ``job`` (:data:`JOB_SETTINGS`, :func:`check_settings`),
the controller renders one per task, :mod:`mlsched.net.task_wire` carries it to the agent,
and :meth:`TrainConfig.to_args` turns it into the trainer's command line, whose flags
(:mod:`mlsched.trainers.__main__`) derive from the same fields. Nothing is read from
defaults hidden in the environment, except what torchrun / Horovod set for the all-reduce
backends (rank, world size, master address), which :mod:`mlsched.trainers.env` reads.

Parameter-server layout: the process group has ``num_ps + num_workers`` ranks; PS ``k`` is
global rank ``k`` and worker ``w`` is global rank ``num_ps + w``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any

from mlsched.core.errors import SpecError
from mlsched.core.fields import check_number
from mlsched.core.ids import check_id, check_text
from mlsched.core.limits import MAX_PATH_LEN, TRAINING_LIMITS, Bound

__all__ = ["JOB_SETTINGS", "Backend", "Launcher", "Role", "TrainConfig", "check_settings"]

_ANY_FINITE = Bound(-1e300, 1e300)


class Role(str, Enum):
    WORKER = "worker"
    PS = "ps"
    RANK = "rank"  # an all-reduce rank


class Backend(str, Enum):
    DDP = "ddp"
    HOROVOD = "horovod"


class Launcher(str, Enum):
    """How an all-reduce job's DDP ranks start on a node: one torchrun per node (its
    ``--nproc-per-node`` ranks), or one ``python -m mlsched.trainers`` per rank. Horovod
    ranks are always started by :mod:`mlsched.trainers.allreduce.horovod_node`; PS roles are
    always direct."""

    TORCHRUN = "torchrun"
    DIRECT = "direct"


#: Field metadata of the settings a job's ``training:`` mapping may fix (the rest follow from
#: the job, its placement and the controller).
_JOB = {"job": True}


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
    backend: Backend = field(default=Backend.DDP, metadata=_JOB)  # all-reduce jobs only
    launcher: Launcher = field(default=Launcher.TORCHRUN, metadata=_JOB)  # DDP only
    rendezvous: str = "127.0.0.1:29500"  # host:port of the PS process group's store
    stop_step: int = 100  # global step at which every role stops and checkpoints
    checkpoint_dir: str = ""
    metrics: str = ""  # JSON-lines sink: a file path, "tcp://host:port" or "-" (stdout)
    batch_size: int = 32
    lr: float = field(default=0.05, metadata=_JOB)
    momentum: float = field(default=0.9, metadata=_JOB)
    weight_decay: float = field(default=5e-4, metadata=_JOB)
    dataset: str = field(default="synthetic", metadata=_JOB)
    data_path: str | None = field(default=None, metadata=_JOB)
    num_samples: int = field(default=50_000, metadata=_JOB)
    num_classes: int = field(default=10, metadata=_JOB)
    image_size: int = field(default=32, metadata=_JOB)
    seed: int = field(default=0, metadata=_JOB)
    device: str = "cpu"  # cpu | cuda | auto
    threads: int = field(default=1, metadata=_JOB)
    timeout_s: float = field(default=60.0, metadata=_JOB)  # collective / point-to-point timeout
    checkpoint_keep: int = field(default=2, metadata=_JOB)
    # Periodic checkpoints between the ones at a stop: whichever comes first (0: never). A
    # lost machine or a killed process loses at most this much work.
    checkpoint_every_s: float = field(default=60.0, metadata=_JOB)
    checkpoint_every_steps: int = field(default=0, metadata=_JOB)
    log_every: int = 0  # 0: no progress lines on stderr
    job_id: str = "job"
    # DDP: let all-reduce overlap backward (then communication time is not measured).
    overlap: bool = field(default=False, metadata=_JOB)

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, expected: str) -> None:
            if not ok:
                raise SpecError(name, getattr(self, name), expected)

        _check_types(self)

        need(bool(self.model), "model", "a model name (see mlsched.trainers.models)")
        need(self.arch in ("ps", "allreduce"), "arch", "one of ps, allreduce")
        need(self.mode in ("async", "sync"), "mode", "one of async, sync")
        for enum_cls, name in ((Role, "role"), (Backend, "backend"), (Launcher, "launcher")):
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
            # One token per flag: a value that starts with "-" stays a value.
            out.append(f"--{key.replace('_', '-')}={value}")
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


#: The trainer settings a job's ``training:`` mapping may fix, in declaration order.
JOB_SETTINGS: tuple[str, ...] = tuple(f.name for f in fields(TrainConfig) if f.metadata.get("job"))


def check_settings(raw: Mapping[str, Any], *, model: str = "job") -> dict[str, Any]:
    """A job's ``training:`` mapping checked by :class:`TrainConfig` itself: known keys, the
    fields' strict types, bounds and choices. Returns the settings as the config holds them
    (enum values as text); errors name ``training.<key>``."""
    settings = dict(raw)
    if not settings:
        return settings  # most jobs fix nothing: no config to build
    for key, value in settings.items():
        if key not in JOB_SETTINGS:
            raise SpecError(f"training.{key}", value, f"one of {', '.join(JOB_SETTINGS)}")
    try:
        cfg = TrainConfig(model=model or "job", checkpoint_dir="-", **settings)
    except SpecError as err:
        raise SpecError(f"training.{err.field}", err.value, err.expected) from None
    values = cfg.to_dict()
    return {key: values[key] for key in settings}
