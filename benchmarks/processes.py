"""Running a benchmark's training processes: their environment, and the CPU their whole
process trees use, sampled from outside (:class:`CpuSampler`)."""

from __future__ import annotations

import bisect
import contextlib
import os
import subprocess
import threading
import time
from pathlib import Path

import psutil

from mlsched.trainers.launch import flag_value

ROOT = Path(__file__).resolve().parent.parent


# Running one job ---------------------------------------------------------------------------
def _env(threads: int) -> dict[str, str]:
    return {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }


class CpuSampler:
    """CPU seconds (user + system) used by a job's whole process tree, sampled every
    ``interval_s`` from outside, so that neither side is instrumented for it. CPU time is
    far less sensitive than wall time to other load on the machine."""

    def __init__(self, roots: list[subprocess.Popen[bytes]], interval_s: float = 0.05) -> None:
        self.roots = [psutil.Process(p.pid) for p in roots]
        self.interval_s = interval_s
        # (unix time, {process label: CPU seconds so far})
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._last: dict[int, float] = {}  # pid -> CPU seconds last seen (kept after exit)
        self._procs: dict[int, psutil.Process] = {p.pid: p for p in self.roots}
        self._labels: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> CpuSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    @staticmethod
    def _label(proc: psutil.Process) -> str:
        try:
            cmd = proc.cmdline()
        except psutil.Error:
            return "?"
        if flag_value(cmd, "--role") is not None:
            role = flag_value(cmd, "--role")
            if role in ("ps", "worker"):
                return role
        if any(name in c for c in cmd for name in ("torch.distributed.run", "horovodrun")):
            return "launcher"
        for module in ("mlsched.trainers", "benchmarks.bare_ddp", "--instrument-child"):
            if module in cmd:
                return "rank"
        if "benchmarks.bare_ps" in cmd:
            return "launcher"
        return Path(cmd[0]).name if cmd else "?"

    def _loop(self) -> None:
        next_scan = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_scan:  # processes are started early on; rescan once a second
                for root in self.roots:
                    with contextlib.suppress(psutil.Error):
                        for child in [root, *root.children(recursive=True)]:
                            if child.pid not in self._labels:
                                self._procs.setdefault(child.pid, child)
                                self._labels[child.pid] = self._label(child)
                next_scan = now + 1.0
            for pid, proc in self._procs.items():
                with contextlib.suppress(psutil.Error):
                    t = proc.cpu_times()
                    self._last[pid] = t.user + t.system
            by_label: dict[str, float] = {}
            for pid, cpu in self._last.items():
                label = self._labels.get(pid, "?")
                by_label[label] = by_label.get(label, 0.0) + cpu
            self.samples.append((time.time(), by_label))
            self._stop.wait(self.interval_s)

    def cpu_between(self, t0: float, t1: float) -> dict[str, float]:
        """CPU seconds used between unix times ``t0`` and ``t1`` by each kind of process
        (linear interpolation between samples); key ``"all"`` is their sum."""
        a, b = self._at(t0), self._at(t1)
        out = {k: b.get(k, 0.0) - a.get(k, 0.0) for k in sorted(set(a) | set(b))}
        out["all"] = sum(out.values())
        return out

    def _at(self, t: float) -> dict[str, float]:
        s = self.samples
        if not s or t < s[0][0] or t > s[-1][0]:
            return {"?": float("nan")}
        i = bisect.bisect_left([x[0] for x in s], t)
        if i == 0:
            return dict(s[0][1])
        (ta, ca), (tb, cb) = s[i - 1], s[i]
        w = (t - ta) / max(1e-9, tb - ta)
        return {k: ca.get(k, 0.0) + (cb.get(k, 0.0) - ca.get(k, 0.0)) * w for k in cb}


def _run(
    cmds: list[list[str]], env: dict[str, str], log: Path, timeout: float
) -> tuple[float, CpuSampler]:
    """Start the processes, wait for all; returns the wall time (start-up included) and
    the CPU samples of the process tree."""
    start = time.perf_counter()
    with open(log, "ab") as fh:
        procs = [
            subprocess.Popen(c, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
            for c in cmds
        ]
        sampler = CpuSampler(procs).start()
        deadline = time.monotonic() + timeout
        try:
            for p in procs:
                p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise RuntimeError(f"timed out after {timeout:g} s (log {log})") from None
        finally:
            sampler.stop()
    codes = [p.returncode for p in procs]
    if any(codes):
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise RuntimeError(f"exit codes {codes}; log {log}:\n" + "\n".join(tail))
    return time.perf_counter() - start, sampler
