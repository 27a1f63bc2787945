"""An emulated cluster: its network, its credentials and the processes started in it.

:class:`EmulatedCluster` builds the network of an :class:`EmulationSpec` (recording each
part in the state file first), starts ``mlsched agent`` processes inside the host
namespaces (``ip netns exec``) and, for ``mlsched cluster up``, a controller process in the
root namespace. :func:`teardown` removes everything a state file lists (processes first,
then namespaces and links, then the file); it is what ``close()`` and ``cluster down``
run, after a crash as well, and running it twice is harmless.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from mlsched.core.cluster import Topology
from mlsched.core.errors import SpecError
from mlsched.testbed.emulated.netns import (
    EmulationError,
    netns_exec,
    netns_names,
    netns_pids,
    require_emulation,
)
from mlsched.testbed.emulated.network import build_network, remove_network
from mlsched.testbed.emulated.state import (
    ClusterState,
    ProcessEntry,
    default_state_path,
    process_start_time,
)
from mlsched.testbed.emulated.topology import EmulationSpec, HostPlan, NetworkPlan, plan_network
from mlsched.trainers.cpu_share import (
    CPU_MOUNT_ENV,
    cpu_control,
    host_group,
    join_argv,
    make_group,
    remove_group,
    usable_cores,
)

__all__ = ["EmulatedCluster", "teardown"]

log = logging.getLogger(__name__)

_AGENT_GRACE_S = 10.0


class EmulatedCluster:
    """A built emulated cluster. Use as a context manager, or call :meth:`close`."""

    def __init__(self, state: ClusterState, plan: NetworkPlan) -> None:
        self.state = state
        self.plan = plan
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._token: str | None = None
        self._agent_secret: str | None = None

    # Life cycle ---------------------------------------------------------------------------
    @classmethod
    def create(cls, spec: EmulationSpec, state_path: Path | None = None) -> EmulatedCluster:
        """Build the network of ``spec``; its state goes to ``state_path`` (default:
        :func:`default_state_path`), whose directory also holds logs and credentials."""
        require_emulation()
        path = Path(state_path or default_state_path()).absolute()
        _refuse_live_state(path)
        share = spec.cpu_share(usable_cores()) if spec.isolate_cpu else 0.0  # refused early
        state = ClusterState(path, cluster_id="", spec=spec.to_dict(), block=-1)
        try:
            plan = build_network(spec, state)  # removes what it made when it fails
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            raise
        try:
            _isolate_hosts(plan, state, share)
        except BaseException:
            teardown(state)
            raise
        return cls(state, plan)

    @classmethod
    def attach(cls, state_path: Path) -> EmulatedCluster:
        """The cluster a state file describes (as ``cluster up`` left it)."""
        state = ClusterState.load(state_path)
        spec = EmulationSpec.from_dict(state.spec)
        return cls(state, plan_network(spec, state.cluster_id, state.block))

    def __enter__(self) -> EmulatedCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self, *, grace_s: float = 15.0) -> list[str]:
        """Stop every process and remove every namespace and link; what was removed."""
        removed = teardown(self.state, grace_s=grace_s)
        for proc in self._children.values():  # reap, so no zombie outlives the cluster
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1.0)
        self._children.clear()
        return removed

    # What it is ---------------------------------------------------------------------------
    @property
    def spec(self) -> EmulationSpec:
        return self.plan.spec

    @property
    def run_dir(self) -> Path:
        """The state file's directory: the state and the credentials."""
        return self.state.run_dir

    @property
    def files(self) -> Path:
        """This cluster's own files: logs, agents' task directories, the controller's
        database and checkpoints (``RUN/<cluster id>``, so every ``up`` starts afresh and an
        earlier cluster's files stay for reading)."""
        return self.run_dir / self.plan.cluster_id

    @property
    def controller_host(self) -> str:
        """The controller's address in the root namespace, reachable from every host."""
        return self.plan.controller_addr

    def topology(self) -> Topology:
        """The link speeds a controller should plan with (:meth:`EmulationSpec.link_topology`)."""
        return self.spec.link_topology()

    def credentials(self) -> tuple[str, str]:
        """(user token, agent secret), made once and kept in owner-only files of the run
        directory (``token``, ``agent-secret``): the controller listens beyond loopback."""
        if self._token is None or self._agent_secret is None:
            self._token = _secret_file(self.run_dir / "token")
            self._agent_secret = _secret_file(self.run_dir / "agent-secret")
        return self._token, self._agent_secret

    @property
    def cpu_isolation(self) -> str:
        """How the hosts share the machine's CPUs, in words."""
        return self.state.cpu_isolation

    def exec_argv(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside host ``host``'s namespace."""
        return netns_exec(self.plan.host(host).netns, argv)

    # Processes ----------------------------------------------------------------------------
    def spawn(
        self, role: str, name: str, argv: Sequence[str], *, netns: str = ""
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` (in ``netns``, or the root namespace) in its own session, output to
        ``logs/NAME.log`` of :attr:`files`, recorded in the state file at once."""
        logs = self.files / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"{name}.log"
        env = {**os.environ}
        env.setdefault("OMP_NUM_THREADS", "1")  # a few cores shared by every host
        if self.state.cpu_mount:
            env[CPU_MOUNT_ENV] = self.state.cpu_mount  # this cluster's bind, not another's
        command = netns_exec(netns, argv) if netns else list(argv)
        group = self.state.cpu_groups.get(netns) if netns else None
        if group:
            command = join_argv(Path(group), command)
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
            )
        start = process_start_time(proc.pid) or 0
        self.state.add_process(ProcessEntry(role, name, proc.pid, start, netns, str(log_path)))
        self._children[name] = proc
        return proc

    def agent_argv(self, host: HostPlan, controller: str) -> list[str]:
        """``mlsched agent`` for ``host``: its declared resources, rack and pool, its data
        address as ``--host`` (so its tasks' traffic crosses the shaped links) and its own
        credential."""
        from mlsched.net.auth import agent_token, write_private_file

        _, secret = self.credentials()
        token_file = self.files / "agents" / f"{host.name}.token"
        token_file.parent.mkdir(parents=True, exist_ok=True)
        write_private_file(token_file, (agent_token(secret, host.name) + "\n").encode())
        spec = self.spec
        argv = [
            sys.executable, "-m", "mlsched.agent", "--controller", controller,
            "--name", host.name, "--host", host.data_addr, "--rack", host.rack,
            "--pool", host.pool, "--nic-gbps", f"{spec.host_gbps:g}",
            "--gpus", str(spec.gpus), "--gpu-type", spec.gpu_type,
            "--cpus", f"{spec.cpus:g}", "--mem-gb", f"{spec.mem_gb:g}",
            "--workdir", str(self.files / "agents" / host.name),
            "--token-file", str(token_file), "--grace", f"{_AGENT_GRACE_S:g}",
        ]  # fmt: skip
        if spec.device_cores is not None:
            ps = spec.ps_cores if spec.ps_cores is not None else spec.device_cores
            argv += ["--device-cores", f"{spec.device_cores:g}", "--ps-cores", f"{ps:g}"]
        return argv

    def start_agents(
        self, controller: str, hosts: Sequence[str] | None = None
    ) -> list[subprocess.Popen[bytes]]:
        """Start the agents of ``hosts`` (default: all) against ``controller`` HOST:PORT."""
        chosen = [self.plan.host(n) for n in hosts] if hosts else list(self.plan.hosts)
        return [
            self.spawn("agent", h.name, self.agent_argv(h, controller), netns=h.netns)
            for h in chosen
        ]

    def stop(self, name: str, *, timeout_s: float = 20.0) -> None:
        """SIGTERM process ``name`` (an agent stops its tasks first) and wait for it."""
        for entry in self.state.processes:
            if entry.name == name:
                _stop([entry], timeout_s)
        proc = self._children.pop(name, None)
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1.0)

    def start_controller(self, options: Sequence[str] = ()) -> str:
        """A ``mlsched controller`` process in the root namespace on the control-plane
        address, with the cluster's topology and credentials; its HOST:PORT."""
        from mlsched.net.ports import free_port

        self.credentials()
        run, files = self.run_dir, self.files
        topology = files / "topology.json"
        files.mkdir(parents=True, exist_ok=True)
        topology.write_text(json.dumps(self.topology().to_dict(), indent=2), encoding="utf-8")
        address = f"{self.controller_host}:{free_port(self.controller_host)}"
        argv = [
            sys.executable, "-m", "mlsched", "controller", "--listen", address,
            "--token-file", str(run / "token"), "--agent-secret-file", str(run / "agent-secret"),
            "--topology", str(topology), "--db", str(files / "state.db"),
            "--checkpoint-root", str(files / "checkpoints"),
            "--min-agents", str(self.spec.hosts), *options,
        ]  # fmt: skip
        self.spawn("controller", "controller", argv)
        self.state.controller = address
        self.state.save()
        return address

    # Measuring links ----------------------------------------------------------------------
    def measure_gbps(self, src: str, dst: str, seconds: float = 1.0) -> float:
        """TCP throughput from host ``src`` to host ``dst`` over their data addresses."""
        return float(self._probe(src, dst, ["send"], str(seconds))["gbps"])

    def measure_rtt_ms(self, src: str, dst: str, count: int = 20) -> float:
        """Median TCP round trip of one byte from ``src`` to ``dst``, milliseconds."""
        return float(self._probe(src, dst, ["ping"], str(count), client_result=True)["median_ms"])

    def _probe(
        self, src: str, dst: str, mode: list[str], arg: str, *, client_result: bool = False
    ) -> dict[str, float]:
        probe = [sys.executable, "-m", "mlsched.testbed.emulated.probe"]
        to = self.plan.host(dst)
        server = subprocess.Popen(
            self.exec_argv(dst, [*probe, "serve", to.data_addr]),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            port = server.stdout.readline().strip() if server.stdout else ""
            if not port.isdigit():
                server.kill()
                _, err = server.communicate(timeout=10)
                raise EmulationError(f"probe server in {to.netns} failed: {err.strip()}")
            client = subprocess.run(
                self.exec_argv(src, [*probe, *mode, to.data_addr, port, arg]),
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            if client.returncode != 0:
                raise EmulationError(f"probe {src} -> {dst} failed: {client.stderr.strip()}")
            out, _ = server.communicate(timeout=60)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
        text = client.stdout if client_result else out
        result: dict[str, float] = json.loads(text.strip().splitlines()[-1])
        return result


def teardown(state: ClusterState, *, grace_s: float = 15.0) -> list[str]:
    """Remove everything ``state`` lists: its processes (SIGTERM, then SIGKILL after
    ``grace_s``), any process left inside its namespaces, the namespaces and links, and
    the state file. Returns what it removed; idempotent."""
    removed = [f"{p.role} {p.name} (pid {p.pid})" for p in state.processes if p.alive()]
    _stop(state.processes, grace_s)
    existing = netns_names()
    for ns in state.namespaces:
        if ns in existing:
            killed = _kill_inside(ns)
            if killed:
                removed.append(f"{killed} leftover process(es) in {ns}")
    removed += remove_network(state)
    for group in state.cpu_groups.values():
        path = Path(group)
        if remove_group(path, stop_at=path.parents[2]):  # <root>/mlsched/<id>/<host>
            removed.append(f"cpu group {path}")
    if state.cpu_mount and _unmount(Path(state.cpu_mount)):
        removed.append(f"cpu hierarchy mount {state.cpu_mount}")
    with contextlib.suppress(FileNotFoundError):
        state.path.unlink()
    return removed


def _isolate_hosts(plan: NetworkPlan, state: ClusterState, share: float) -> None:
    """Give each host a cpu control group of ``share`` cores (0: no isolation), or say in
    the state why the hosts share the machine's CPUs."""
    if share <= 0:
        state.cpu_isolation = "none: the hosts share the machine's CPUs (isolate_cpu false)"
        state.save()
        return
    control, why = cpu_control()
    if control is None:
        state.cpu_isolation = f"none: the hosts share the machine's CPUs ({why})"
        log.warning("[emulation] hosts not isolated: %s", why)
        state.save()
        return
    for host in plan.hosts:
        path = host_group(control, plan.cluster_id, host.name)
        state.add_cpu_group(host.netns, str(path))  # listed before it is made
        make_group(control, path, share)
    if plan.spec.device_cores is not None:
        _bind_hierarchy(control.root, state)
    state.cpu_isolation = (
        f"{share:.3g} cores per host (cgroup v{control.version} cpu quota, "
        f"{usable_cores()} cores on the machine)"
    )
    state.save()


def _bind_hierarchy(root: Path, state: ClusterState) -> None:
    """Bind the cpu hierarchy at ``/run/mlsched/cgroup-<cluster id>``: ``ip netns exec``
    mounts a fresh /sys for the command, which hides /sys/fs/cgroup from the agents, and an
    agent with stand-in device slices makes its tasks' groups there."""
    where = Path("/run/mlsched") / f"cgroup-{state.cluster_id}"
    state.cpu_mount = str(where)
    state.save()  # listed before it is mounted
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "--bind", str(root), str(where)], capture_output=True,
                          text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise EmulationError(f"cannot bind {root} at {where}: {done.stderr.strip()[:200]}")


def _unmount(where: Path) -> bool:
    """Unmount and remove a bound hierarchy; True when it was there."""
    if not where.exists():
        return False
    subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)
    with contextlib.suppress(OSError):
        where.rmdir()
    return True


def _stop(entries: Sequence[ProcessEntry], grace_s: float) -> None:
    live = [p for p in entries if p.alive()]
    for p in live:
        _signal_group(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(p.alive() for p in live):
        time.sleep(0.1)
    for p in live:
        if p.alive():
            log.warning(
                "[emulation] %s %s did not stop in %.0f s: SIGKILL", p.role, p.name, grace_s
            )
            _signal_group(p.pid, signal.SIGKILL)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    # Started with start_new_session: its process group id is its pid.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _kill_inside(ns: str) -> int:
    """SIGKILL whatever still runs in namespace ``ns`` (a trainer whose agent was killed):
    a namespace with a process in it outlives its removal, and so do its links. Returns
    how many processes it found."""
    found: set[int] = set()
    for _ in range(50):
        pids = [p for p in netns_pids(ns) if p != os.getpid()]
        if not pids:
            return len(found)
        found.update(pids)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    raise EmulationError(f"processes {pids} in namespace {ns} survive SIGKILL")


def _refuse_live_state(path: Path) -> None:
    """A state file whose cluster still exists is not overwritten; a stale one is."""
    if not path.exists():
        return
    try:
        old = ClusterState.load(path)
    except SpecError:
        raise SpecError(
            "state", str(path), "no file, or a cluster state file (remove it by hand)"
        ) from None
    if set(old.namespaces) & netns_names() or any(p.alive() for p in old.processes):
        raise SpecError(
            "state",
            str(path),
            f"no cluster there: cluster {old.cluster_id} is up (mlsched cluster down "
            f"--state {path}, or another --state)",
        )
    path.unlink()


def _secret_file(path: Path) -> str:
    """The secret in ``path``, made (owner-only) when the file is missing."""
    from mlsched.net.auth import new_secret, write_private_file

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    value = new_secret()
    write_private_file(path, (value + "\n").encode())
    return value
