"""docs/writing-a-policy.md, run as written: its files are written where a reader would
save them and its commands run in order in a shell, the plugin installed by ``pip install .``
(into a directory of the test's own, put on ``PYTHONPATH`` as site-packages would be).

The local-testbed step (``mlsched demo``: a controller, two agents and real training
processes for a few slots) runs in ``make soak``; ``make test`` runs everything before it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "writing-a-policy.md"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)


def _files_and_commands() -> tuple[dict[str, str], list[str]]:
    """Files (blocks whose first line is ``# NAME``) and ``$ `` commands, in page order."""
    files: dict[str, str] = {}
    commands: list[str] = []
    for lang, body in _BLOCK.findall(DOC.read_text()):
        first = body.splitlines()[0] if body else ""
        if lang == "console":
            commands += [line[2:] for line in body.splitlines() if line.startswith("$ ")]
        elif first.startswith("# ") and "." in first and " " not in first[2:]:
            files[first[2:]] = body
    return files, commands


def _run_page(tmp_path: Path, *, testbed: bool) -> dict[str, str]:
    files, commands = _files_and_commands()
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    site = tmp_path / "site-packages"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(site),
        # `pip install .` installs into `site` from this machine alone: no index, no
        # isolated build environment to download (the test environment has setuptools).
        "PIP_TARGET": str(site),
        "PIP_NO_INDEX": "1",
        "PIP_NO_BUILD_ISOLATION": "0",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "OMP_NUM_THREADS": "1",
    }
    out: dict[str, str] = {}
    for command in commands:
        if command.startswith("mlsched demo") and not testbed:
            continue
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, f"$ {command}\n{done.stdout}\n{done.stderr}"
        out[command] = done.stdout
    return out


def test_the_page_has_its_policy_and_its_steps() -> None:
    files, commands = _files_and_commands()
    assert {"srtf.py", "compare.py", "pyproject.toml"} <= set(files)
    body = [line for line in files["srtf.py"].splitlines() if line.strip()]
    assert len(body) <= 35, "the guide's policy is about 30 lines"
    assert any(c.startswith("pip install") for c in commands)
    assert any(c.startswith("mlsched demo --policy srtf") for c in commands)


def test_the_page_runs_as_written_in_the_simulator(tmp_path: Path) -> None:
    out = _run_page(tmp_path, testbed=False)
    rows = {
        c: [line.split()[0] for line in text.splitlines() if line.split()[:1]]
        for c, text in out.items()
    }
    compared = next(c for c in out if "srtf:ShortestRemainingFirst,fifo,drf" in c)
    assert {"srtf", "fifo", "drf"} <= set(rows[compared])
    assert [line.split()[0] for line in out["PYTHONPATH=. python compare.py"].splitlines()] == [
        "srtf",
        "fifo",
        "drf",
    ]
    # Installed: the policy's own name is known to the command line.
    assert "srtf" in rows["mlsched policies"]
    assert "srtf" in rows["mlsched simulate --workload demo --policy srtf,fifo"]


@pytest.mark.soak
@pytest.mark.processes
def test_the_page_runs_as_written_on_the_local_testbed(tmp_path: Path) -> None:
    """The whole page, the demo step included: the installed plugin drives a real
    controller and agents (about a minute; `make test` runs the page up to the demo)."""
    out = _run_page(tmp_path, testbed=True)
    demo = next(text for c, text in out.items() if c.startswith("mlsched demo"))
    assert "with policy srtf" in demo
