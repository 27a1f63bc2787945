"""``mlsched certs`` and a cluster on its certificates: a controller requiring client
certificates (mutual TLS), two real agents and the command-line clients, on loopback.

Plausible bugs this catches: a server certificate without the IP or DNS name it is dialled
at (every TLS client refuses it), a client certificate without the client-auth usage (the
controller refuses the agents), a key readable by others, a CA replaced on a second run
(every issued certificate stops verifying), a controller that lets a peer without a
certificate, or with another CA's, in."""

from __future__ import annotations

import json
import stat
from contextlib import AbstractContextManager
from pathlib import Path

import grpc
import pytest
from cluster_helpers import controller, mlp_job, running, wait_for
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from mlsched.agent import Agent, discover
from mlsched.cli import main
from mlsched.net.auth import ClientAuth, client_channel
from mlsched.v1 import jobs_pb2, jobs_pb2_grpc

pytestmark = pytest.mark.processes  # the agents launch a training process


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_certs_makes_a_ca_a_server_and_clients_and_keeps_the_ca(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "pki"
    args = ["certs", "--dir", str(d), "--dns", "localhost", "--ip", "127.0.0.1",
            "--client", "alice", "--client", "a1"]  # fmt: skip
    assert main(args) == 0
    assert "made the CA" in capsys.readouterr().out
    ca = _cert(d / "ca.pem")
    server = _cert(d / "server.pem")
    server.verify_directly_issued_by(ca)
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(a) for a in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    usage = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    for name in ("alice", "a1"):
        client = _cert(d / f"{name}.pem")
        client.verify_directly_issued_by(ca)
        usage = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    for key in d.glob("*.key"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key
    # Again: the CA stays (what it issued keeps verifying), the server certificate is new.
    assert main(["certs", "--dir", str(d), "--ip", "10.0.0.5"]) == 0
    assert "kept the CA" in capsys.readouterr().out
    assert _cert(d / "ca.pem") == ca
    again = _cert(d / "server.pem")
    again.verify_directly_issued_by(ca)
    assert again.serial_number != server.serial_number


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["--ip", "10.0.0.300"], "--ip"),
        (["--dns", "bad name"], "--dns"),
        (["--client", "../etc"], "--client"),
        (["--client", "ca"], "--client"),
        (["--ip", "127.0.0.1", "--days", "0"], "--days"),
    ],
)
def test_bad_arguments_are_refused_naming_the_field_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], field: str
) -> None:
    d = tmp_path / "pki"
    assert main(["certs", "--dir", str(d), *argv]) == 2
    assert field in capsys.readouterr().err
    assert not d.exists() or not list(d.iterdir())


def _agents(address: str, tmp: Path, pki: Path) -> AbstractContextManager[list[Agent]]:
    fleet = []
    for name in ("a1", "a2"):
        auth = ClientAuth(
            None, tls_ca=str(pki / "ca.pem"), tls_cert=str(pki / f"{name}.pem"),
            tls_key=str(pki / f"{name}.key"),
        )  # fmt: skip
        node = discover(controller=address, name=name, host="127.0.0.1", gpus=1,
                        gpu_type="cpu", cpus=2, mem_gb=4, use_nvml=False)  # fmt: skip
        fleet.append(Agent(address, node, workdir=tmp / name, auth=auth, poll_s=0.1,
                           use_nvml=False))  # fmt: skip
    return running(fleet)


def _refused(address: str, auth: ClientAuth) -> bool:
    stub = jobs_pb2_grpc.JobServiceStub(client_channel(address, auth))
    try:
        stub.ListJobs(jobs_pb2.ListJobsRequest(), timeout=5)
    except grpc.RpcError as err:
        return err.code() == grpc.StatusCode.UNAVAILABLE  # the handshake failed
    return False


def test_a_cluster_runs_on_the_certificates_and_refuses_peers_without_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pki, other = tmp_path / "pki", tmp_path / "other"
    assert main(["certs", "--dir", str(pki), "--dns", "localhost", "--ip", "127.0.0.1",
                 "--client", "alice", "--client", "a1", "--client", "a2"]) == 0  # fmt: skip
    assert main(["certs", "--dir", str(other), "--client", "mallory"]) == 0
    ctl = controller(
        tmp_path, slot_seconds=2.0, tls_cert=str(pki / "server.pem"),
        tls_key=str(pki / "server.key"), tls_ca=str(pki / "ca.pem"),
    )  # fmt: skip
    address = f"127.0.0.1:{ctl.port}"
    user = ["--controller", address, "--tls-ca", str(pki / "ca.pem"),
            "--tls-cert", str(pki / "alice.pem"), "--tls-key", str(pki / "alice.key")]  # fmt: skip
    try:
        with _agents(address, tmp_path, pki):
            wait_for(lambda: len(ctl.agents.alive()) == 2, 30, "both agents registered over TLS")
            jobs = tmp_path / "jobs.json"
            jobs.write_text(json.dumps([mlp_job("t1", units=20)]))
            capsys.readouterr()
            assert main(["submit", str(jobs), *user]) == 0
            wait_for(lambda: ctl.job("t1").state == "done", 120, "the job done")
            capsys.readouterr()
            assert main(["status", "--json", *user]) == 0
            listed = json.loads(capsys.readouterr().out)
            assert [j["state"] for j in listed["jobs"]] == ["done"]
            assert len(listed["cluster"]["agents"]) == 2
            ca = str(pki / "ca.pem")
            assert _refused(address, ClientAuth(None, tls_ca=ca))  # no client certificate
            assert _refused(address, ClientAuth(  # a certificate of another CA
                None, tls_ca=ca, tls_cert=str(other / "mallory.pem"),
                tls_key=str(other / "mallory.key"),
            ))  # fmt: skip
            assert _refused(address, ClientAuth(None))  # plaintext
    finally:
        ctl.stop(stop_tasks=True)
