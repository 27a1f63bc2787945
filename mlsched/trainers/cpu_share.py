"""CPU shares of the machine through the cgroup cpu controller: each emulated host's, and
each task's on a stand-in device.

Emulated hosts are processes of one machine: without a limit, a job's speed would depend on
whatever else runs anywhere on it, which no model of a real cluster has. Each host gets a
control group with a CFS bandwidth limit (``cpu.cfs_quota_us`` under cgroup v1,
``cpu.max`` under v2) of ``host_cpus`` cores; its agent is started inside the group, so the
agent and every training process it launches share that host's cores and no other's.

A quota is only a ceiling: beside enough busy processes outside the groups, a host would
get its fair share of a crowded machine, less than its quota (the kernel weighs each
session's processes together as one, so a few tools started in sessions of their own
took a host from 0.40 to 0.15 cores). So each group, and each of
its ancestors up to the hierarchy's root, also gets the largest scheduling weight
(``cpu.shares`` 262144 under v1, ``cpu.weight`` 10000 under v2): when contended, the
emulated hosts run first, and their quotas, summing to less than the machine's cores, keep
the remainder for everything else (the controller included). Together the two make the
quota a reservation: a host runs at its share whatever else runs on the machine.

Groups live at ``<cpu hierarchy>/mlsched/<cluster id>/<host>``; the state file lists them
before they are made, and teardown removes them (after every process in them is gone).

**Stand-in devices** (:class:`DeviceSlices`): on a machine without GPUs a declared GPU is a
stand-in, not a resource of its own, so two jobs on one host would slow each other down. With
``device_cores`` set, the agent (and ``mlsched profile measure``) runs each task's processes in
a group of their own (:class:`SliceGroups`, inside the group the agent runs in, so a host's
share still bounds them): ``device_cores`` per training rank, ``ps_cores`` for a parameter
server. A job's speed then depends on its own devices, as on GPUs, and a profile measured in
the same slices says what it costs anywhere they are given.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mlsched.core.errors import SpecError

__all__ = [
    "CPU_MOUNT_ENV",
    "PERIOD_US",
    "WEIGHT",
    "CpuControl",
    "DeviceSlices",
    "SliceGroups",
    "cpu_control",
    "group_pids",
    "host_group",
    "inside",
    "join_argv",
    "make_group",
    "own_group",
    "remove_group",
    "usable_cores",
]

#: The CFS period, microseconds: a quota is cores x this. 10 ms, not the kernel's default
#: 100 ms: a host that used its share waits out the rest of a period, and at 100 ms an
#: iteration of tens of milliseconds stretched by such a pause now and then (the locality
#: test's model error went from a few % to 31 % in one slot).
PERIOD_US = 10_000
#: The largest weights each version accepts (the kernel's bounds): a reservation, not a tilt.
WEIGHT = {1: ("cpu.shares", "262144"), 2: ("cpu.weight", "10000")}
_MOUNTS = Path("/proc/self/mounts")


@dataclass(frozen=True)
class CpuControl:
    """Where the cpu controller can be driven from: its hierarchy and cgroup version."""

    root: Path
    version: int  # 1: the v1 ``cpu`` hierarchy; 2: the unified hierarchy


#: A mount of the cpu hierarchy to use before any other (an emulated cluster's own bind,
#: which it sets for its processes): inside a network namespace every cluster's bind is
#: visible, and another cluster's, or a crashed one's, may be unmounted under the agent.
CPU_MOUNT_ENV = "MLSCHED_CPU_MOUNT"


def cpu_control(mounts: Path = _MOUNTS) -> tuple[CpuControl | None, str]:
    """The writable cpu controller of this machine, or None with the reason why not: the
    mount :data:`CPU_MOUNT_ENV` names when it is one, else the first."""
    try:
        lines = mounts.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        return None, f"cannot read {mounts}: {err}"
    preferred = os.environ.get(CPU_MOUNT_ENV)
    if preferred:
        first = [ln for ln in lines if len(ln.split()) >= 4 and ln.split()[1] == preferred]
        lines = first + [ln for ln in lines if ln not in first]
    for line in lines:
        parts = line.split()
        if len(parts) < 4:
            continue
        where, kind, options = Path(parts[1]), parts[2], parts[3].split(",")
        if kind == "cgroup" and "cpu" in options:
            found = CpuControl(where, 1)
        elif kind == "cgroup2" and "cpu" in _controllers(where):
            found = CpuControl(where, 2)
        else:
            continue
        if os.access(where, os.W_OK):
            return found, ""
        return None, f"the cpu controller at {where} is not writable (run as root)"
    return None, "no cgroup cpu controller is mounted"


def usable_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0))


def host_group(control: CpuControl, cluster_id: str, host: str) -> Path:
    return control.root / "mlsched" / cluster_id / host


def make_group(control: CpuControl, path: Path, cores: float) -> None:
    """Create ``path`` limited to ``cores`` CPUs (``cores`` x :data:`PERIOD_US` of run time
    per period)."""
    quota = max(1000, round(cores * PERIOD_US))  # the kernel's floor is 1 ms (0.1 core)
    weight_file, weight = WEIGHT[control.version]
    for parent in reversed(path.parents):
        if control.root in parent.parents:
            parent.mkdir(exist_ok=True)
            if control.version == 2:  # a v2 child uses the controller only where delegated
                _write(parent / "cgroup.subtree_control", "+cpu")
            _write(parent / weight_file, weight)
        elif parent == control.root and control.version == 2:
            _write(parent / "cgroup.subtree_control", "+cpu")
    path.mkdir(exist_ok=True)
    _write(path / weight_file, weight)
    if control.version == 2:
        _write(path / "cpu.max", f"{quota} {PERIOD_US}")
    else:
        _write(path / "cpu.cfs_period_us", str(PERIOD_US))
        _write(path / "cpu.cfs_quota_us", str(quota))


def join_argv(path: Path, argv: list[str]) -> list[str]:
    """``argv`` started inside group ``path``: a shell moves itself in, then becomes the
    command, so the command and everything it starts are in the group from their first
    instruction."""
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(path / "cgroup.procs"), *argv]


@contextlib.contextmanager
def inside(control: CpuControl, name: str, cores: float) -> Iterator[Path]:
    """This process, and every process it starts meanwhile, limited to ``cores`` CPUs (a
    group ``<hierarchy>/mlsched/<name>``); on leaving, this process moves back to the
    hierarchy's root and the group is removed (anything still in it is killed)."""
    path = control.root / "mlsched" / name
    make_group(control, path, cores)
    try:
        _write(path / "cgroup.procs", str(os.getpid()))
        yield path
    finally:
        with contextlib.suppress(OSError):
            _write(control.root / "cgroup.procs", str(os.getpid()))
        remove_group(path, stop_at=control.root)


