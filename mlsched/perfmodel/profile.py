"""A measured profile: what jobs of each model, kind and worker count cost on one machine.

``mlsched profile`` measures it (:mod:`mlsched.profiling`); the simulator takes it as truth
and the runtime model as a prior. One JSON file (schema in docs/profiles.md) names the
machine and device it was measured on, the settings every cell ran with, and one cell per
(model, kind, workers, device type, placement): compute and communication seconds per iteration,
bytes moved per iteration, start-up to the first iteration, checkpoint save and load
seconds, and the cost of a restart. A cell imported from Gavel's throughput table carries
only its iteration time (the other fields are null). A cell measured on one machine has no
placement (its bytes crossed no link); one measured through a cluster's agents names the
shape its processes had there (:data:`PLACEMENTS`), its communication measured across that
cluster's links.

Files are hostile until checked: :func:`load_profile` refuses a malformed file naming the
field (``cells[3].compute_s``), and :meth:`Profile.check_matches` a file measured on other
hardware or with other settings.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from mlsched.core.errors import SpecError

__all__ = [
    "KINDS",
    "PLACEMENTS",
    "SCHEMA",
    "VERSION",
    "Cell",
    "Profile",
    "can_spread",
    "cell_dict",
    "from_gavel",
    "kind_arch",
    "load_profile",
    "mean_profile",
    "merge",
    "to_gavel",
]

SCHEMA = "mlsched.profile"
VERSION = 1
#: How a job's processes train: PS asynchronous, PS synchronous, a torchrun (DDP) ring,
#: a Horovod ring.
KINDS = ("ps_async", "ps_sync", "ring", "horovod")
#: Where a cluster-measured cell's processes ran: all on one host, on hosts of one rack,
#: on hosts of two or more racks.
PLACEMENTS = ("host", "rack", "racks")


def kind_arch(kind: str) -> tuple[str, str]:
    """The (architecture, mode) a kind's job trains with: ``("ps", "async")`` etc."""
    return {"ps_async": ("ps", "async"), "ps_sync": ("ps", "sync")}.get(kind, ("allreduce", "sync"))


def can_spread(kind: str, workers: int) -> bool:
    """Whether a cell's processes can span hosts: it needs two (a PS counts)."""
    return workers + (1 if kind_arch(kind)[0] == "ps" else 0) >= 2


_MAX_BYTES = 16 << 20
_MAX_CELLS = 100_000


#: A cell's measured figures that may be missing (None: not measured, or not of its kind).
_OPTIONAL = (
    "compute_s",
    "comm_s",
    "bytes_per_iteration",
    "startup_s",
    "checkpoint_save_s",
    "checkpoint_load_s",
    "restart_s",
)


