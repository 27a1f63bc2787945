"""The systemd units (deploy/systemd): checked by ``systemd-analyze verify`` where it exists
(with the binary path pointed at this environment's, which verify requires to exist; any
warning fails, since verify exits 0 on an ignored bad setting), and their command lines, with
the example environment files' values, parsed by this package's command line.

Plausible bugs this catches: a misspelt directive or value (``Restart=on-failur`` is only
warned about), a flag renamed in the package but not in a unit, a variable a unit uses that
its example environment file does not set."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mlsched.cli import get_args_parser

ROOT = Path(__file__).resolve().parent.parent
UNITS = ROOT / "deploy" / "systemd"
ENVS = {"mlsched-controller": "controller.env.example", "mlsched-agent": "agent.env.example"}


def _env(name: str) -> dict[str, str]:
    out = {}
    for line in (UNITS / ENVS[name]).read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def _exec_start(unit: str) -> str:
    text = (UNITS / f"{unit}.service").read_text().replace("\\\n", " ")
    (line,) = [x for x in text.splitlines() if x.startswith("ExecStart=")]
    return line.removeprefix("ExecStart=")


@pytest.mark.parametrize("unit", sorted(ENVS))
def test_the_unit_s_command_line_parses_with_its_example_environment(unit: str) -> None:
    env = _env(unit)
    used = set(re.findall(r"\$\{(\w+)\}", _exec_start(unit)))
    assert used <= set(env), f"{unit} uses {sorted(used - set(env))} unset in {ENVS[unit]}"
    argv = shlex.split(re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], _exec_start(unit)))
    assert argv[0] == "/opt/mlsched/bin/mlsched"
    get_args_parser().parse_args(argv[1:])  # exits (fails) on a flag the package lacks


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not found")
def test_systemd_verifies_the_units_without_a_warning(tmp_path: Path) -> None:
    mlsched = str(Path(sys.executable).parent / "mlsched")
    paths = []
    for unit in sorted(ENVS):
        text = (UNITS / f"{unit}.service").read_text()
        path = tmp_path / f"{unit}.service"
        path.write_text(text.replace("/opt/mlsched/bin/mlsched", mlsched))
        paths.append(str(path))
    done = subprocess.run(
        ["systemd-analyze", "verify", *paths], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stderr