def group_pids(path: Path) -> list[int]:
    try:
        text = (path / "cgroup.procs").read_text(encoding="ascii")
    except OSError:
        return []
    return [int(p) for p in text.split()]


def remove_group(path: Path, *, stop_at: Path) -> bool:
    """Kill what is left in ``path`` and remove it, then its empty parents up to (not
    including) ``stop_at``. True when it existed."""
    if not path.is_dir():
        return False
    for child in _subgroups(path):  # a host's task groups go first (a group with any won't)
        remove_group(child, stop_at=path)
    for _ in range(50):
        pids = [p for p in group_pids(path) if p != os.getpid()]
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    _rmdir(path)
    for parent in path.parents:
        if parent == stop_at or stop_at not in parent.parents:
            break
        with contextlib.suppress(OSError):  # not empty: another cluster's groups
            parent.rmdir()
    return True


def _subgroups(path: Path) -> list[Path]:
    try:
        return [c for c in path.iterdir() if c.is_dir() and (c / "cgroup.procs").exists()]
    except OSError:
        return []


def _rmdir(path: Path) -> None:
    for _ in range(50):  # a group empties a moment after its last process is reaped
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)
    path.rmdir()


def own_group(control: CpuControl, proc_cgroup: Path = Path("/proc/self/cgroup")) -> Path:
    """The group this process runs in under ``control``'s hierarchy (its root if unknown)."""
    try:
        lines = proc_cgroup.read_text(encoding="ascii").splitlines()
    except OSError:
        return control.root
    for line in lines:
        _, controllers, rel = [*line.split(":", 2), "", ""][:3]
        ours = controllers == "" if control.version == 2 else "cpu" in controllers.split(",")
        if ours and rel.startswith("/"):
            return control.root / rel.lstrip("/") if rel != "/" else control.root
    return control.root


