"""Controller RPC latency with many agents heartbeating on loopback.

A real controller (in this process, gRPC on 127.0.0.1) and ``--agents`` simulated agents
spread over ``--procs`` client processes (so the clients' own Python does not serialise
the load): each agent registers, then heartbeats every ``--interval`` seconds, reporting
``--tasks`` running tasks with measurements, for ``--seconds``. A job mix is submitted so
the controller also plans slots and answers with desired tasks. Latency is measured by the
clients around each call; p50/p99 per RPC go to ``benchmarks/results/controller_rpc.json``.

    python -m benchmarks.controller_rpc                      # 200 agents, 1 s heartbeats
    python -m benchmarks.controller_rpc --agents 50 --seconds 10
    python -m benchmarks.controller_rpc --bad-specs          # meanwhile, hostile submissions
    python -m benchmarks.controller_rpc --agents 1000 --jobs 1000 --seconds 600

Besides each RPC's latency it reports the policy's decision times (``allocate`` is the
slot's decision), the agents declared lost while they were heartbeating (the stand-ins
never stop, so any is false), the controller's memory, and the heartbeats' p99 per minute.

``--bad-specs`` adds a client process that submits hostile job documents back to back (a
YAML alias bomb, documents at and over the size limit, deep nesting, a 1 MB job id,
out-of-range numbers): each must be refused, and the heartbeats' latency is what the
agents see meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing as mp
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
import psutil
import yaml

from benchmarks.__main__ import machine
from mlsched.controller.intake import warm_up
from mlsched.controller.server import Controller, ControllerConfig
from mlsched.core.server_gc import tune_for_serving
from mlsched.net.auth import ClientAuth, client_channel
from mlsched.v1 import agent_pb2, agent_pb2_grpc, jobs_pb2, jobs_pb2_grpc

RESULTS = Path(__file__).resolve().parent / "results"


async def _agent(
    address: str, name: str, args: dict[str, Any], out: list[tuple[str, float, float]]
) -> None:
    """One stand-in agent: register, then heartbeat every ``interval`` seconds."""
    metadata = ClientAuth(args["token"]).metadata()
    async with grpc.aio.insecure_channel(address) as channel:  # one channel per agent
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        req = agent_pb2.RegisterRequest(
            name=name, host="127.0.0.1", pool="both", port_lo=40000, port_hi=40999
        )
        req.capacity.amounts.update({"gpu": 4, "cpu": 16, "mem_gb": 64})
        t0 = time.perf_counter()
        agent_id = (await stub.Register(req, timeout=30, metadata=metadata)).agent_id
        out.append(("Register", time.perf_counter() - t0, time.time()))
        end = time.monotonic() + args["seconds"]
        # Spread the agents' phases so heartbeats do not arrive in lockstep.
        await asyncio.sleep(args["interval"] * (hash(name) % 1000) / 1000)
        while time.monotonic() < end:
            hb = agent_pb2.HeartbeatRequest(agent_id=agent_id)
            for k in range(args["tasks"]):
                t = hb.tasks.add(
                    task_id=f"{name}.t{k}", job_id=f"sim{k}", state=agent_pb2.TASK_STATE_RUNNING
                )
                t.measurement.iterations = 100
                t.measurement.timed_iterations = 98
                t.measurement.compute_time_s = 9.8
                t.measurement.comm_time_s = 1.2
                t.measurement.last_step = 99
            hb.telemetry.cpu_percent = 50.0
            t0 = time.perf_counter()
            resp = await stub.Heartbeat(hb, timeout=30, metadata=metadata)
            out.append(("Heartbeat", time.perf_counter() - t0, time.time()))
            if resp.reregister:
                await stub.Register(req, timeout=30, metadata=metadata)
            await asyncio.sleep(max(0.0, args["interval"] - (time.perf_counter() - t0)))


def _client_proc(address: str, names: list[str], args: dict[str, Any], q: Any) -> None:
    """A client process: its agents as coroutines on one event loop (asyncio gRPC), so the
    stand-ins' own cost (threads contending for this process's interpreter) stays out of
    the latencies they measure; each agent still has its own channel, as real agents do."""
    out: list[tuple[str, float, float]] = []

    async def run_all() -> None:
        await asyncio.gather(*(_agent(address, n, args, out) for n in names))

    asyncio.run(run_all())
    q.put(out)


def _queries_proc(address: str, token: str | None, seconds: float, q: Any) -> None:
    """A user polling the job list and the cluster status, in a process of its own (as a
    CLI is), not in the controller's."""
    out: list[tuple[str, float, float]] = []
    _queries(address, token, seconds, out)
    q.put(out)


