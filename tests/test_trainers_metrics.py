"""The trainers' measurement plumbing: the JSON-lines sink, the summary math, telemetry."""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mlsched.trainers import metrics as metrics_mod
from mlsched.trainers.metrics import IterationStats, MetricsSink
from mlsched.trainers.telemetry import TelemetrySampler, nvml_available


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# MetricsSink ------------------------------------------------------------------------------
def test_file_sink_delivers_every_line_with_its_static_fields(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    sink = MetricsSink(str(path), static={"job": "j", "role": "worker", "rank": 1})
    for i in range(500):
        sink.emit({"type": "iter", "step": i, "loss": 1.0 / (i + 1)})
    sink.close()
    got = lines(path)
    assert [r["step"] for r in got] == list(range(500))
    assert all(r["job"] == "j" and r["role"] == "worker" and r["rank"] == 1 for r in got)
    sink.emit({"type": "iter", "step": 500})  # after close: dropped, no error
    assert len(lines(path)) == 500


def test_file_sink_buffers_then_flushes(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    sink = MetricsSink(str(path), flush_s=3600)
    sink.emit({"type": "iter", "step": 0})
    assert path.read_text() == ""  # buffered: no write per iteration
    sink.flush()
    assert len(lines(path)) == 1
    sink.close()


def test_sinks_of_several_processes_share_a_file_without_tearing_lines(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    sinks = [MetricsSink(str(path), flush_s=0.0, static={"rank": r}) for r in range(3)]
    pad = "x" * 2000  # long lines: a torn write would show up as invalid JSON
    for i in range(200):
        for s in sinks:
            s.emit({"step": i, "pad": pad})
    for s in sinks:
        s.close()
    got = lines(path)
    assert len(got) == 600
    for r in range(3):
        assert [x["step"] for x in got if x["rank"] == r] == list(range(200))


def test_tcp_sink_delivers_every_line() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    received = bytearray()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            while chunk := conn.recv(65536):
                received.extend(chunk)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        sink = MetricsSink(f"tcp://127.0.0.1:{port}", flush_s=0.01, static={"job": "t"})
        for i in range(2000):
            sink.emit({"type": "iter", "step": i, "loss": 0.5})
        sink.close()
        thread.join(timeout=10)
        assert not thread.is_alive()
    finally:
        server.close()
    got = [json.loads(line) for line in received.decode().splitlines()]
    assert [r["step"] for r in got] == list(range(2000))
    assert all(r["job"] == "t" for r in got)


def test_stdout_sink(capsys: pytest.CaptureFixture[str]) -> None:
    sink = MetricsSink("-", static={"rank": 0})
    sink.emit({"type": "event", "event": "start"})
    sink.close()
    out = capsys.readouterr().out
    assert json.loads(out) == {"rank": 0, "type": "event", "event": "start"}


def test_empty_target_discards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sink = MetricsSink("")
    sink.emit({"type": "iter"})
    sink.close()
    assert capsys.readouterr().out == ""


# IterationStats ---------------------------------------------------------------------------
class FakeClock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_iteration_stats_summary_math(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock(100.0)
    monkeypatch.setattr(metrics_mod.time, "perf_counter", clock)
    stats = IterationStats(batch_size=32)
    clock.t = 105.0  # start-up before the first iteration does not count
    stats.add(compute_s=0.3, comm_s=0.1, sent=1000, recv=2000, loss=2.5)
    clock.t = 105.5
    stats.add(compute_s=0.2, comm_s=0.3, sent=1000, recv=2000, loss=1.5)
    clock.t = 106.0
    stats.add(compute_s=0.4, comm_s=0.2, sent=1000, recv=2000, loss=0.5)
    clock.t = 106.6
    s = stats.summary()
    # The run is timed from the first iteration's start: 105.0 - 0.4 = 104.6.
    assert s["type"] == "summary"
    assert s["steps"] == 3
    assert s["wall_s"] == pytest.approx(2.0)
    assert s["samples_per_s"] == pytest.approx(3 * 32 / 2.0)
    assert s["compute_time_mean"] == pytest.approx(0.3)
    assert s["comm_time_mean"] == pytest.approx(0.2)
    assert (s["bytes_sent"], s["bytes_recv"]) == (3000, 6000)
    assert (s["first_loss"], s["final_loss"]) == (2.5, 0.5)


def test_iteration_stats_without_iterations() -> None:
    s = IterationStats(batch_size=8).summary()
    assert s["steps"] == 0 and s["samples_per_s"] == 0.0
    assert s["compute_time_mean"] == 0.0 and s["comm_time_mean"] == 0.0
    assert math.isnan(s["first_loss"]) and math.isnan(s["final_loss"])
    json.dumps(s)  # serialisable (NaN as the JSON extension Python reads back)


# Telemetry --------------------------------------------------------------------------------
def test_telemetry_sampler_emits_process_samples(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    sink = MetricsSink(str(path), flush_s=0.0, static={"rank": 0})
    sampler = TelemetrySampler(sink, interval_s=0.05).start()
    deadline = time.monotonic() + 10
    while sampler.samples < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    sampler.stop()
    assert not sampler._thread.is_alive()
    sink.close()
    got = lines(path)
    assert len(got) >= 3 and len(got) == sampler.samples
    nvml = nvml_available()
    for r in got:
        assert r["type"] == "telemetry" and r["rank"] == 0
        assert r["nvml"] is nvml
        assert r["cpu_percent"] >= 0
        assert r["rss_bytes"] > 1_000_000  # this Python process
        assert ("gpus" in r) is nvml
    if not nvml:  # this machine: no NVML library or no GPU
        assert set(got[0]) == {"rank", "type", "t", "nvml", "cpu_percent", "rss_bytes"}


def test_the_step_follower_reads_only_whole_new_lines(tmp_path) -> None:
    """Progress of ``mlsched train``: the highest step so far, from appended lines only,
    past the lines an earlier run left (a resumed run appends to the same file)."""
    from mlsched.trainers.launch import StepFollower

    path = tmp_path / "metrics.jsonl"
    old = '{"type": "iter", "step": 90}\n'
    path.write_text(old)
    follower = StepFollower(str(path), offset_lines=1)
    assert follower.poll() == 0  # the earlier run's step 90 is not this run's
    with path.open("a") as fh:
        fh.write('{"type": "event", "step": 50}\n{"type": "iter", "step": 4}\n{"type": "it')
    assert follower.poll() == 5  # steps 0..4 done; the half-written line waits
    with path.open("a") as fh:
        fh.write('er", "step": 7}\n')
    assert follower.poll() == 8
    assert StepFollower(str(tmp_path / "absent.jsonl"), 0).poll() == 0
