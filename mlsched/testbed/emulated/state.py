"""The state file of an emulated cluster: everything it made, written before it is made.

``cluster up`` records each namespace, root-namespace link and process in the state file
(JSON, replaced atomically) before creating it, so ``cluster down`` finds all of it after a
crash at any step. A process is recorded with its start time: ``down`` signals a pid only
while that pid is still the process it started, never one the kernel has reused.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mlsched.core.errors import SpecError

__all__ = [
    "ClusterState",
    "ProcessEntry",
    "allocation_lock",
    "default_state_path",
    "lock_dir",
    "process_start_time",
]

_VERSION = 1


def default_state_path() -> Path:
    """``$MLSCHED_CLUSTER_STATE``, else ``~/.cache/mlsched/cluster/state.json``."""
    env = os.environ.get("MLSCHED_CLUSTER_STATE")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "mlsched" / "cluster" / "state.json"


def process_start_time(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (``/proc/PID/stat`` field 22);
    None when no such process exists. With the pid it identifies one process for good."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    rest = text[text.rfind(")") + 2 :].split()
    try:
        return int(rest[19])
    except (IndexError, ValueError):
        return None


@dataclass
class ProcessEntry:
    role: str  # "controller" or "agent"
    name: str
    pid: int
    start_time: int  # process_start_time(pid) when started
    netns: str = ""  # "" = the root namespace
    log: str = ""

    def alive(self) -> bool:
        """True while ``pid`` is still this process (and not a zombie left to reap)."""
        if process_start_time(self.pid) != self.start_time:
            return False
        try:
            with open(f"/proc/{self.pid}/stat", encoding="ascii", errors="replace") as fh:
                return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False


@dataclass
class ClusterState:
    """What one emulated cluster consists of; ``path`` is where it is kept."""

    path: Path
    cluster_id: str
    spec: dict[str, Any]
    block: int
    namespaces: list[str] = field(default_factory=list)
    root_links: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)  # made outside the run directory
    processes: list[ProcessEntry] = field(default_factory=list)
    #: Each host's cpu control group, by namespace (made after it is listed here).
    cpu_groups: dict[str, str] = field(default_factory=dict)
    cpu_isolation: str = ""  # how the hosts' CPUs are shared, in words
    #: Where the cpu hierarchy is bound outside /sys for the agents (stand-in device
    #: slices), listed before it is mounted; "" when none.
    cpu_mount: str = ""
    controller: str = ""  # HOST:PORT once a controller process runs
    phase: str = "building"  # building -> up
    created_unix: float = field(default_factory=time.time)

    @property
    def run_dir(self) -> Path:
        return self.path.parent

    def save(self) -> None:
        """Write atomically: a crash leaves the old file or the new one, never half."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {k: v for k, v in asdict(self).items() if k != "path"}
        data["version"] = _VERSION
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".state-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=2)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def add_namespace(self, name: str) -> None:
        self.namespaces.append(name)
        self.save()

    def add_root_link(self, name: str) -> None:
        self.root_links.append(name)
        self.save()

    def add_dir(self, path: str) -> None:
        self.dirs.append(path)
        self.save()

    def add_cpu_group(self, netns: str, path: str) -> None:
        self.cpu_groups[netns] = path
        self.save()

    def add_process(self, entry: ProcessEntry) -> None:
        self.processes.append(entry)
        self.save()

    @classmethod
    def load(cls, path: Path) -> ClusterState:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise SpecError("state", str(path), f"a readable cluster state file ({err})") from None
        if not isinstance(raw, dict) or raw.get("version") != _VERSION:
            raise SpecError("state", str(path), f"a cluster state file of version {_VERSION}")
        raw.pop("version")
        procs = [ProcessEntry(**p) for p in raw.pop("processes", [])]
        return cls(path=path, processes=procs, **raw)


def lock_dir() -> Path:
    """Where the machine-wide lock (and the marker of a shared directory made) live."""
    return Path("/run/lock") if Path("/run/lock").is_dir() else Path(tempfile.gettempdir())


@contextlib.contextmanager
def allocation_lock() -> Iterator[None]:
    """Held while a cluster claims what clusters share (its control-plane block, the
    /etc/netns directory), so two clusters coming up or down at once never race."""
    with open(lock_dir() / "mlsched-emulation.lock", "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