@dataclass(frozen=True)
class Cell:
    """One measured point of the grid. Times are seconds, bytes per iteration per worker;
    an iteration is one worker's step (PS async: one push; otherwise one synchronous step).
    None: not measured (an imported cell, or a part a kind does not have)."""

    model: str
    kind: str
    workers: int
    device_type: str
    iteration_s: float
    compute_s: float | None = None
    comm_s: float | None = None
    bytes_per_iteration: float | None = None
    startup_s: float | None = None  # process start to its first iteration, fresh
    checkpoint_save_s: float | None = None
    checkpoint_load_s: float | None = None
    restart_s: float | None = None  # a stop at a checkpoint to the resumed first iteration
    iterations: int = 0  # how many iterations the means are over
    source: str = "measured"  # or "gavel"
    batch_size: int | None = None  # per worker, as measured (None: the settings')
    image_size: int | None = None  # pixels per side, as measured (None: the settings')
    #: The shape it was measured in on a cluster (:data:`PLACEMENTS`); None: on one
    #: machine, where no byte crossed a link.
    placement: str | None = None

    @property
    def key(self) -> tuple[str, str, int, str, str]:
        return (self.model, self.kind, self.workers, self.device_type, self.placement or "")

    def check(self, where: str = "cell") -> Cell:
        """Self, or SpecError naming the first field that does not hold what it should."""
        if not isinstance(self.model, str) or not re.fullmatch(
            r"[A-Za-z0-9_.+-]{1,64}", self.model
        ):
            raise SpecError(f"{where}.model", self.model, "a model name of 1-64 characters")
        if self.kind not in KINDS:
            raise SpecError(f"{where}.kind", self.kind, f"one of {', '.join(KINDS)}")
        if not _count(self.workers) or not 1 <= self.workers <= 4096:
            raise SpecError(f"{where}.workers", self.workers, "an integer in 1..4096")
        if not isinstance(self.device_type, str) or not 1 <= len(self.device_type) <= 64:
            raise SpecError(f"{where}.device_type", self.device_type, "a device type name")
        if not _seconds(self.iteration_s) or self.iteration_s <= 0:
            raise SpecError(f"{where}.iteration_s", self.iteration_s, "seconds > 0")
        for name in _OPTIONAL:
            value = getattr(self, name)
            if value is not None and not _seconds(value):
                raise SpecError(f"{where}.{name}", value, "a finite number >= 0, or null")
        if not _count(self.iterations) or self.iterations < 0:
            raise SpecError(f"{where}.iterations", self.iterations, "an integer >= 0")
        if self.source not in ("measured", "gavel"):
            raise SpecError(f"{where}.source", self.source, "measured or gavel")
        for name in ("batch_size", "image_size"):
            value = getattr(self, name)
            if value is not None and (not _count(value) or value < 1):
                raise SpecError(f"{where}.{name}", value, "an integer >= 1, or null")
        if self.placement is not None and self.placement not in PLACEMENTS:
            raise SpecError(
                f"{where}.placement", self.placement, f"one of {', '.join(PLACEMENTS)}, or null"
            )
        if self.placement == "host" or self.placement is None:
            return self
        if not can_spread(self.kind, self.workers):
            raise SpecError(f"{where}.placement", self.placement, "host (one process per host)")
        return self


