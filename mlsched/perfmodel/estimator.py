"""The engine's runtime model: one family per job kind, parameters refined online.

Parameters are kept per *profile key* ``(family, model, batch size, global batch, worker
type or GPU type)``: jobs of the same model on the same hardware share what was measured.
Until a key has measurements, a job's parameters come from its spec (the prior), or, given
a measured profile (``profile``), from the job's cell where the profile has one: its
compute seconds per iteration, and the in-server communication parameter (a ring's
reduction time, a synchronous PS's in-server scale) that makes the family's time on one
server equal the cell's (a one-machine profile measures nothing across servers, so the
scales of the links between servers stay the spec's). After
:meth:`refit`, predictions use the least-squares fit over the last ``window`` measurements
of the key (compute and communication times are fitted together, each against its own
design row, which makes compute and bandwidth identifiable from one configuration).

The bandwidth a key achieves follows from the same fit: the communication seconds are
fitted (a family's ``comm_scale``: nominal over effective bandwidth), and the bytes a worker
moves per iteration are the model's, scaled by what the trainers reported moving (the key's
``bytes_ratio``, measured over model bytes). :meth:`RuntimeEstimator.bandwidth_gbps` is their
quotient, comparable with ``Measurement.comm_gbps``.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from mlsched.core.allocation import Placement
from mlsched.core.cluster import Cluster
from mlsched.core.job import Arch, JobSpec, SyncMode
from mlsched.perfmodel.base import GBIT, Measurement, PerfFamily, RuntimeModel
from mlsched.perfmodel.fit import FitResult, fit_linear
from mlsched.perfmodel.hetero import HeteroModel
from mlsched.perfmodel.ps_async import AsyncPSModel
from mlsched.perfmodel.ps_sync import SyncPSModel
from mlsched.perfmodel.ring import RingAllReduceModel

if TYPE_CHECKING:
    from mlsched.perfmodel.profile import Profile
    from mlsched.perfmodel.profiled import ProfileLookup

__all__ = ["FAMILIES", "JOB_KINDS", "ProfileKey", "RuntimeEstimator", "default_family"]

log = logging.getLogger(__name__)

FAMILIES: dict[str, Callable[[], PerfFamily]] = {
    "ps_async": AsyncPSModel,
    "ps_sync": SyncPSModel,
    "ring": RingAllReduceModel,
    "hetero": HeteroModel,
    "dps": lambda: HeteroModel(bw_rule="dps"),
}

#: The job kinds a families mapping may name.
JOB_KINDS = ("ps_async", "ps_sync", "allreduce")

ProfileKey = tuple[str, str, int, int, str]

#: Parameters a profile's one-machine communication time may set: they add to, or scale,
#: communication within a server only.
_IN_SERVER_PARAMS = ("reduce_s", "comm_scale_int")


def default_family(job: JobSpec) -> str:
    """ps+async -> 001's model, ps+sync -> 000's, all-reduce -> 003's."""
    if job.arch is Arch.ALLREDUCE:
        return "ring"
    return "ps_async" if job.sync is SyncMode.ASYNC else "ps_sync"


def _to_rounding(pc: float, pm: float, compute: float, comm: float) -> bool:
    """Whether predicted (compute, comm) seconds equal the measured ones to rounding."""
    return abs(pc - compute) <= 1e-12 * max(1.0, compute) and abs(pm - comm) <= 1e-12 * max(
        1.0, comm
    )


class _Sample(NamedTuple):  # a tuple: one is made per measurement
    dc: np.ndarray
    dm: np.ndarray
    compute: float
    comm: float
    wire: float = 0.0  # the model's bytes per worker and iteration
    moved: float | None = None  # the measured ones (None: not measured)


# Made without the named tuple's Python-level __new__ (every field given).
_new_sample = partial(tuple.__new__, _Sample)


@dataclass(eq=False)
class _KeyState:
    samples: deque[_Sample]
    version: int = 0  # bumped when the key's parameters change
    fresh: int = 0  # samples since the last fit
    exact: bool = False  # the key's fit is ok and has no residual
    has_prior: bool = False