def _queries(
    address: str, token: str | None, seconds: float, out: list[tuple[str, float, float]]
) -> None:
    stub = jobs_pb2_grpc.JobServiceStub(client_channel(address, ClientAuth(token)))
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for name, call, req in (
            ("ListJobs", stub.ListJobs, jobs_pb2.ListJobsRequest()),
            ("GetClusterStatus", stub.GetClusterStatus, jobs_pb2.GetClusterStatusRequest()),
        ):
            t0 = time.perf_counter()
            call(req, timeout=30)
            out.append((name, time.perf_counter() - t0, time.time()))
        time.sleep(0.5)


def bad_documents() -> list[tuple[str, str]]:
    """(name, document) of hostile submissions the controller must refuse."""
    bomb = "\n".join(
        [
            'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
            *(
                f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]"
                for p, c in zip("abcdefgh", "bcdefghi", strict=True)
            ),
        ]
    )
    job = '{"job_id": "x", "model": "mlp", "training": {"lr": 0.1}, "note": "%s"}'
    at_limit = "[" + job % ("n" * ((1 << 20) - 200)) + "]"
    return [
        ("alias bomb", bomb),
        ("1 MiB document, unknown field", at_limit),
        (
            "1 MiB YAML, unknown field",
            "- {job_id: x, model: mlp, note: %s}" % ("n" * ((1 << 20) - 60)),
        ),
        (
            "1 MiB YAML, 250k comment lines",
            "- {job_id: x, no: 1}\n" + "# c\n" * ((1 << 20) // 4 - 10),
        ),
        ("over the size limit", "#" * ((1 << 20) + 10)),
        ("nesting 10,000 deep", "[" * 10_000 + "]" * 10_000),
        ("1 MB job id", json.dumps([{"job_id": "x" * 1_000_000, "model": "mlp"}])),
        ("1e20 batches", json.dumps([{"job_id": "y", "model": "mlp", "batches_per_chunk": 1e20}])),
        ("1e308 chunks", json.dumps([{"job_id": "z", "model": "mlp", "chunks": 1e308}])),
    ]


def _bad_specs(address: str, token: str, seconds: float, q: Any) -> None:
    import grpc

    stub = jobs_pb2_grpc.JobServiceStub(client_channel(address, ClientAuth(token)))
    docs = bad_documents()
    out: list[tuple[str, float, float]] = []
    accepted: list[str] = []
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        name, doc = docs[i % len(docs)]
        i += 1
        t0 = time.perf_counter()
        try:
            stub.SubmitJobs(jobs_pb2.SubmitJobsRequest(document=doc), timeout=60)
            accepted.append(name)
        except grpc.RpcError:
            pass
        out.append((f"bad: {name}", time.perf_counter() - t0, time.time()))
    q.put((out, accepted))


class _LossCounter(logging.Handler):
    """Counts the controller's "agent ... lost" warnings."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "lost (no heartbeat)" in record.getMessage():
            self.count += 1


def _decision_rows(decisions: list[tuple[str, float]]) -> dict[str, dict[str, float]]:
    """p50/p99/max of the policy's calls, by call (allocate: the slot's decision)."""
    out = {}
    for call in sorted({c for c, _ in decisions}):
        xs = [t for c, t in decisions if c == call]
        out[call] = {
            "calls": len(xs),
            "p50_ms": 1e3 * statistics.median(xs),
            "p99_ms": 1e3 * _pct(xs, 0.99),
            "max_ms": 1e3 * max(xs),
        }
    return out


def _by_minute(samples: list[tuple[str, float, float]]) -> list[dict[str, float]]:
    """Heartbeat p50/p99 per minute of the run: a tail that grows shows up here."""
    beats = [(at, t) for n, t, at in samples if n == "Heartbeat"]
    if not beats:
        return []
    start = min(at for at, _ in beats)
    minutes: dict[int, list[float]] = {}
    for at, t in beats:
        minutes.setdefault(int((at - start) // 60), []).append(t)
    return [
        {
            "minute": m,
            "calls": len(xs),
            "p50_ms": 1e3 * statistics.median(xs),
            "p99_ms": 1e3 * _pct(xs, 0.99),
        }
        for m, xs in sorted(minutes.items())
    ]


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", type=int, default=200)
    p.add_argument("--procs", type=int, default=4, help="client processes")
    p.add_argument("--interval", type=float, default=1.0, help="heartbeat interval (s)")
    p.add_argument("--tasks", type=int, default=2, help="tasks reported per heartbeat")
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--jobs", type=int, default=100, help="jobs submitted for the slots")
    p.add_argument("--bad-specs", action="store_true", help="submit hostile documents meanwhile")
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args(argv)
    if a.out is None:
        a.out = RESULTS / ("controller_rpc_bad.json" if a.bad_specs else "controller_rpc.json")
    tmp = Path(tempfile.mkdtemp(prefix="mlsched-rpc-"))
    ctl = Controller(
        ControllerConfig(
            listen="127.0.0.1:0",
            db=str(tmp / "state.db"),
            checkpoint_root=str(tmp / "ckpt"),
            slot_seconds=5.0,
            heartbeat_s=a.interval,
            agent_timeout_s=max(10.0, 5 * a.interval),
            token="bench",
            metrics_listen="127.0.0.1:0",
        )
    )
    decisions: list[tuple[str, float]] = []
    assert ctl.metrics is not None
    record = ctl.metrics.observe_decision

    def observe(call: str, seconds: float) -> None:  # the engine's hook, also kept here
        decisions.append((call, seconds))
        record(call, seconds)

    ctl.metrics.observe_decision = observe  # type: ignore[method-assign]
    losses = _LossCounter()
    logging.getLogger("mlsched.controller.server").addHandler(losses)
    warm_up()  # as `mlsched controller` does
    ctl.start()
    tune_for_serving()
    process = psutil.Process()
    jobs = [
        {
            "job_id": f"job{i}",
            "model": "resnet20",
            "arch": "allreduce" if i % 2 else "ps",
            "batches_per_chunk": 10_000,
            "max_workers": 2,
            "requested_workers": 2,
            "worker": {"gpu": 1, "cpu": 1},
        }
        for i in range(a.jobs)
    ]
    ctl.submit(yaml.safe_dump(jobs))
    args = {"seconds": a.seconds, "interval": a.interval, "tasks": a.tasks, "token": "bench"}
    names = [f"sim{i:03d}" for i in range(a.agents)]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [
        ctx.Process(target=_client_proc, args=(ctl.address, names[i :: a.procs], args, q))
        for i in range(a.procs)
    ]
    print(
        f"[rpc] {a.agents} agents in {a.procs} processes, {a.interval:g}s heartbeats, "
        f"{a.seconds:g}s ...",
        flush=True,
    )
    bad_q = ctx.Queue()
    if a.bad_specs:
        procs.append(ctx.Process(target=_bad_specs, args=(ctl.address, "bench", a.seconds, bad_q)))
    for pr in procs:
        pr.start()
    query_q = ctx.Queue()
    qp = ctx.Process(target=_queries_proc, args=(ctl.address, "bench", a.seconds, query_q))
    qp.start()
    samples: list[tuple[str, float, float]] = []
    for _ in range(a.procs):
        samples += q.get()
    accepted: list[str] = []
    if a.bad_specs:
        bad, accepted = bad_q.get()
        samples += bad
    for pr in procs:
        pr.join()
    queries = query_q.get()
    qp.join()
    slots = ctl.engine.slot if ctl.engine else 0
    alive = len(ctl.agents.alive())
    rss_mb = process.memory_info().rss / 2**20
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ctl.stop(stop_tasks=True)
    samples += queries
    result: dict[str, Any] = {
        "machine": machine(),
        "agents": a.agents,
        "alive_at_end": alive,
        "interval_s": a.interval,
        "tasks_per_heartbeat": a.tasks,
        "seconds": a.seconds,
        "slots_planned": slots,
        "jobs": a.jobs,
        # The stand-ins never stop: every agent declared lost during the run was alive.
        "agents_falsely_lost": losses.count,
        "controller_rss_mb": round(rss_mb, 1),
        "controller_peak_rss_mb": round(peak_mb, 1),
        "decisions": _decision_rows(decisions),
        "heartbeat_by_minute": _by_minute(samples),
        "bad_specs": a.bad_specs,
        "bad_specs_accepted": accepted,
        "rpc": {},
    }
    print(f"{'rpc':<34} {'calls':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    bad_names = [f"bad: {n}" for n, _ in bad_documents()] if a.bad_specs else []
    for name in ("Register", "Heartbeat", "ListJobs", "GetClusterStatus", *bad_names):
        xs = [t for n, t, _ in samples if n == name]
        if not xs:
            continue
        row = {
            "calls": len(xs),
            "p50_ms": 1e3 * statistics.median(xs),
            "p99_ms": 1e3 * _pct(xs, 0.99),
            "max_ms": 1e3 * max(xs),
        }
        result["rpc"][name] = row
        print(
            f"{name:<34} {row['calls']:>7} {row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} "
            f"{row['max_ms']:>8.2f}"
        )
    print(f"agents alive at the end: {alive}/{a.agents}; slots planned: {slots}")
    print(
        f"agents declared lost while alive: {losses.count}; controller memory {rss_mb:.0f} MB "
        f"(peak {peak_mb:.0f} MB)"
    )
    for call, row in result["decisions"].items():
        print(
            f"decision {call}: {row['calls']} calls, p50 {row['p50_ms']:.2f} ms, "
            f"p99 {row['p99_ms']:.2f} ms, max {row['max_ms']:.2f} ms"
        )
    worst = max(result["heartbeat_by_minute"], key=lambda m: m["p99_ms"], default=None)
    if worst is not None:
        print(f"heartbeat p99, worst minute: {worst['p99_ms']:.1f} ms (minute {worst['minute']})")
    if a.bad_specs:
        print(f"hostile documents accepted: {accepted or 'none'}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