@dataclass(frozen=True)
class Profile:
    """A profile file's content."""

    machine: dict[str, Any]  # hostname, cpu, cores, python, torch
    device: dict[str, Any]  # type ("cpu", "cuda"), name, count
    settings: dict[str, Any]  # what every cell ran with (steps, batch size, image size...)
    cells: tuple[Cell, ...] = ()
    created_unix: float = 0.0
    version: int = VERSION

    def cell(
        self, model: str, kind: str, workers: int, device_type: str, placement: str | None = None
    ) -> Cell | None:
        return self._index().get((model, kind, workers, device_type, placement or ""))

    def _index(self) -> dict[tuple[str, str, int, str, str], Cell]:
        return {c.key: c for c in self.cells}

    def with_cell(self, cell: Cell) -> Profile:
        """This profile with ``cell`` added (replacing one of the same key)."""
        kept = [c for c in self.cells if c.key != cell.key]
        return replace(self, cells=(*kept, cell.check()))

    def check_matches(self, machine: Mapping[str, Any], device: Mapping[str, Any],
                      settings: Mapping[str, Any]) -> None:  # fmt: skip
        """SpecError naming the first field in which this file differs from a run with
        ``machine``, ``device`` and ``settings`` (a run resumes only its own file)."""
        for part, mine, theirs in (
            ("machine", self.machine, machine),
            ("device", self.device, device),
            ("settings", self.settings, settings),
        ):
            for name in sorted(set(mine) | set(theirs)):
                if mine.get(name) != theirs.get(name):
                    raise SpecError(
                        f"{part}.{name}",
                        mine.get(name),
                        f"{theirs.get(name)!r}, as this run measures (another file, or --out)",
                    )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "version": self.version,
            "created_unix": self.created_unix,
            "machine": dict(self.machine),
            "device": dict(self.device),
            "settings": dict(self.settings),
            "cells": [cell_dict(c) for c in sorted(self.cells, key=lambda c: c.key)],
        }

    @classmethod
    def from_dict(cls, raw: Any) -> Profile:
        if not isinstance(raw, dict):
            raise SpecError("profile", type(raw).__name__, "a JSON object")
        if raw.get("schema") != SCHEMA:
            raise SpecError("schema", raw.get("schema"), f"{SCHEMA!r}")
        if raw.get("version") != VERSION:
            raise SpecError("version", raw.get("version"), f"{VERSION} (this release's)")
        known = {"schema", "version", "created_unix", "machine", "device", "settings", "cells"}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise SpecError(
                unknown[0], raw[unknown[0]], f"a field among {', '.join(sorted(known))}"
            )
        for name in ("machine", "device", "settings"):
            if not isinstance(raw.get(name), dict):
                raise SpecError(name, raw.get(name), "a JSON object")
        created = raw.get("created_unix", 0.0)
        if not _seconds(created):
            raise SpecError("created_unix", created, "a time in seconds since 1970")
        cells_raw = raw.get("cells")
        if not isinstance(cells_raw, list) or len(cells_raw) > _MAX_CELLS:
            raise SpecError("cells", type(cells_raw).__name__, f"a list of at most {_MAX_CELLS}")
        cells: list[Cell] = []
        seen: set[tuple[str, str, int, str, str]] = set()
        names = {f.name for f in fields(Cell)}
        for i, c in enumerate(cells_raw):
            where = f"cells[{i}]"
            if not isinstance(c, dict):
                raise SpecError(where, type(c).__name__, "a JSON object")
            extra = sorted(set(c) - names)
            if extra:
                raise SpecError(f"{where}.{extra[0]}", c[extra[0]], "a field of a cell")
            missing = [n for n in ("model", "kind", "workers", "device_type", "iteration_s")
                       if n not in c]  # fmt: skip
            if missing:
                raise SpecError(f"{where}.{missing[0]}", None, "present")
            cell = Cell(**c).check(where)
            if cell.key in seen:
                raise SpecError(
                    where, list(cell.key), "one cell per model, kind, workers, device, placement"
                )
            seen.add(cell.key)
            cells.append(cell)
        return cls(
            machine=dict(raw["machine"]),
            device=dict(raw["device"]),
            settings=dict(raw["settings"]),
            cells=tuple(cells),
            created_unix=float(created),
        )

    def save(self, path: Path) -> None:
        """Write atomically: an interrupted run leaves the last complete file."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".profile-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(self.to_dict(), fh, indent=1)
                fh.write("\n")
            os.chmod(tmp, 0o644)  # a profile is for others to read (mkstemp makes it 0600)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def load_profile(path: Path) -> Profile:
    """The profile in ``path``; SpecError naming the field of a malformed one."""
    try:
        size = path.stat().st_size
        if size > _MAX_BYTES:
            raise SpecError("profile", str(path), f"a file of at most {_MAX_BYTES >> 20} MiB")
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise SpecError("profile", str(path), f"a readable file ({err.strerror})") from None
    except ValueError as err:
        raise SpecError("profile", str(path), f"JSON ({err})") from None
    return Profile.from_dict(raw)


# Gavel's throughput table --------------------------------------------------------------------
# {worker type: {"('<model> (batch size <b>)', <scale factor>)": {"null": steps/s, ...}}}
_GAVEL_KEY = re.compile(r"^\('(?P<name>.+?)(?: \(batch size (?P<batch>\d+)\))?', (?P<scale>\d+)\)$")


def to_gavel(profile: Profile, *, kind: str = "ring") -> dict[str, dict[str, dict[str, float]]]:
    """The profile's cells of ``kind`` as Gavel's throughput table: per device type, per
    ``('<model> (batch size <b>)', <workers>)``, isolated steps per second (``null``)."""
    batch = int(profile.settings.get("batch_size", 0) or 0)
    out: dict[str, dict[str, dict[str, float]]] = {}
    # Gavel has one entry per job and scale: a one-machine cell where there is one, else
    # the most packed shape measured.
    rank: dict[str | None, int] = {None: 0, **{p: i + 1 for i, p in enumerate(PLACEMENTS)}}
    chosen: dict[tuple[str, str, int, str], Cell] = {}
    for c in profile.cells:
        if c.kind != kind:
            continue
        key = (c.model, c.kind, c.workers, c.device_type)
        if key not in chosen or rank[c.placement] < rank[chosen[key].placement]:
            chosen[key] = c
    for c in sorted(chosen.values(), key=lambda c: c.key):
        name = f"{c.model} (batch size {batch})" if batch else c.model
        imported = re.fullmatch(r"(?P<name>.+)-b(?P<batch>\d+)", c.model)
        if c.source == "gavel":  # its own job type back: "LM-b10" -> "LM (batch size 10)"
            name = f"{imported['name']} (batch size {imported['batch']})" if imported else c.model
        out.setdefault(c.device_type, {})[f"('{name}', {c.workers})"] = {
            "null": 1.0 / c.iteration_s
        }
    return out


def from_gavel(
    table: Any, *, kind: str = "ring", where: str = "throughputs"
) -> tuple[list[Cell], list[str]]:
    """Cells from Gavel's throughput table (isolated throughputs only; co-location pairs
    are not a profile's), and the entries left out: a throughput of 0 is Gavel's "does not
    run on this type". A malformed entry is refused with its path named."""
    if kind not in KINDS:
        raise SpecError("kind", kind, f"one of {', '.join(KINDS)}")
    if not isinstance(table, dict):
        raise SpecError(where, type(table).__name__, "a mapping of device type")
    cells: list[Cell] = []
    left_out: list[str] = []
    for device, jobs in table.items():
        if not isinstance(jobs, dict):
            raise SpecError(f"{where}.{device}", type(jobs).__name__, "a mapping of job type")
        for key, entry in jobs.items():
            match = _GAVEL_KEY.match(str(key))
            if match is None:
                raise SpecError(f"{where}.{device}", key, "('<model> (batch size <b>)', <scale>)")
            tput = entry.get("null") if isinstance(entry, dict) else None
            if not _seconds(tput):
                raise SpecError(f"{where}.{device}.{key}.null", tput, "steps per second >= 0")
            if not tput:
                left_out.append(f"{device} {key}")
                continue
            name = re.sub(r"[^A-Za-z0-9_.+-]", "_", match["name"])[:48]
            batch = f"-b{match['batch']}" if match["batch"] else ""
            cells.append(
                Cell(
                    model=f"{name}{batch}",
                    kind=kind,
                    workers=int(match["scale"]),
                    device_type=str(device),
                    iteration_s=1.0 / float(tput),
                    source="gavel",
                ).check(f"{where}.{device}.{key}")
            )
    return cells, left_out


def mean_profile(first: Profile, second: Profile) -> Profile:
    """The two measurements of the same cells averaged, field by field (a field one of them
    lacks is the other's); ``first``'s machine, device and settings. A cell measured in one
    only is kept as it is. The means are over both measurements' iterations."""
    mine, theirs = first._index(), second._index()
    cells = []
    for cell in first.cells:
        other = theirs.get(cell.key)
        if other is None:
            cells.append(cell)
            continue
        values: dict[str, Any] = {}
        for name in ("iteration_s", *_OPTIONAL):
            a, b = getattr(cell, name), getattr(other, name)
            values[name] = a if b is None else b if a is None else (a + b) / 2
        cells.append(replace(cell, **values, iterations=cell.iterations + other.iterations))
    cells += [c for k, c in theirs.items() if k not in mine]
    return replace(first, cells=tuple(c.check() for c in cells))


def merge(profile: Profile, cells: Iterable[Cell]) -> Profile:
    for cell in cells:
        profile = profile.with_cell(cell)
    return profile


def cell_dict(cell: Cell) -> dict[str, Any]:
    """A cell as the file holds it."""
    out = asdict(cell)
    if out["placement"] is None:  # one-machine cells read as before the field existed
        del out["placement"]
    return out


def _seconds(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
