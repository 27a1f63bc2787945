"""Measured profiles: the file (checked field by field), Gavel's table in and out, and a
real measurement of one cell that a second run resumes instead of measuring again.

Plausible bugs this catches: a malformed or foreign file accepted (a simulator would then
take nonsense as truth), a resumed run that measures everything again or mixes settings,
a Gavel throughput read as seconds (or the reverse), Gavel's "cannot run" zeros turned into
infinitely slow cells, and a measurement whose parts do not add up (iteration time not
compute plus communication, a restart cheaper than the checkpoint it saves).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from mlsched.cli import main
from mlsched.core.errors import SpecError
from mlsched.perfmodel.profile import (
    Cell,
    Profile,
    from_gavel,
    load_profile,
    mean_profile,
    to_gavel,
)
from mlsched.profiling.grid import Grid, cell_cores, fitting, measure_budget, run_grid
from mlsched.profiling.measure import Settings

GAVEL = {
    "v100": {
        "('ResNet-18 (batch size 64)', 1)": {"null": 10.0, "('A3C', 1)": [6.0, 2.0]},
        "('ResNet-18 (batch size 64)', 2)": {"null": 18.0},
        "('A3C', 1)": {"null": 4.0},
    },
    "k80": {"('ResNet-18 (batch size 64)', 2)": {"null": 0.0}},
}


def _profile(*cells: Cell) -> Profile:
    return Profile({"hostname": "h"}, {"type": "cpu"}, {"steps": 10}, cells, created_unix=1.0)


CELL = Cell("resnet20", "ring", 2, "cpu", 0.3, 0.2, 0.1, 1e6, 4.0, 0.05, 0.02, 4.5, 40)


def test_a_profile_survives_its_file_and_a_foreign_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    _profile(CELL).save(path)
    assert path.stat().st_mode & 0o777 == 0o644
    loaded = load_profile(path)
    assert loaded == _profile(CELL)
    assert loaded.cell("resnet20", "ring", 2, "cpu") == CELL
    assert loaded.cell("resnet20", "ring", 1, "cpu") is None
    loaded.check_matches({"hostname": "h"}, {"type": "cpu"}, {"steps": 10})
    with pytest.raises(SpecError, match=r"settings\.steps"):
        loaded.check_matches({"hostname": "h"}, {"type": "cpu"}, {"steps": 20})
    with pytest.raises(SpecError, match=r"machine\.hostname"):
        loaded.check_matches({"hostname": "other"}, {"type": "cpu"}, {"steps": 10})


def _cell_row(**change: Any) -> dict[str, Any]:
    row = _profile(CELL).to_dict()
    row["cells"][0].update(change)
    return row


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({**_profile().to_dict(), "schema": "other"}, "schema"),
        ({**_profile().to_dict(), "version": 2}, "version"),
        ({**_profile().to_dict(), "extra": 1}, "extra"),
        ({**_profile().to_dict(), "machine": []}, "machine"),
        (_cell_row(kind="mpi"), "cells[0].kind"),
        (_cell_row(workers=0), "cells[0].workers"),
        (_cell_row(workers=True), "cells[0].workers"),
        (_cell_row(iteration_s=0), "cells[0].iteration_s"),
        (_cell_row(compute_s=float("nan")), "cells[0].compute_s"),
        (_cell_row(restart_s=-1), "cells[0].restart_s"),
        (_cell_row(model="a b/c"), "cells[0].model"),
        (_cell_row(colour="red"), "cells[0].colour"),
        (_cell_row(image_size=0), "cells[0].image_size"),
        (_cell_row(batch_size=2.5), "cells[0].batch_size"),
        ({**_profile().to_dict(), "cells": [{"model": "m"}]}, "cells[0].kind"),
        ({**_profile().to_dict(), "cells": [_cell_row()["cells"][0]] * 2}, "cells[1]"),
    ],
)
def test_a_malformed_profile_is_refused_with_its_field_named(
    tmp_path: Path, doc: dict[str, Any], field: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SpecError) as err:
        load_profile(path)
    assert err.value.field == field


def test_gavel_tables_come_in_and_go_out_as_steps_per_second() -> None:
    cells, left_out = from_gavel(GAVEL, kind="ring")
    by_key = {(c.model, c.workers, c.device_type): c for c in cells}
    assert by_key[("ResNet-18-b64", 1, "v100")].iteration_s == pytest.approx(0.1)
    assert by_key[("A3C", 1, "v100")].iteration_s == pytest.approx(0.25)
    assert left_out == ["k80 ('ResNet-18 (batch size 64)', 2)"]  # Gavel's "cannot run"
    assert all(c.source == "gavel" and c.compute_s is None for c in cells)
    back = to_gavel(_profile(*cells), kind="ring")
    assert back == {
        "v100": {
            key: {"null": pytest.approx(entry["null"])} for key, entry in GAVEL["v100"].items()
        }
    }
    with pytest.raises(SpecError, match="null"):
        from_gavel({"v100": {"('A3C', 1)": {"null": -1.0}}})
    with pytest.raises(SpecError, match="v100"):
        from_gavel({"v100": {"A3C": {"null": 1.0}}})


@pytest.mark.processes
def test_a_measured_cell_adds_up_and_a_second_run_resumes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two cells measured at once, each in a process of its own, reported and kept in the
    grid's order; the file then resumes rather than measures again."""
    out = tmp_path / "profile.json"
    grid = Grid(models=("mlp",), kinds=("ps_async", "ring"), workers=(1,))
    settings = Settings(steps=5, warmup=1, resume_steps=1, repeats=2, image_sizes=(("mlp", 16),))
    said: list[str] = []
    run = run_grid(grid, settings, out, say=said.append, at_once=2)
    assert not run.failed and run.measured == [("mlp", "ps_async", 1), ("mlp", "ring", 1)]
    assert said[0].endswith("2 cells on cpu, 0 already measured, 2 to go")
    assert said[1].startswith("[1/2] mlp ps_async x1: ") and said[2].startswith("[2/2] mlp ring")
    profile = load_profile(out)
    cell, ring = profile.cells
    assert ring.key == ("mlp", "ring", 1, "cpu", "") and ring.restart_s is not None
    assert cell.key == ("mlp", "ps_async", 1, "cpu", "") and cell.source == "measured"
    assert (cell.batch_size, cell.image_size) == (32, 16)  # the model's own image size
    assert profile.settings["image_sizes"] == {"mlp": 16}
    assert cell.compute_s is not None and cell.comm_s is not None
    assert cell.iteration_s == pytest.approx(cell.compute_s + cell.comm_s)
    assert cell.iterations >= 4 and (cell.bytes_per_iteration or 0) > 0
    assert (cell.startup_s or 0) > 0.5  # a Python process importing torch, at least
    assert cell.checkpoint_save_s is not None and cell.restart_s is not None
    assert cell.restart_s > cell.checkpoint_save_s > 0
    assert profile.settings["steps"] == 5 and profile.machine["cores"] >= 1
    again = run_grid(grid, settings, out, say=said.append)
    assert (again.kept, again.measured) == (2, []) and load_profile(out) == profile
    with pytest.raises(SpecError) as err:
        run_grid(
            grid,
            Settings(steps=5, warmup=1, resume_steps=2, repeats=2, image_sizes=(("mlp", 16),)),
            out,
        )
    assert err.value.field == "settings.resume_steps"
    assert main(["profile", "show", str(out)]) == 0
    assert "mlp            ps_async   1 -     cpu" in capsys.readouterr().out