@dataclass(frozen=True)
class DeviceSlices:
    """The CPU share of each stand-in device: ``device_cores`` per training rank, and
    ``ps_cores`` for a parameter server (which trains on no device)."""

    device_cores: float
    ps_cores: float

    def __post_init__(self) -> None:
        for name in ("device_cores", "ps_cores"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (0.1 <= value <= 4096)
            ):
                raise SpecError(name, value, "cores in 0.1..4096 (the kernel's floor is 0.1)")

    @classmethod
    def of(cls, device_cores: float | None, ps_cores: float | None) -> DeviceSlices | None:
        """The slices of two optional settings (None: no slices); a PS's share defaults
        to a device's, and is refused without one. SpecError names the field."""
        if device_cores is None:
            if ps_cores is not None:
                raise SpecError("ps_cores", ps_cores, "set only with device_cores")
            return None
        return cls(device_cores, device_cores if ps_cores is None else ps_cores)

    def cores(self, *, ps: bool, ranks: int) -> float:
        """The share of a task: a parameter server's, or ``ranks`` training ranks'."""
        return self.ps_cores if ps else self.device_cores * max(1, ranks)

    def to_dict(self) -> dict[str, float]:
        return {"device_cores": self.device_cores, "ps_cores": self.ps_cores}


class SliceGroups:
    """The groups of one owner's tasks (an agent's, a profile run's), under ``parent``."""

    def __init__(self, control: CpuControl, parent: Path, slices: DeviceSlices) -> None:
        self.control = control
        self.parent = parent
        self.slices = slices

    @classmethod
    def here(cls, slices: DeviceSlices, name: str) -> SliceGroups:
        """Groups under the one this process runs in (an emulated host's, or the
        hierarchy's root: then under ``mlsched/``), in a folder ``name``. RuntimeError when
        the cpu controller is not writable here."""
        control, why = cpu_control()
        if control is None:
            raise RuntimeError(f"stand-in device slices need the cgroup cpu controller: {why}")
        own = own_group(control)
        if control.version == 2 and own != control.root:
            # v2 allows no processes in a group whose children use a controller: this
            # process moves into a leaf of its own first.
            make_group(control, own / "owner", 4096)
            _write(own / "owner" / "cgroup.procs", str(os.getpid()))
        base = own if own != control.root else control.root / "mlsched"
        return cls(control, base / name, slices)

    def argv(self, name: str, cores: float, argv: list[str]) -> list[str]:
        """``argv`` started in a new group ``name`` of ``cores`` CPUs."""
        path = self.parent / name
        make_group(self.control, path, cores)
        return join_argv(path, argv)

    def release(self, name: str) -> None:
        """Remove group ``name`` (killing what is left in it)."""
        remove_group(self.parent / name, stop_at=self.parent)

    def close(self) -> None:
        """Remove every group, then the folder (and its empty parents under ``mlsched/``)."""
        remove_group(self.parent, stop_at=self.control.root / "mlsched")


def _controllers(root: Path) -> list[str]:
    try:
        return (root / "cgroup.controllers").read_text(encoding="ascii").split()
    except OSError:
        return []


def _write(path: Path, text: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(text)
