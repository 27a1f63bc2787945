"""Named contexts (``mlsched context``, ``net/contexts.py``): written, listed and chosen as
kubeconfig's are, a context supplying only what no flag or variable gives, and a client
reaching a real controller over mutual TLS through a context alone.

Plausible bugs this catches: a context winning over a flag or a variable, relative paths
read from the working directory instead of the file's, ``--context`` or
``MLSCHED_CONTEXT`` ignored, a malformed file or an unknown context accepted silently, the
file written readable by others."""

from __future__ import annotations

import argparse
import json
import stat
from pathlib import Path

import pytest
from cluster_helpers import tls_controller

from mlsched.cli import main
from mlsched.core.errors import SpecError
from mlsched.net.contexts import load_config
from mlsched.net.env import add_connection_args, resolve, token_of


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home" / "config.yaml"
    monkeypatch.setenv("MLSCHED_CONFIG", str(path))
    return path


def _resolved(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_connection_args(p, default_controller="127.0.0.1:50051", ca_help="CA")
    return resolve(p.parse_args(argv))


def test_contexts_are_written_chosen_and_yield_to_flags_and_variables(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    token = tmp_path / "lab.token"
    token.write_text("lab-secret\n")
    token.chmod(0o600)
    assert main(["context", "set", "lab", "--controller", "lab.example:50051",
                 "--token-file", str(token), "--tls-ca", str(tmp_path / "ca.pem")]) == 0  # fmt: skip
    assert main(["context", "set", "prod", "--controller", "prod.example:443"]) == 0
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    capsys.readouterr()
    assert main(["context", "list"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "  lab: lab.example:50051", "* prod: prod.example:443",
    ]  # fmt: skip
    assert _resolved([]).controller == "prod.example:443"  # the current one
    assert main(["context", "use", "lab"]) == 0
    args = _resolved([])
    assert (args.controller, args.tls_ca) == ("lab.example:50051", str(tmp_path / "ca.pem"))
    assert token_of(args) == "lab-secret"
    assert _resolved(["--context", "prod"]).controller == "prod.example:443"
    monkeypatch.setenv("MLSCHED_CONTEXT", "prod")
    assert _resolved([]).controller == "prod.example:443"
    monkeypatch.setenv("MLSCHED_CONTROLLER", "env.example:1")  # a variable wins over it
    assert _resolved([]).controller == "env.example:1"
    assert _resolved(["--controller", "flag.example:2"]).controller == "flag.example:2"
    monkeypatch.setenv("MLSCHED_TOKEN", "env-token")
    assert token_of(_resolved(["--context", "lab"])) == "env-token"
    with pytest.raises(SpecError, match="context"):
        _resolved(["--context", "nowhere"])
    assert main(["context", "use", "nowhere"]) == 2


def test_relative_paths_are_the_file_s_and_a_malformed_file_is_refused_by_field(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    config.parent.mkdir(parents=True)
    config.write_text(
        "current-context: lab\n"
        "contexts:\n  lab: {controller: 'h:1', tls-ca: pki/ca.pem, tls-cert: ~/a.pem}\n"
    )
    monkeypatch.chdir(tmp_path)
    args = _resolved([])
    assert args.tls_ca == str(config.parent / "pki" / "ca.pem")
    assert args.tls_cert == str(Path("~/a.pem").expanduser())
    for text, field in [
        ("contexts:\n  lab: {controller: 'h:1', token: secret}\n", "config.contexts.lab.token"),
        ("current-context: x\ncontexts: {}\n", "config.current-context"),
        ("contexts: [a, b]\n", "config.contexts"),
        ("clusters: {}\n", "config.clusters"),
        ("contexts:\n  lab: {controller: ''}\n", "config.contexts.lab.controller"),
    ]:
        config.write_text(text)
        with pytest.raises(SpecError) as err:
            load_config()
        assert err.value.field == field, text


def test_a_client_reaches_a_mutual_tls_controller_through_a_context_alone(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ctl, pki, token = tls_controller(tmp_path, "alice")
    try:
        assert main(["context", "set", "local", "--controller", f"localhost:{ctl.port}",
                     "--token-file", str(token), "--tls-ca", str(pki / "ca.pem"),
                     "--tls-cert", str(pki / "alice.pem"),
                     "--tls-key", str(pki / "alice.key")]) == 0  # fmt: skip
        capsys.readouterr()
        assert main(["status", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["jobs"] == []
    finally:
        ctl.stop()