@pytest.mark.processes
def test_a_cell_s_iteration_time_is_the_wall_time_its_steps_took(tmp_path: Path) -> None:
    """A measured cell's iteration seconds (its compute plus its communication, each
    timed inside the trainer) against an independent clock: the wall time between the
    steady steps' timestamps in the same run's metrics. A PS job on loopback spends about
    two thirds of a step communicating, so a cell that drops or halves a part misses by a
    third or more. The bound, 6 %, is three times the largest deviation measured in 16
    runs of this cell (0.980-1.021 of the wall time, the machine idle and with two
    CPU-bound processes beside it)."""
    from mlsched.profiling.measure import measure_cell

    settings = Settings(steps=60, warmup=3, resume_steps=1, repeats=2, image_sizes=(("mlp", 16),))
    cell = measure_cell("mlp", "ps_async", 1, "cpu", settings, tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steady = sorted(
        float(r["t"])
        for r in rows
        if r.get("type") == "iter" and r.get("role") == "worker" and int(r["step"]) >= 3
    )
    wall = (steady[-1] - steady[0]) / (len(steady) - 1)
    assert cell.iteration_s is not None
    assert abs(cell.iteration_s / wall - 1) <= 0.06, (cell, wall)


def _cpu_share_missing() -> str:
    from mlsched.trainers.cpu_share import cpu_control

    control, why = cpu_control()
    return "" if control is not None else why


@pytest.mark.processes
@pytest.mark.skipif(bool(_cpu_share_missing()), reason=_cpu_share_missing() or "ok")
def test_what_runs_inside_a_share_gets_that_share_and_leaves_nothing_behind() -> None:
    import sys
    import time

    import psutil

    from mlsched.trainers.cpu_share import cpu_control, inside

    control, _ = cpu_control()
    assert control is not None
    with inside(control, "profile-test", 0.3) as group:
        burner = psutil.Popen([sys.executable, "-c", "while True: pass"])
        try:
            time.sleep(0.3)
            before = sum(burner.cpu_times()[:2])
            time.sleep(1.0)
            used = sum(burner.cpu_times()[:2]) - before
        finally:
            burner.kill()
            burner.wait()
    assert 0.2 <= used <= 0.3 * 1.15  # the share, though the machine has more
    assert not group.exists()
    mine = Path(f"/proc/{os.getpid()}/cgroup").read_text()
    assert "mlsched" not in mine  # back where it was


def test_a_share_below_the_kernels_floor_is_refused_by_name() -> None:
    """What a profile measured in a share costs against a cluster's hosts is the fidelity
    experiment's (tests/test_fidelity_experiment.py, in stand-in device slices)."""
    with pytest.raises(SpecError, match="cpus"):
        Settings(cpus=0.01)
    assert Settings(cpus=0.3).to_dict()["cpus"] == 0.3 and "cpus" not in Settings().to_dict()


def test_cells_are_measured_together_as_far_as_their_slices_fit_the_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Slices of 0.25 cores a rank and 0.2 a PS: a one-worker PS cell holds 0.45 cores, a
    two-rank ring 0.5, a two-worker PS 0.7; on two cores 1.8 of them may run at once. The
    default fidelity form's five cells go in two waves instead of five, a cell starting as
    soon as the others leave it room; without slices a cell has the machine to itself."""
    sliced = Settings(device_cores=0.25, ps_cores=0.2)
    cells = [("mlp", "ps_async", 1), ("resnet20", "ps_sync", 2), ("vgg11-narrow", "ring", 2),
             ("mlp", "ring", 2), ("resnet20", "ps_async", 1)]  # fmt: skip
    cores = [cell_cores(c, sliced) for c in cells]
    assert cores == pytest.approx([0.45, 0.7, 0.5, 0.5, 0.45])
    assert cell_cores(cells[0], Settings()) is None and measure_budget(Settings()) is None
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    room = measure_budget(sliced)
    assert room == pytest.approx(1.8)
    c = [float(x or 0.0) for x in cores]
    assert fitting(range(5), c, 0.0, room, idle=True) == [0, 1, 2]  # 1.65 cores
    assert fitting([3, 4], c, 1.2, room, idle=False) == [3]  # the first ended: 1.7
    assert fitting([4], c, 1.7, room, idle=False) == []  # 2.15 would not fit
    assert fitting([4], c, 1.2, room, idle=False) == [4]
    # A cell larger than the room runs when nothing else does, and alone.
    big = [2.5, 0.45]
    assert fitting([0, 1], big, 0.0, room, idle=True) == [0]
    assert fitting([1], big, 2.5, room, idle=False) == []
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert measure_budget(sliced) == pytest.approx(0.8)
    assert fitting(range(5), c, 0.0, 0.8, idle=True) == [0]


def test_two_measurements_of_a_profile_average_field_by_field() -> None:
    """The fidelity experiment's bracketing: a wrong pairing (cells of another key), a
    field taken from one side only, or iterations not summed would each fail here."""
    machine, device = {"hostname": "h"}, {"type": "cpu"}
    other = Cell("mlp", "ps_async", 1, "cpu", 0.01, startup_s=10.0, iterations=290)
    before = Profile(machine, device, {"steps": 300}, (CELL, other))
    later = dataclasses.replace(
        CELL, iteration_s=0.5, startup_s=6.0, checkpoint_save_s=None, iterations=60
    )
    only_after = Cell("vgg11-narrow", "ring", 2, "cpu", 0.2)
    after = Profile({"hostname": "x"}, device, {"steps": 300}, (later, only_after))
    mean = mean_profile(before, after)
    assert mean.machine == machine and len(mean.cells) == 3
    got = mean.cell("resnet20", "ring", 2, "cpu")
    assert got is not None
    assert got.iteration_s == pytest.approx(0.4) and got.startup_s == pytest.approx(5.0)
    assert got.checkpoint_save_s == CELL.checkpoint_save_s  # the side that has it
    assert got.iterations == 100
    assert mean.cell("mlp", "ps_async", 1, "cpu") == other
    assert mean.cell("vgg11-narrow", "ring", 2, "cpu") == only_after
