"""Job specifications: everything the five specs need to describe a training job.

Work is counted in **work units**: mini-batches of ``batch_size`` samples summed over all
workers. A job's total work is ``epochs * chunks * batches_per_chunk`` units (spec 001's
E_i N_i M_i, spec 002's E_j D_j K_j). A synchronous job with a fixed global batch (spec 000)
sets ``global_batch`` and usually ``batch_size: 1``, so that a unit is a sample.

The runtime profile (``compute_s``, ``gradient_mb``) is the *reference* estimate that the
runtime model starts from; the engine refines it from measurements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cached_property
from typing import Any

from mlsched.core.errors import SpecError
from mlsched.core.fields import (
    check_keys,
    check_number,
    req_mapping,
    req_str,
)
from mlsched.core.frozen import fill_at_once
from mlsched.core.ids import check_id, check_text
from mlsched.core.limits import (
    JOB_LIMITS,
    MAX_TOTAL_WORK,
)
from mlsched.core.resources import ResourceVector
from mlsched.core.train_config import JOB_SETTINGS, check_settings
from mlsched.core.utility import Utility

__all__ = ["TRAINING_KEYS", "Arch", "JobSpec", "SyncMode"]


class Arch(str, Enum):
    """Communication architecture: parameter server or ring-all-reduce."""

    PS = "ps"
    ALLREDUCE = "allreduce"


class SyncMode(str, Enum):
    """Asynchronous (each PS applies each push on arrival, spec 001) or synchronous (BSP)."""

    ASYNC = "async"
    SYNC = "sync"


_FIELDS = (
    "job_id",
    "arrival_slot",
    "model",
    "profile",
    "arch",
    "sync",
    "epochs",
    "chunks",
    "batches_per_chunk",
    "batch_size",
    "global_batch",
    "max_workers",
    "min_workers",
    "ps_ratio",
    "requested_workers",
    "requested_ps",
    "worker",
    "ps",
    "gpu_type",
    "worker_types",
    "ps_types",
    "compute_s",
    "compute_s_by_type",
    "update_s",
    "gradient_mb",
    "internal_gbps",
    "hop_gbps",
    "utility",
    "weight",
    "valuation",
    "budget_worker_slots",
    "training",
)

#: Trainer settings a job may fix for its real runs on the testbed (the simulator ignores
#: them): the fields of :class:`TrainConfig` marked ``job``. Anything else about the training
#: processes follows from the job, its placement and the controller.
TRAINING_KEYS = JOB_SETTINGS


_FIELD_SET = frozenset(_FIELDS)
# Shared defaults: both are immutable, and one per job would be thousands of copies.
_ALWAYS_ONE = Utility.constant(1.0)
_ONE_CPU = ResourceVector({"cpu": 1})
_ARCHS = tuple(a.value for a in Arch)
_SYNC_MODES = tuple(m.value for m in SyncMode)

# Numeric fields that may be null (None); the rest always hold a number.
_OPTIONAL = frozenset(
    {"global_batch", "max_workers", "requested_workers", "requested_ps", "ps_ratio"}
    | {"valuation", "budget_worker_slots", "internal_gbps", "hop_gbps"}
)


#: Per numeric field: (name, bound, may be None, low, high, a count (an integer bound closed
#: below), a measure (not an integer bound), closed below).
_NUMBERS = tuple(
    (
        name,
        b,
        name in _OPTIONAL,
        b.low,
        b.high,
        b.integer and not b.open_low,
        not b.integer,
        not b.open_low,
    )
    for name, b in JOB_LIMITS.items()
)
_COMPUTE_S = JOB_LIMITS["compute_s"]


@fill_at_once  # its __init__ fills all 35 fields at once (a trace builds thousands)
@dataclass(frozen=True)
class JobSpec:
    """A validated, immutable job description.

    Parallelism: at most ``max_workers`` workers at once (default ``chunks``: one worker per
    data chunk, spec 001 (3)); a PS job needs ``ceil(workers * worker_bw / ps_bw)`` PSs so the
    PSs are not the bandwidth bottleneck (001 (6)), and at most ``ps_ratio`` workers per PS
    when set (spec 000's gamma). ``worker_types``/``ps_types`` offer typed bundles (002, 004);
    ``compute_s_by_type`` gives the per-type compute time: of the typed bundle chosen, or,
    for a job without one, of the GPU type of the servers its workers run on (the slowest
    of them). ``internal_gbps`` is the rate of one worker-PS link when all of a synchronous
    PS job's workers and PSs share a server (spec 000's b(i); default the topology's
    ``intra_server_gbps``). ``hop_gbps`` is what a ring-all-reduce job reserves on every
    link of every inter-server hop of its ring (spec 003's b_i; unset: nothing reserved, its
    links unchecked); hops inside a server are free.

    ``profile`` names whose measurements the runtime model pools: jobs of one profile (and
    kind, batch size and GPU type) share fitted parameters. Default: the model name; a
    trace import gives each job of its own speed its own profile.
    """

    job_id: str
    utility: Utility = _ALWAYS_ONE
    arrival_slot: int = 0
    model: str = "resnet20"
    profile: str | None = None
    arch: Arch = Arch.PS
    sync: SyncMode = SyncMode.ASYNC
    epochs: int = 1
    chunks: int = 1
    batches_per_chunk: int = 1
    batch_size: int = 32
    global_batch: int | None = None
    max_workers: int | None = None
    min_workers: int = 1
    ps_ratio: float | None = None
    requested_workers: int | None = None
    requested_ps: int | None = None
    worker: ResourceVector = _ONE_CPU
    ps: ResourceVector = _ONE_CPU
    gpu_type: str | None = None
    worker_types: Mapping[str, ResourceVector] = field(default_factory=dict)
    ps_types: Mapping[str, ResourceVector] = field(default_factory=dict)
    compute_s: float = 0.1
    compute_s_by_type: Mapping[str, float] = field(default_factory=dict)
    update_s: float = 0.0
    gradient_mb: float = 10.0
    internal_gbps: float | None = None
    hop_gbps: float | None = None
    weight: float = 1.0
    valuation: float | None = None
    budget_worker_slots: float | None = None
    training: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        def bad(name: str, expected: str) -> SpecError:
            return SpecError(name, getattr(self, name), expected)

        check_id(self.job_id, "job_id")
        for enum_cls, name in ((Arch, "arch"), (SyncMode, "sync")):
            value = getattr(self, name)
            if not isinstance(value, enum_cls):
                try:
                    object.__setattr__(self, name, enum_cls(value))
                except ValueError:
                    raise bad(name, "one of " + ", ".join(e.value for e in enum_cls)) from None
        if self.arch is Arch.ALLREDUCE and self.sync is SyncMode.ASYNC:
            # Ring-all-reduce is synchronous by construction.
            object.__setattr__(self, "sync", SyncMode.SYNC)
        if not isinstance(self.utility, Utility):
            raise bad("utility", "a Utility")
        fields = self.__dict__
        for name, bound, optional, low, high, counts, measure, closed in _NUMBERS:
            value = fields[name]
            # check_number's common cases inline (twenty fields per job, thousands of jobs
            # per trace): an int count or a float measure within its bounds (comparisons
            # that refuse inf and nan); anything else goes through it.
            kind = type(value)
            if kind is int:
                if counts and low <= value <= high:
                    continue
            elif kind is float:
                if measure and (low < value or (closed and value == low)) and value <= high:
                    continue
            elif value is None and optional:
                continue
            number = check_number(value, name, bound)
            if number is not value:  # an int where a float belongs, or the reverse
                object.__setattr__(self, name, number)
        if self.max_workers is None:
            object.__setattr__(
                self, "max_workers", min(self.chunks, JOB_LIMITS["max_workers"].high)
            )
        if self.min_workers > self.worker_cap:
            raise bad("min_workers", f"at most max_workers ({self.worker_cap})")
        if self.requested_workers is not None and self.requested_workers > self.worker_cap:
            raise bad("requested_workers", f"at most max_workers ({self.worker_cap})")
        # total_work, filled in here: a cached_property's first read takes a lock (3.11).
        total = float(self.epochs * self.chunks * self.batches_per_chunk)
        object.__setattr__(self, "total_work", total)
        if total > MAX_TOTAL_WORK:
            raise bad(
                "batches_per_chunk",
                f"epochs * chunks * batches_per_chunk <= {MAX_TOTAL_WORK:g} "
                f"(here {self.total_work:g})",
            )
        if self.gpu_type is not None:
            check_text(self.gpu_type, "gpu_type", max_len=64)
        if self.profile is not None:
            check_text(self.profile, "profile", max_len=128)
        for name in ("worker", "ps"):
            value = getattr(self, name)
            if not isinstance(value, ResourceVector):
                object.__setattr__(self, name, ResourceVector.parse(value, field=name))
        # Each mapping is copied (the spec owns what it holds); most jobs leave them empty.
        for name in ("worker_types", "ps_types"):
            types = {
                check_id(k, name, max_len=64): ResourceVector.parse(v, field=f"{name}.{k}")
                for k, v in dict(fields[name]).items()
            }
            object.__setattr__(self, name, types)
        by_type: dict[str, float] = {}
        for k, v in dict(self.compute_s_by_type).items():
            check_id(k, "compute_s_by_type", max_len=64)
            fast = type(v) is float and math.isfinite(v) and _COMPUTE_S.holds(v)
            by_type[k] = v if fast else check_number(v, f"compute_s_by_type.{k}", _COMPUTE_S)
        object.__setattr__(self, "compute_s_by_type", by_type)
        object.__setattr__(self, "training", check_training(self.training))
        if self.hop_gbps is not None and self.arch is not Arch.ALLREDUCE:
            raise bad(
                "hop_gbps", "no value for a parameter-server job (ring hops are all-reduce's)"
            )
        if self.arch is Arch.PS and self.worker_bw_gbps > 0 and self.ps_bw_gbps == 0:
            raise SpecError("ps.bw_gbps", 0, "a PS bandwidth > 0 when workers reserve bandwidth")

    # Derived quantities -----------------------------------------------------------------
    @property
    def worker_cap(self) -> int:
        """Most workers this job may run at once."""
        assert self.max_workers is not None  # set in __post_init__
        return self.max_workers

    @cached_property
    def total_work(self) -> float:
        """Work units (mini-batches of ``batch_size`` samples) to finish the job."""
        return float(self.epochs * self.chunks * self.batches_per_chunk)

    @property
    def gradient_bytes(self) -> float:
        return self.gradient_mb * 1e6

    @property
    def worker_bw_gbps(self) -> float:
        return self.worker["bw_gbps"]

    @property
    def ps_bw_gbps(self) -> float:
        return self.ps["bw_gbps"]

    @property
    def uses_ps(self) -> bool:
        return self.arch is Arch.PS

    def worker_demand(self, worker_type: str | None = None) -> ResourceVector:
        if worker_type is None:
            return self.worker
        try:
            return self.worker_types[worker_type]
        except KeyError:
            raise SpecError(
                "worker_type",
                worker_type,
                f"one of this job's worker_types: {sorted(self.worker_types)}",
            ) from None

    def ps_demand(self, ps_type: str | None = None) -> ResourceVector:
        if ps_type is None:
            return self.ps
        try:
            return self.ps_types[ps_type]
        except KeyError:
            raise SpecError(
                "ps_type", ps_type, f"one of this job's ps_types: {sorted(self.ps_types)}"
            ) from None

    @property
    def ps_per_worker(self) -> int:
        """Smallest integer k with ``ps_needed(Y) <= k Y`` for every Y >= 1 (0 for a job
        without PSs; 1 under spec 001's ranges, where b <= B): a bound on the PS count
        linear in the workers, for formulations that need one."""
        if not self.uses_ps:
            return 0
        k = 1.0
        b, big_b = self.worker_bw_gbps, self.ps_bw_gbps
        if b > 0 and big_b > 0:
            k = max(k, b / big_b)
        if self.ps_ratio is not None:
            k = max(k, 1.0 / self.ps_ratio)
        return max(1, math.ceil(k - 1e-9))

    def ps_needed(
        self, workers: int, worker_type: str | None = None, ps_type: str | None = None
    ) -> int:
        """Fewest PSs for ``workers`` workers: bandwidth cover (001 (6)) and ratio (000 (E6))."""
        if not self.uses_ps or workers <= 0:
            return 0
        need = 1
        b = self.worker_demand(worker_type)["bw_gbps"]
        big_b = self.ps_demand(ps_type)["bw_gbps"]
        if b > 0 and big_b > 0:
            need = max(need, math.ceil(workers * b / big_b - 1e-9))
        if self.ps_ratio is not None:
            need = max(need, math.ceil(workers / self.ps_ratio - 1e-9))
        return need

    def compute_s_for(self, worker_type: str | None) -> float:
        if worker_type is not None and worker_type in self.compute_s_by_type:
            return self.compute_s_by_type[worker_type]
        return self.compute_s

    def public(self) -> JobSpec:
        """The spec as a pricing policy may see it: the user's valuation stays private."""
        return self if self.valuation is None else replace(self, valuation=None)

    # Loading --------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, raw: Any, field_name: str = "") -> JobSpec:
        data = req_mapping(raw, field_name or "job")
        check_keys(data, _FIELD_SET, field_name)
        f = field_name

        def opt_res(key: str) -> ResourceVector | None:
            return (
                ResourceVector.parse(data[key], field=_join(f, key))
                if data.get(key) is not None
                else None
            )

        kwargs: dict[str, Any] = {
            "job_id": req_str(data, "job_id", f),
            "utility": (
                Utility.from_dict(data["utility"], _join(f, "utility"))
                if "utility" in data
                else _ALWAYS_ONE
            ),
            "model": req_str(data, "model", f, default="resnet20"),
            "arch": req_str(data, "arch", f, choices=_ARCHS, default="ps"),
            "sync": req_str(
                data,
                "sync",
                f,
                choices=_SYNC_MODES,
                default="async" if data.get("arch", "ps") == "ps" else "sync",
            ),
            "gpu_type": data.get("gpu_type"),
            "profile": data.get("profile"),
        }
        # Numbers are checked once, in __post_init__ (its errors get the prefix below).
        for key in JOB_LIMITS:
            if key in data:
                kwargs[key] = data[key]
        for key in ("worker", "ps"):
            vec = opt_res(key)
            if vec is not None:
                kwargs[key] = vec
        for key in ("worker_types", "ps_types"):
            if data.get(key) is not None:
                types = req_mapping(data[key], _join(f, key))
                kwargs[key] = {
                    str(k): ResourceVector.parse(v, field=_join(f, f"{key}.{k}"))
                    for k, v in types.items()
                }
        if data.get("compute_s_by_type") is not None:
            by_type = req_mapping(data["compute_s_by_type"], _join(f, "compute_s_by_type"))
            kwargs["compute_s_by_type"] = dict(by_type)  # keys and numbers: __post_init__
        if data.get("training") is not None:
            kwargs["training"] = dict(req_mapping(data["training"], _join(f, "training")))
        try:
            return cls(**kwargs)
        except SpecError as err:
            raise SpecError(_join(f, err.field), err.value, err.expected) from None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in _FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            kind = type(value)
            if kind is float or kind is int or kind is str:  # most fields, kept cheap
                out[name] = value
                continue
            if isinstance(value, Enum):
                value = value.value
            elif isinstance(value, ResourceVector):
                value = value.as_dict()
            elif isinstance(value, Utility):
                value = value.to_dict()
            elif isinstance(value, Mapping):
                value = {
                    k: (v.as_dict() if isinstance(v, ResourceVector) else v)
                    for k, v in value.items()
                }
                if not value:
                    continue
            if value is None:
                continue
            out[name] = value
        return out


def check_training(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A job's ``training:`` settings, checked by :class:`TrainConfig` (known keys, strict
    types, finite bounds, choices). What a trainer makes of them (a dataset that exists, a
    model's input size) is checked at the testbed's intake."""
    return check_settings(raw)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key