@dataclass(eq=False)
class _Entry:
    key: ProfileKey
    state: _KeyState
    dc: np.ndarray
    dm: np.ndarray
    generation: int  # the estimator's when made: entries of an older one are dropped
    version: int = -1  # the key's parameter version ``parts`` were computed with
    parts: tuple[float, float] = (0.0, 0.0)
    wire: float = -1.0  # the family's bytes per worker and iteration (-1: not yet known)
    # The sample last found predicted to rounding by an exact fit, and the key's version
    # then: the same sample again under the same version needs no new check.
    quiet: _Sample | None = None
    quiet_version: int = -1
    # This (job, placement)'s latest sample: a steady job measures the same again, and the
    # key's window (shared with the key's other jobs) takes the same sample once more.
    latest: _Sample | None = None


class RuntimeEstimator(RuntimeModel):
    """Prior-or-fitted parameters per profile key; predictions cached until the next refit.

    ``families`` maps a job kind (``ps_async``, ``ps_sync``, ``allreduce``) to a family
    name in :data:`FAMILIES`; unmapped kinds use :func:`default_family`. ``overrides``
    replaces named parameters of every prior (e.g. ``{"compute_s": ...}`` is per job, so it
    is rarely useful; ``comm_scale`` is the usual one).
    """

    def __init__(
        self,
        cluster: Cluster,
        families: Mapping[str, str] | None = None,
        *,
        window: int = 256,
        overrides: Mapping[str, float] | None = None,
        profile: Profile | None = None,
    ) -> None:
        self.cluster = cluster
        self.profile = profile
        self._lookup: ProfileLookup | None = None
        if profile is not None:  # imported here: a run without a profile never needs it
            from mlsched.perfmodel.profiled import ProfileLookup

            self._lookup = ProfileLookup(profile)
        self._server_type_of: tuple[Cluster, str | None] | None = None
        self._choice = dict(families or {})
        for kind, fam in self._choice.items():
            if kind not in JOB_KINDS:
                raise ValueError(f"runtime families: unknown job kind {kind!r}; known: {JOB_KINDS}")
            if fam not in FAMILIES:
                raise ValueError(
                    f"runtime family for {kind!r}: {fam!r} is not one of {sorted(FAMILIES)}"
                )
        self._families: dict[str, PerfFamily] = {}
        self._by_kind: dict[str, PerfFamily] = {}  # job kind -> family, resolved once
        self._window = window
        self._overrides = dict(overrides or {})
        # Per profile key: its sample window, parameter version and fit state.
        self._keys: dict[ProfileKey, _KeyState] = {}
        self._dirty: set[ProfileKey] = set()
        self.fits: dict[ProfileKey, FitResult] = {}
        # Measured / model bytes per worker and iteration, per key with measured bytes.
        self.bytes_ratio: dict[ProfileKey, float] = {}
        self._priors: dict[ProfileKey, np.ndarray] = {}
        # Per (job, placement): key and design rows (they depend on neither fit nor slot) and
        # the last prediction, valid while its key's parameter version is unchanged.
        self._rows: dict[tuple[str, Placement], _Entry] = {}
        self._last: dict[str, tuple[Placement, _Entry]] = {}  # each job's latest entry
        self._generation = 0  # bumped when the entries are dropped
        # Per key: sum of wire * moved, sum of wire^2, count, over the window's samples.
        self._byte_sums: dict[ProfileKey, list[float]] = {}
        self._model_version = 0  # bumped with every parameter change of any key
        # Each job's profile keys (one per hardware) by the rest of the key, and how often
        # the cluster changed: what job_version reads.
        self._keys_of: dict[tuple[str, str, int, int], list[_KeyState]] = {}
        self._cluster_epoch = 0
        # Bumped by whatever may end a quiet repeat's shortcut (:meth:`repeat_quiet`): a
        # key's parameters or exactness changed, entries dropped, measured bytes sampled.
        self._repeat_epoch = 0

    @property
    def model_version(self) -> int:
        return self._model_version

    @property
    def repeat_epoch(self) -> int:
        """What :meth:`repeat_quiet`'s answers hold under: while it stands, each stands."""
        return self._repeat_epoch

    def set_cluster(self, cluster: Cluster) -> None:
        """Continue on another cluster (testbed agents joined or left): fitted parameters
        and samples stay; cached design rows and predictions, which name servers, go."""
        self.cluster = cluster
        self._rows.clear()
        self._last.clear()
        self._generation += 1
        self._model_version += 1
        self._cluster_epoch += 1
        self._repeat_epoch += 1

    def job_version(self, job: JobSpec) -> Hashable:
        """The cluster's epoch and the parameter versions of every profile key the job
        has been predicted or measured under: a job's prediction depends on its key's
        parameters and the cluster only (a key not seen yet has its prior, which depends on
        the job, its hardware and the cluster)."""
        states = self._keys_of.get(self._base(job), ())
        return (self._cluster_epoch, tuple(s.version for s in states))

    def _base(self, job: JobSpec) -> tuple[str, str, int, int]:
        """A profile key without its hardware."""
        return (
            self.family(job).name,
            job.profile or job.model,
            job.batch_size,
            job.global_batch or 0,
        )

    # Family and key -------------------------------------------------------------------
    def family(self, job: JobSpec) -> PerfFamily:
        # Identity tests, not the enums' values (a property each): several calls per job.
        if job.arch is Arch.ALLREDUCE:
            kind = "allreduce"
        else:
            kind = "ps_async" if job.sync is SyncMode.ASYNC else "ps_sync"
        fam = self._by_kind.get(kind)
        if fam is None:
            name = self._choice.get(kind) or default_family(job)
            fam = self._families.get(name)
            if fam is None:
                fam = self._families[name] = FAMILIES[name]()
            self._by_kind[kind] = fam
        return fam

    def hardware(self, job: JobSpec, placement: Placement) -> str | None:
        """What the job computes on: the typed bundle chosen, else the job's pinned GPU type,
        else, for a job with per-type compute times, the GPU type of its workers' servers
        (the slowest of them: a synchronous step waits for its slowest worker)."""
        hw = placement.worker_type or job.gpu_type
        if hw is not None or not job.compute_s_by_type or not placement.workers:
            return hw
        servers = self.cluster.servers
        if len(placement.workers) == 1:  # one server: its type (the common case)
            return servers[placement.workers[0][0]].gpu_type
        types = {servers[s].gpu_type for s, _ in placement.workers}
        if len(types) == 1:
            return types.pop()
        return max(types, key=lambda t: (job.compute_s_for(t), t or ""))

    def key(self, job: JobSpec, placement: Placement) -> ProfileKey:
        return (*self._base(job), self.hardware(job, placement) or "")

    def params(self, job: JobSpec, placement: Placement) -> np.ndarray:
        hw = self.hardware(job, placement)
        fit = self.fits.get((*self._base(job), hw or ""))  # key(): hardware found once
        if fit is not None and fit.ok:
            return fit.params
        return self._prior(job, hw)

    def _prior(self, job: JobSpec, hw: str | None) -> np.ndarray:
        """The job's parameters on ``hw`` before any fit of its key."""
        fam = self.family(job)
        prior = fam.prior(job, hw, self.cluster)
        if self._lookup is not None:
            self._profiled_prior(fam, job, hw, prior)
        if self._overrides:
            for i, name in enumerate(fam.param_names):
                if name in self._overrides:
                    prior[i] = self._overrides[name]
        return prior

    def _profiled_prior(
        self, fam: PerfFamily, job: JobSpec, hw: str | None, prior: np.ndarray
    ) -> None:
        """Overwrite ``prior`` with what the profile measured for the job at the worker
        count it asks for (its requested, else its largest), where it has a cell."""
        assert self._lookup is not None
        workers = job.requested_workers or job.worker_cap
        device = hw if hw is not None else self._server_type
        match = self._lookup.match(job, workers, device, "host")
        if match is None or "compute_s" not in fam.param_names:
            return
        prior[fam.param_names.index("compute_s")] = match.compute_s
        # A cell measured spread over a cluster's hosts has its links' time in its comm.
        if match.cell.comm_s is None or workers < 2 or match.cell.placement not in (None, "host"):
            return
        # The family's communication on one server, at the job's worker count, made equal
        # to the cell's through a parameter that does not scale the links between servers
        # (a ring's fixed reduction time, a synchronous PS's in-server scale): a loopback
        # time is mostly per-message overhead, not bandwidth.
        ps = ((0, job.requested_ps or 1),) if job.arch is not Arch.ALLREDUCE else ()
        _, dm = fam.design(job, Placement(((0, workers),), ps), self.cluster)
        for name in _IN_SERVER_PARAMS:
            i = fam.param_names.index(name) if name in fam.param_names else -1
            if i >= 0 and dm[i] > 0:
                rest = float(dm @ prior) - dm[i] * prior[i]
                if match.comm_s > rest:
                    prior[i] = (match.comm_s - rest) / dm[i]
                return

    @property
    def _server_type(self) -> str | None:
        """The cluster's GPU type where its servers share one (what a profile's cells name);
        read once per cluster."""
        if self._server_type_of is None or self._server_type_of[0] is not self.cluster:
            types = {s.gpu_type for s in self.cluster.servers}
            self._server_type_of = (self.cluster, types.pop() if len(types) == 1 else None)
        return self._server_type_of[1]

    # RuntimeModel -----------------------------------------------------------------------
    def _entry(self, job: JobSpec, placement: Placement) -> _Entry:
        """The (job, placement)'s design rows and key, built once, and its last prediction."""
        last = self._last.get(job.job_id)
        if last is not None and last[0] is placement:  # a running job keeps its placement
            return last[1]
        ck = (job.job_id, placement)
        entry = self._rows.get(ck)
        if entry is None:
            if len(self._rows) > 200_000:  # bound memory on long simulations
                self._rows.clear()
                self._last.clear()
                self._generation += 1
                self._repeat_epoch += 1
            dc, dm = self.family(job).design(job, placement, self.cluster)
            key = self.key(job, placement)
            state = self._keys.get(key)
            if state is None:
                state = self._keys[key] = _KeyState(deque(maxlen=self._window))
                self._keys_of.setdefault(key[:4], []).append(state)
            entry = self._rows[ck] = _Entry(key, state, dc, dm, self._generation)
        self._last[job.job_id] = (placement, entry)
        return entry

    def _design(
        self, job: JobSpec, placement: Placement
    ) -> tuple[ProfileKey, np.ndarray, np.ndarray]:
        entry = self._entry(job, placement)
        return entry.key, entry.dc, entry.dm

    def iteration_parts(self, job: JobSpec, placement: Placement) -> tuple[float, float]:
        return self._parts(self._entry(job, placement), job, placement)

    def _parts(self, entry: _Entry, job: JobSpec, placement: Placement) -> tuple[float, float]:
        version = entry.state.version
        if entry.version != version:
            fit = self.fits.get(entry.key)  # the entry's key is the (job, placement)'s
            params = (
                fit.params
                if fit is not None and fit.ok
                else self._prior(job, self.hardware(job, placement))
            )
            entry.parts = (float(entry.dc @ params), float(entry.dm @ params))
            entry.version = version
        return entry.parts

    def prior_parts(self, job: JobSpec, placement: Placement) -> tuple[float, float]:
        """The (compute, communication) seconds per iteration the job's prior gives under
        ``placement``, whatever was measured: what :meth:`iteration_parts` returns before
        any fit of its key, computed without keeping anything (a truth built from the
        specs reads it once per job and placement)."""
        dc, dm = self.family(job).design(job, placement, self.cluster)
        params = self._prior(job, self.hardware(job, placement))
        return float(dc @ params), float(dm @ params)

    def units_per_iteration(self, job: JobSpec, placement: Placement) -> float:
        return self.family(job).units_per_iteration(job, placement)

    def bandwidth_gbps(self, job: JobSpec, placement: Placement) -> float | None:
        """The throughput a worker achieves while communicating under ``placement``, as the
        model now has it: the bytes it moves per iteration (sent plus received: the family's,
        scaled by the key's measured ``bytes_ratio``) over the predicted communication
        seconds, Gbit/s. None where the model predicts no communication."""
        _, comm = self.iteration_parts(job, placement)
        ratio = self.bytes_ratio.get(self.key(job, placement), 1.0)
        wire = self.family(job).wire_bytes(job, placement) * ratio
        if comm <= 0 or wire <= 0:
            return None
        return wire * 8 / (comm * GBIT)

    def observe(self, measurement: Measurement, job: JobSpec) -> None:
        if measurement.iterations > 0 and not measurement.placement.is_empty:
            self.observe_predicted(measurement, job)

    def observe_predicted(self, measurement: Measurement, job: JobSpec) -> float:
        """Record ``measurement``; return the iteration time the model predicted for it
        before (one look-up of the (job, placement) entry serves both)."""
        placement = measurement.placement
        # Inlined look-ups (entry, cached prediction): this runs once per running job and
        # slot, hundreds of thousands of times in a trace simulation.
        cached = self._last.get(job.job_id)
        entry = cached[1] if cached is not None and cached[0] is placement else None
        if entry is None:
            entry = self._entry(job, placement)
        state = entry.state
        pc, pm = (
            entry.parts if entry.version == state.version else self._parts(entry, job, placement)
        )
        if measurement.iterations <= 0 or placement.is_empty:
            return pc + pm
        compute, comm = measurement.compute_time_s, measurement.comm_time_s
        samples = state.samples
        last = entry.latest
        gbps = measurement.comm_gbps
        if (
            gbps is None
            and last is not None
            and last.compute == compute
            and last.comm == comm
            and last.moved is None
        ):
            # The same job and placement measured the same again (a steady job in a
            # noiseless simulation).
            repeated = self.observe_repeat(entry, job, placement)
            assert repeated is not None  # the entry was just looked up: its generation stands
            return repeated
        if not (math.isfinite(compute) and compute >= 0 and math.isfinite(comm) and comm >= 0):
            log.warning(
                "[perfmodel] ignoring measurement of %s in slot %d: times %s",
                measurement.job_id,
                measurement.slot,
                (compute, comm),
            )
            return pc + pm
        key = entry.key
        moved = None
        if gbps is not None and math.isfinite(gbps) and gbps > 0:
            moved = gbps * GBIT / 8 * comm  # bytes per worker-iteration
        if entry.wire < 0:
            entry.wire = self.family(job).wire_bytes(job, placement)
        if len(samples) == samples.maxlen and samples[0].moved is not None:
            self._count_bytes(key, samples[0], -1.0)
        sample = entry.latest = _new_sample((entry.dc, entry.dm, compute, comm, entry.wire, moved))
        samples.append(sample)
        if moved is not None:
            self._count_bytes(key, sample, 1.0)
            self._repeat_epoch += 1  # the key's window now holds measured bytes
        if not state.has_prior:
            self._priors[key] = self.params(job, placement).copy()
            state.has_prior = True
        self._settle(entry, sample, pc, pm)
        return pc + pm

    def repeat_handle(
        self, job: JobSpec, placement: Placement, compute: float, comm: float
    ) -> object | None:
        """What :meth:`observe_repeat` takes to record (compute, comm) of ``job`` under
        ``placement`` once more, where its latest sample is exactly that (no bytes
        measured); None where it is not."""
        cached = self._last.get(job.job_id)
        if cached is None or cached[0] is not placement:
            return None
        last = cached[1].latest
        if last is None or last.compute != compute or last.comm != comm or last.moved is not None:
            return None
        return cached[1]

    def observe_repeat(self, handle: object, job: JobSpec, placement: Placement) -> float | None:
        """:meth:`observe_predicted` of the measurement ``handle`` was made for, again (a
        steady job, each slot), without building the measurement. None where the model's
        entries were dropped since: observe in full."""
        entry = handle
        if not isinstance(entry, _Entry) or entry.generation != self._generation:
            return None
        # The entry is the (job, placement)'s while its generation stands (only a drop of
        # every entry replaces one); where the job's latest look-up was another placement's,
        # that is a cache and nothing more. Its latest sample goes once more into its key's
        # window (shared with the key's other jobs), checked against the prediction unless
        # found quiet before under the same parameters.
        last = entry.latest
        assert last is not None
        state = entry.state
        version = state.version
        pc, pm = entry.parts if entry.version == version else self._parts(entry, job, placement)
        samples = state.samples
        if len(samples) == samples.maxlen and samples[0].moved is not None:
            self._count_bytes(entry.key, samples[0], -1.0)
        samples.append(last)
        if not (entry.quiet is last and entry.quiet_version == version and state.exact):
            self._settle(entry, last, pc, pm)
        return pc + pm

    def repeat_quiet(
        self, handle: object
    ) -> tuple[Callable[[_Sample], None], object, float] | None:
        """Where the next :meth:`observe_repeat` of ``handle`` is quiet (the sample, once
        more, predicted to rounding by its key's exact fit) and its key's window holds no
        measured bytes: that call's whole effect, as (the window's append, the sample, the
        prediction). It stays so while :attr:`repeat_epoch` stands and no other call
        observes the handle's (job, placement): a steady job observed each slot for the
        price of an append."""
        entry = handle
        if not isinstance(entry, _Entry) or entry.generation != self._generation:
            return None
        state, last = entry.state, entry.latest
        version = state.version
        if (
            last is None
            or entry.version != version
            or entry.quiet is not last
            or entry.quiet_version != version
            or not state.exact
        ):
            return None
        sums = self._byte_sums.get(entry.key)
        if sums is not None and sums[2]:
            return None  # an eviction would change the key's byte sums
        pc, pm = entry.parts
        return state.samples.append, last, pc + pm

    def _settle(self, entry: _Entry, sample: _Sample, pc: float, pm: float) -> None:
        """Mark the key for a refit, unless its fit is exact and predicted ``sample`` to
        rounding too: a refit would change nothing (a converged model on noiseless data,
        what keeps long runs cheap)."""
        state = entry.state
        if state.exact and _to_rounding(pc, pm, sample.compute, sample.comm):
            entry.quiet, entry.quiet_version = sample, state.version
            return
        entry.quiet = None
        state.fresh += 1
        self._dirty.add(entry.key)

    def _count_bytes(self, key: ProfileKey, sample: _Sample, sign: float) -> None:
        """Keep the key's measured / model bytes (least squares through the origin over the
        window's samples that measured bytes) as running sums; unchanged when none did."""
        if sample.moved is None or sample.wire <= 0:
            return
        sums = self._byte_sums.setdefault(key, [0.0, 0.0, 0])
        sums[0] += sign * sample.wire * sample.moved
        sums[1] += sign * sample.wire * sample.wire
        sums[2] += int(sign)
        if sums[2] == 0:
            sums[0] = sums[1] = 0.0  # no drift left behind by the running sums
        elif sums[1] > 0:
            self.bytes_ratio[key] = sums[0] / sums[1]

    def refit(self) -> None:
        """Refit every key that received measurements since the last refit."""
        if not self._dirty:
            return
        for key in sorted(self._dirty):
            state = self._keys[key]
            samples = state.samples
            fam = self._families[key[0]]
            fresh, state.fresh = state.fresh, 0
            if self._explains(key, samples, fresh):
                continue
            design = np.vstack([s.dc for s in samples] + [s.dm for s in samples])
            target = np.array([s.compute for s in samples] + [s.comm for s in samples])
            prior = self._prior_for_key(key, fam)
            result = fit_linear(design, target, prior, fam.param_names)
            old = self.fits.get(key)
            if not result.ok and old is not None and old.ok:
                # A failed fit keeps the parameters in use (fit_linear logged why).
                continue
            self.fits[key] = result
            exact = bool(result.ok and result.rmse <= 1e-9)
            if exact != state.exact:
                state.exact = exact
                self._repeat_epoch += 1
            if old is None or not np.array_equal(old.params, result.params):
                state.version += 1
                self._model_version += 1
                self._repeat_epoch += 1
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "[perfmodel] refit %s: %s pinned=%s rmse=%.3g bytes measured/model=%s",
                    key,
                    dict(zip(fam.param_names, np.round(result.params, 6), strict=True)),
                    result.pinned,
                    result.rmse,
                    self.bytes_ratio.get(key),
                )
        self._dirty.clear()

    def _explains(self, key: ProfileKey, samples: deque[_Sample], fresh: int) -> bool:
        """True when the current fit already predicts every new sample exactly (so a refit
        would return the same parameters): the common case once a model has converged on
        noiseless data, and what keeps long simulations cheap."""
        fit = self.fits.get(key)
        if fit is None or not fit.ok or fit.rmse > 1e-9 or fresh > len(samples):
            return False
        p = fit.params
        for s in list(samples)[len(samples) - fresh :]:
            for row, measured in ((s.dc, s.compute), (s.dm, s.comm)):
                if abs(float(row @ p) - measured) > 1e-12 * max(1.0, abs(measured)):
                    return False
        return True

    def _prior_for_key(self, key: ProfileKey, fam: PerfFamily) -> np.ndarray:
        old = self.fits.get(key)
        if old is not None and old.ok:
            return old.params
        return self._priors.get(key, np.ones(len(fam.param_names)))
