"""Every command reads the same variables for its controller and credentials
(``mlsched/net/env.py``), a flag winning over its variable: an agent process started with no
connection flag at all registers over mutual TLS with a token, and ``mlsched status`` with
none reaches the same controller.

Plausible bugs this catches: the agent ignoring the variables (it used to require
``--controller`` and read no token from the environment), a variable winning over a flag
given on the command line, a token file variable read where a token flag was given."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_helpers import kill_tree, tls_controller, wait_for

from mlsched.cli import main
from mlsched.core.errors import SpecError
from mlsched.net.env import add_connection_args, resolve, token_of

pytestmark = pytest.mark.processes  # an agent process


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_connection_args(p, default_controller=None, ca_help="CA")
    return resolve(p.parse_args(argv))


def test_a_flag_wins_over_its_variable_and_a_token_flag_over_both_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "token"
    secret.write_text("from-file\n")
    secret.chmod(0o600)
    monkeypatch.setenv("MLSCHED_CONTROLLER", "ctl.example:50051")
    monkeypatch.setenv("MLSCHED_TLS_CA", "/etc/mlsched/ca.pem")
    monkeypatch.setenv("MLSCHED_TOKEN_FILE", str(secret))
    args = _parse([])
    assert (args.controller, args.tls_ca) == ("ctl.example:50051", "/etc/mlsched/ca.pem")
    assert token_of(args) == "from-file"
    args = _parse(["--controller", "10.0.0.5:1", "--tls-ca", "ca.pem", "--token", "flag"])
    assert (args.controller, args.tls_ca, token_of(args)) == ("10.0.0.5:1", "ca.pem", "flag")
    monkeypatch.setenv("MLSCHED_TOKEN", "env")  # with the file variable too: which one?
    with pytest.raises(SpecError, match="token"):
        token_of(_parse([]))
    monkeypatch.delenv("MLSCHED_CONTROLLER")
    with pytest.raises(SpecError, match="--controller"):  # nothing says where it is
        _parse([])


def test_an_agent_and_a_client_configured_by_the_environment_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ctl, pki, token = tls_controller(tmp_path, "a1", "alice")
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MLSCHED_CONTROLLER": f"127.0.0.1:{ctl.port}",
        "MLSCHED_TOKEN_FILE": str(token),
        "MLSCHED_TLS_CA": str(pki / "ca.pem"),
        "MLSCHED_TLS_CERT": str(pki / "a1.pem"),
        "MLSCHED_TLS_KEY": str(pki / "a1.key"),
    }
    log = open(tmp_path / "agent.log", "wb")  # noqa: SIM115 (closed below)
    agent = subprocess.Popen(
        [sys.executable, "-m", "mlsched", "agent", "--name", "a1", "--host", "127.0.0.1",
         "--gpus", "1", "--gpu-type", "cpu", "--cpus", "2", "--mem-gb", "4",
         "--workdir", str(tmp_path / "a1")],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for(lambda: len(ctl.agents.alive()) == 1, 60, "the agent registered")
        for name in ("CONTROLLER", "TOKEN_FILE", "TLS_CA"):
            monkeypatch.setenv(f"MLSCHED_{name}", env[f"MLSCHED_{name}"])
        monkeypatch.setenv("MLSCHED_TLS_CERT", str(pki / "alice.pem"))
        monkeypatch.setenv("MLSCHED_TLS_KEY", str(pki / "alice.key"))
        capsys.readouterr()
        assert main(["status", "--json"]) == 0
        agents = json.loads(capsys.readouterr().out)["cluster"]["agents"]
        assert [a["name"] for a in agents] == ["a1"]
        # A flag wins: the same command told another (closed) port fails.
        assert main(["status", "--controller", "127.0.0.1:1", "--timeout", "2"]) != 0
    finally:
        kill_tree(agent.pid, signal.SIGTERM)
        agent.wait(timeout=30)
        log.close()
        ctl.stop()
