"""A cluster's worker and PS types (spec 002's M and P): its cluster-wide catalogue.

A *worker type* is a resource bundle on one GPU model (``v100x2``: two V100s, 8 vCPUs,
2.5 Gbit/s); a *PS type* is a bundle without GPUs. The catalogue is part of the cluster
description (``types:`` beside ``servers:``)::

    types:
      workers:
        v100x1: {gpu_model: V100, gpu: 1, cpu: 4, bw_gbps: 1.25}
        k80x2:  {gpu_model: K80, gpu: 2, cpu: 4, bw_gbps: 1.0}
      ps:
        ps1: {cpu: 1, bw_gbps: 5}

Which servers host a type follows from the servers' own ``gpu_type``: a worker type runs
on the worker-pool servers of its GPU model (on any worker server when it names none), a
PS type on the PS-pool servers. :func:`mlsched.core.type_hosts.type_problems` says what a
cluster cannot honour (a model no server has, a bundle no host can hold); :meth:`TypeCatalogue.job_problem`
what a job gets wrong (a type the catalogue lacks, or a bundle other than the catalogue's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Any

from mlsched.core.errors import SpecError
from mlsched.core.fields import check_keys, req_mapping
from mlsched.core.ids import check_id
from mlsched.core.job import JobSpec
from mlsched.core.resources import ResourceVector

__all__ = ["MAX_TYPES", "PsType", "TypeCatalogue", "WorkerType"]

#: At most this many worker types and as many PS types (a catalogue is a table, not data).
MAX_TYPES = 256


@dataclass(frozen=True)
class WorkerType:
    """One worker bundle: its GPU model (None: any worker server) and resources."""

    name: str
    gpu_model: str | None
    demand: ResourceVector


@dataclass(frozen=True)
class PsType:
    name: str
    demand: ResourceVector


@dataclass(frozen=True)
class TypeCatalogue:
    """Worker and PS types, in the order given (immutable, like the cluster that holds it;
    name lookups through :attr:`workers` and :attr:`ps`)."""

    worker_types: tuple[WorkerType, ...] = ()
    ps_types: tuple[PsType, ...] = ()

    @cached_property
    def workers(self) -> Mapping[str, WorkerType]:
        return MappingProxyType({w.name: w for w in self.worker_types})

    @cached_property
    def ps(self) -> Mapping[str, PsType]:
        return MappingProxyType({p.name: p for p in self.ps_types})

    def __bool__(self) -> bool:
        return bool(self.worker_types or self.ps_types)

    def gpu_model(self, worker_type: str | None) -> str | None:
        hit = self.workers.get(worker_type) if worker_type is not None else None
        return hit.gpu_model if hit is not None else None

    def job_problem(self, job: JobSpec) -> SpecError | None:
        """A job's first type the catalogue lacks or whose bundle differs from it; None
        when every type the job offers is the catalogue's (or the catalogue is empty)."""
        if not self:
            return None
        for key, table, offered in (
            ("worker_types", self.workers, job.worker_types),
            ("ps_types", self.ps, job.ps_types),
        ):
            for name, demand in offered.items():
                known = table.get(name)
                if known is None:
                    return SpecError(
                        f"{key}.{name}",
                        name,
                        f"a type of the cluster's catalogue ({', '.join(table) or 'none'})",
                    )
                if demand != known.demand:
                    return SpecError(
                        f"{key}.{name}",
                        demand.as_dict(),
                        f"the catalogue's bundle {known.demand.as_dict()}",
                    )
        return None

    # Loading -------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, raw: Any, field: str = "types") -> TypeCatalogue:
        data = req_mapping(raw, field)
        check_keys(data, ("workers", "ps"), field)
        workers: list[WorkerType] = []
        for name, entry in _table(data.get("workers"), f"{field}.workers"):
            where = f"{field}.workers.{name}"
            spec = dict(req_mapping(entry, where))
            model = spec.pop("gpu_model", None)
            if model is not None and (not isinstance(model, str) or not model):
                raise SpecError(f"{where}.gpu_model", model, "a GPU model name such as V100")
            workers.append(WorkerType(name, model, ResourceVector.parse(spec, field=where)))
        ps = [
            PsType(name, ResourceVector.parse(entry, field=f"{field}.ps.{name}"))
            for name, entry in _table(data.get("ps"), f"{field}.ps")
        ]
        return cls(tuple(workers), tuple(ps))

    def to_dict(self) -> dict[str, Any]:
        return {
            "workers": {
                w.name: {
                    **({"gpu_model": w.gpu_model} if w.gpu_model else {}),
                    **w.demand.as_dict(),
                }
                for w in self.worker_types
            },
            "ps": {p.name: p.demand.as_dict() for p in self.ps_types},
        }


def _table(raw: Any, field: str) -> list[tuple[str, Any]]:
    if raw is None:
        return []
    data = req_mapping(raw, field)
    if len(data) > MAX_TYPES:
        raise SpecError(field, f"{len(data)} types", f"at most {MAX_TYPES} types")
    return [(check_id(name, f"{field} key"), entry) for name, entry in data.items()]
