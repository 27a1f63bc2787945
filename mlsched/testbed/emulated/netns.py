"""Network namespaces, veth pairs, bridges and addresses through the ``ip`` command.

Every call is one ``ip`` (or ``tc``) process with an argument list, never a shell line; a
failure raises :class:`EmulationError` naming the command and what it printed. Removal is
idempotent: removing what is already gone succeeds, so ``cluster down`` can run after a
crash at any step, and twice.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import shutil
import subprocess
from collections.abc import Sequence

from mlsched.core.errors import MlschedError

__all__ = [
    "EmulationError",
    "EmulationUnavailable",
    "add_netns",
    "add_veth",
    "delete_link",
    "delete_netns",
    "ip",
    "link_exists",
    "missing_requirements",
    "netns_exec",
    "netns_names",
    "netns_pids",
    "require_emulation",
    "root_networks",
    "run_command",
]

log = logging.getLogger(__name__)

_TIMEOUT_S = 30.0
# Linux capability bits (include/uapi/linux/capability.h): namespaces need both, adding
# one (`ip netns add`) mounts it under /run/netns.
_CAP_NET_ADMIN = 12
_CAP_SYS_ADMIN = 21
_GONE = ("Cannot find device", "No such file or directory", "does not exist")


class EmulationError(MlschedError):
    """A step of building or removing an emulated cluster failed."""


class EmulationUnavailable(EmulationError):
    """This machine cannot emulate a cluster (privileges or tools missing); says which."""


def _capabilities() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def missing_requirements() -> list[str]:
    """What this machine lacks to emulate a cluster (empty: nothing)."""
    missing = [
        f"the `{tool}` command (iproute2)" for tool in ("ip", "tc") if shutil.which(tool) is None
    ]
    # The effective capabilities decide, not the uid: root in a container may lack them.
    caps = _capabilities()
    if not (caps >> _CAP_NET_ADMIN) & 1:
        missing.append("root or CAP_NET_ADMIN (namespaces, links and tc shaping)")
    if not (caps >> _CAP_SYS_ADMIN) & 1:
        missing.append("root or CAP_SYS_ADMIN (`ip netns add` mounts the namespace)")
    return missing


def require_emulation() -> None:
    """Raise :class:`EmulationUnavailable` naming everything missing."""
    missing = missing_requirements()
    if missing:
        raise EmulationUnavailable(
            "an emulated cluster needs " + "; ".join(missing) + " (run it as root)"
        )


def run_command(argv: Sequence[str], *, ok_if_gone: bool = False) -> str:
    """Run ``argv``; its stdout. ``ok_if_gone``: a 'no such device/namespace' failure is
    success (removal of something already removed)."""
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise EmulationError(f"{' '.join(argv)}: {err}") from None
    if proc.returncode != 0:
        err_text = (proc.stderr or proc.stdout).strip()
        if ok_if_gone and any(g in err_text for g in _GONE):
            return ""
        raise EmulationError(f"`{' '.join(argv)}` failed ({proc.returncode}): {err_text}")
    return proc.stdout


def ip(*args: str, ns: str | None = None, ok_if_gone: bool = False) -> str:
    """``ip [-n NS] ARGS``."""
    return run_command(["ip", *(("-n", ns) if ns else ()), *args], ok_if_gone=ok_if_gone)


def netns_exec(ns: str, argv: Sequence[str]) -> list[str]:
    """The argument list that runs ``argv`` inside namespace ``ns``."""
    return ["ip", "netns", "exec", ns, *argv]


def netns_names() -> set[str]:
    out = run_command(["ip", "-j", "netns", "list"])
    return {str(entry["name"]) for entry in json.loads(out or "[]")}


def add_netns(name: str) -> None:
    ip("netns", "add", name)
    ip("link", "set", "lo", "up", ns=name)


def delete_netns(name: str) -> None:
    """Remove ``name`` (a namespace lives on while a process is in it: stop those first)."""
    if name in netns_names():
        ip("netns", "delete", name, ok_if_gone=True)


def netns_pids(name: str) -> list[int]:
    """Processes inside namespace ``name`` (none when it does not exist)."""
    if name not in netns_names():
        return []
    out = run_command(["ip", "netns", "pids", name], ok_if_gone=True)
    return [int(p) for p in out.split() if p.isdigit()]


def add_veth(end_a: str, ns_a: str | None, end_b: str, ns_b: str) -> None:
    """A veth pair created with each end already in its namespace (``ns_a`` None: the root
    namespace), so no temporary name ever appears elsewhere."""
    where_a = ("netns", ns_a) if ns_a else ()
    ip("link", "add", end_a, *where_a, "type", "veth", "peer", "name", end_b, "netns", ns_b)


def link_exists(name: str, ns: str | None = None) -> bool:
    out = ip("-j", "link", "show", ns=ns)
    return any(entry.get("ifname") == name for entry in json.loads(out or "[]"))


def delete_link(name: str, ns: str | None = None) -> None:
    ip("link", "delete", name, ns=ns, ok_if_gone=True)


def root_networks() -> list[ipaddress.IPv4Network]:
    """The IPv4 networks the root namespace routes or holds addresses in, in every routing
    table, the default route left out: where a new address could capture traffic."""
    nets: list[ipaddress.IPv4Network] = []
    for entry in json.loads(ip("-j", "-4", "route", "show", "table", "all") or "[]"):
        dst = str(entry.get("dst", ""))
        if dst and dst != "default":
            with contextlib.suppress(ValueError):
                nets.append(ipaddress.IPv4Network(dst, strict=False))
    for entry in json.loads(ip("-j", "-4", "addr", "show") or "[]"):
        for info in entry.get("addr_info", []):
            with contextlib.suppress(KeyError, ValueError):
                nets.append(
                    ipaddress.IPv4Network(f"{info['local']}/{info['prefixlen']}", strict=False)
                )
    return nets
