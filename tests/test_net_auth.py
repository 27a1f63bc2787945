"""Token auth and TLS of the gRPC endpoints, against a real server on 127.0.0.1."""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import subprocess
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from mlsched.core.errors import SpecError
from mlsched.net.auth import (
    ClientAuth,
    TokenInterceptor,
    check_listen,
    client_channel,
    is_loopback,
    read_token,
    server_credentials,
)

TOKEN = "s3cret"
ECHO = "/t.T/Echo"
TIMEOUT = 5.0


# -- a real server ---------------------------------------------------------------------------


def _echo(request: bytes, context: grpc.ServicerContext) -> bytes:
    return b"echo:" + request


def _serve(creds: grpc.ServerCredentials | None = None) -> tuple[grpc.Server, int]:
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=2), interceptors=[TokenInterceptor(TOKEN)]
    )
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                "t.T", {"Echo": grpc.unary_unary_rpc_method_handler(_echo)}
            )
        ]
    )
    address = "127.0.0.1:0"
    port = server.add_secure_port(address, creds) if creds else server.add_insecure_port(address)
    server.start()
    return server, port


@pytest.fixture(scope="module")
def plain() -> Iterator[str]:
    server, port = _serve()
    yield f"127.0.0.1:{port}"
    server.stop(None)


def echo(target: str, auth: ClientAuth | None) -> bytes:
    with client_channel(target, auth) as channel:
        reply: bytes = channel.unary_unary(ECHO)(b"hi", timeout=TIMEOUT)
        return reply


def echo_error(target: str, auth: ClientAuth | None) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        echo(target, auth)
    return info.value


def health_status(target: str, auth: ClientAuth | None) -> Any:
    with client_channel(target, auth) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT).status


# -- token -----------------------------------------------------------------------------------


def test_right_token_passes(plain: str) -> None:
    assert echo(plain, ClientAuth(TOKEN)) == b"echo:hi"


@pytest.mark.parametrize("auth", [None, ClientAuth(), ClientAuth("wrong"), ClientAuth(TOKEN + "x")])
def test_missing_or_wrong_token_is_unauthenticated(plain: str, auth: ClientAuth | None) -> None:
    err = echo_error(plain, auth)
    assert err.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "--token" in (err.details() or "")


def test_unknown_method_does_not_leak_without_token(plain: str) -> None:
    # Without a token every method looks alike; with one, an unknown method is UNIMPLEMENTED.
    for auth, code in (
        (None, grpc.StatusCode.UNAUTHENTICATED),
        (ClientAuth(TOKEN), grpc.StatusCode.UNIMPLEMENTED),
    ):
        with client_channel(plain, auth) as channel, pytest.raises(grpc.RpcError) as info:
            channel.unary_unary("/t.T/Nope")(b"", timeout=TIMEOUT)
        assert info.value.code() == code


@pytest.mark.parametrize("auth", [None, ClientAuth(TOKEN), ClientAuth("wrong")])
def test_health_needs_no_token(plain: str, auth: ClientAuth | None) -> None:
    assert health_status(plain, auth) == health_pb2.HealthCheckResponse.SERVING


def test_client_metadata_is_appended_to_the_callers(plain: str) -> None:
    seen: list[tuple[str, str]] = []

    def record(request: bytes, context: grpc.ServicerContext) -> bytes:
        seen.extend((m.key, m.value) for m in context.invocation_metadata())
        return b""

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=1), interceptors=[TokenInterceptor(TOKEN)]
    )
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                "t.T", {"Echo": grpc.unary_unary_rpc_method_handler(record)}
            )
        ]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with client_channel(f"127.0.0.1:{port}", ClientAuth(TOKEN)) as channel:
            channel.unary_unary(ECHO)(b"", timeout=TIMEOUT, metadata=[("x-trace", "7")])
    finally:
        server.stop(None)
    assert ("x-trace", "7") in seen
    assert ("authorization", f"Bearer {TOKEN}") in seen


def test_streaming_call_carries_the_token() -> None:
    def count(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        yield from (b"1", b"2")

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=1), interceptors=[TokenInterceptor(TOKEN)]
    )
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                "t.T", {"Count": grpc.unary_stream_rpc_method_handler(count)}
            )
        ]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with client_channel(f"127.0.0.1:{port}", ClientAuth(TOKEN)) as channel:
            assert list(channel.unary_stream("/t.T/Count")(b"", timeout=TIMEOUT)) == [b"1", b"2"]
    finally:
        server.stop(None)


# -- listen addresses ------------------------------------------------------------------------


def test_public_listen_without_token_refused() -> None:
    with pytest.raises(SpecError) as info:
        check_listen("0.0.0.0:5000", None)
    assert info.value.field == "listen"
    assert "--token" in str(info.value)
    with pytest.raises(SpecError, match="all interfaces"):
        check_listen(":5000", None)


@pytest.mark.parametrize("address", ["127.0.0.1:0", "localhost:1", "[::1]:5", "127.0.0.2:80"])
def test_loopback_listen_needs_no_token(address: str) -> None:
    check_listen(address, None)


@pytest.mark.parametrize("address", ["0.0.0.0:5000", "[::]:5000", "10.1.2.3:7000", ":5000"])
def test_public_listen_with_both_roles_credentials_passes(address: str) -> None:
    check_listen(address, TOKEN, "agent-secret", tls=True)


def test_public_listen_needs_agent_credentials_and_warns_without_tls(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with pytest.raises(SpecError, match="--agent-secret-file") as info:
        check_listen("0.0.0.0:5000", TOKEN)
    assert info.value.field == "listen"
    with caplog.at_level("WARNING"):
        check_listen("0.0.0.0:5000", TOKEN, "agent-secret", tls=False)
    assert "without TLS" in caplog.text


@pytest.mark.parametrize("address", ["nohostport", "host:", "host:port", "127.0.0.1:-1"])
def test_bad_listen_address_rejected(address: str) -> None:
    for token in (None, TOKEN):
        with pytest.raises(SpecError, match="HOST:PORT") as info:
            check_listen(address, token)
        assert info.value.field == "listen"


def test_is_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("[::1]") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("") and not is_loopback("10.0.0.1")
    assert not is_loopback("no-such-host.invalid")


# -- reading the token -----------------------------------------------------------------------


def test_read_token(tmp_path: Path) -> None:
    assert read_token(None, None) is None
    assert read_token(" abc ", None) == "abc"
    token_file = tmp_path / "token"
    token_file.write_text("\n  from-file  \nsecond line ignored\n")
    token_file.chmod(0o600)
    assert read_token(None, str(token_file)) == "from-file"
    with pytest.raises(SpecError, match="both --token and --token-file"):
        read_token("abc", str(token_file))
    with pytest.raises(SpecError) as info:
        read_token("   ", None)
    assert info.value.field == "token"


@pytest.mark.parametrize("content", ["", "\n", "  \n\t\n"])
def test_read_token_empty_file_rejected(tmp_path: Path, content: str) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(content)
    token_file.chmod(0o600)
    with pytest.raises(SpecError, match="first line is the token") as info:
        read_token(None, str(token_file))
    assert info.value.field == "token_file"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_token_file_readable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("secret\n")
    token_file.chmod(mode)
    with pytest.raises(SpecError, match="chmod 600") as info:
        read_token(None, str(token_file))
    assert info.value.field == "token_file"


def test_read_token_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="readable") as info:
        read_token(None, str(tmp_path / "absent"))
    assert info.value.field == "token_file"


def test_server_credentials_arguments(tmp_path: Path) -> None:
    assert server_credentials(None, None) is None
    with pytest.raises(SpecError) as info:
        server_credentials(None, None, "ca.pem")
    assert info.value.field == "tls_ca"
    with pytest.raises(SpecError, match="both --tls-cert and --tls-key"):
        server_credentials("cert.pem", None)
    with pytest.raises(SpecError, match="readable PEM") as info:
        server_credentials(str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"))
    assert info.value.field == "tls_cert"


# -- TLS -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    rogue_cert: str  # a client certificate no trusted CA signed
    rogue_key: str


def _pki_cryptography(root: Path) -> Pki:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def write_key(name: str) -> tuple[Any, str]:
        key = ec.generate_private_key(ec.SECP256R1())
        path = root / f"{name}.key"
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return key, str(path)

    def issue(
        name: str, key: Any, issuer: Any, issuer_key: Any, *, ca: bool, extras: list[Any]
    ) -> tuple[Any, str]:
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer.subject if issuer is not None else subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        for ext in extras:
            builder = builder.add_extension(ext, critical=False)
        cert = builder.sign(issuer_key if issuer_key is not None else key, hashes.SHA256())
        path = root / f"{name}.pem"
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return cert, str(path)

    ca_key, _ = write_key("ca")
    ca_cert, ca_path = issue("test-ca", ca_key, None, None, ca=True, extras=[])
    server_sans = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    server_key, server_key_path = write_key("server")
    _, server_path = issue(
        "localhost",
        server_key,
        ca_cert,
        ca_key,
        ca=False,
        extras=[server_sans, x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH])],
    )
    client_eku = x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])
    client_key, client_key_path = write_key("client")
    _, client_path = issue("client", client_key, ca_cert, ca_key, ca=False, extras=[client_eku])
    rogue_key, rogue_key_path = write_key("rogue")
    _, rogue_path = issue("rogue", rogue_key, None, None, ca=False, extras=[client_eku])
    return Pki(
        ca_path,
        server_path,
        server_key_path,
        client_path,
        client_key_path,
        rogue_path,
        rogue_key_path,
    )


def _pki_openssl(root: Path, openssl: str) -> Pki:
    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=root, check=True, capture_output=True, timeout=30)

    def new_request(name: str, cn: str) -> None:
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        run(
            "req",
            "-new",
            *ec,
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/CN={cn}",
        )

    def sign(name: str, ext: str, *, ca: str | None) -> None:
        (root / f"{name}.ext").write_text(ext)
        # Without a CA the certificate signs itself (the CA's own and the rogue client's).
        signer = f"-CA {ca}.pem -CAkey {ca}.key -CAcreateserial" if ca else f"-signkey {name}.key"
        args = f"-in {name}.csr -out {name}.pem -days 2 -sha256 -extfile {name}.ext"
        run("x509", "-req", *signer.split(), *args.split())

    new_request("ca", "test-ca")
    sign(
        "ca", "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n", ca=None
    )
    leaf = "basicConstraints=critical,CA:FALSE\n"
    new_request("server", "localhost")
    sign(
        "server",
        leaf + "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        ca="ca",
    )
    new_request("client", "client")
    sign("client", leaf + "extendedKeyUsage=clientAuth\n", ca="ca")
    new_request("rogue", "rogue")
    sign("rogue", leaf + "extendedKeyUsage=clientAuth\n", ca=None)
    return Pki(
        *(str(root / n) for n in ("ca.pem", "server.pem", "server.key", "client.pem")),
        *(str(root / n) for n in ("client.key", "rogue.pem", "rogue.key")),
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    try:
        import cryptography  # noqa: F401
    except ImportError:
        openssl = shutil.which("openssl")
        if openssl is None:
            pytest.skip("TLS tests need the 'cryptography' package or the openssl command")
        return _pki_openssl(root, openssl)
    return _pki_cryptography(root)


@pytest.fixture(scope="module")
def tls(pki: Pki) -> Iterator[int]:
    server, port = _serve(server_credentials(pki.server_cert, pki.server_key))
    yield port
    server.stop(None)


@pytest.fixture(scope="module")
def mtls(pki: Pki) -> Iterator[int]:
    server, port = _serve(server_credentials(pki.server_cert, pki.server_key, pki.ca))
    yield port
    server.stop(None)


def test_tls_with_token(pki: Pki, tls: int) -> None:
    # The certificate names both 127.0.0.1 (an IP SAN) and localhost.
    assert echo(f"127.0.0.1:{tls}", ClientAuth(TOKEN, tls_ca=pki.ca)) == b"echo:hi"
    assert echo(f"localhost:{tls}", ClientAuth(TOKEN, tls_ca=pki.ca)) == b"echo:hi"
    err = echo_error(f"127.0.0.1:{tls}", ClientAuth("wrong", tls_ca=pki.ca))
    assert err.code() == grpc.StatusCode.UNAUTHENTICATED
    assert health_status(f"127.0.0.1:{tls}", ClientAuth(tls_ca=pki.ca)) == (
        health_pb2.HealthCheckResponse.SERVING
    )


def test_tls_server_name_override(pki: Pki, tls: int) -> None:
    auth = ClientAuth(TOKEN, tls_ca=pki.ca, server_name="localhost")
    assert echo(f"127.0.0.1:{tls}", auth) == b"echo:hi"
    bad = ClientAuth(TOKEN, tls_ca=pki.ca, server_name="elsewhere.example")
    assert echo_error(f"127.0.0.1:{tls}", bad).code() == grpc.StatusCode.UNAVAILABLE


def test_tls_refuses_untrusted_server_and_plaintext(pki: Pki, tls: int) -> None:
    # A CA that did not sign the server's certificate: the handshake fails.
    untrusted = ClientAuth(TOKEN, tls_ca=pki.rogue_cert)
    assert echo_error(f"127.0.0.1:{tls}", untrusted).code() == grpc.StatusCode.UNAVAILABLE
    assert echo_error(f"127.0.0.1:{tls}", ClientAuth(TOKEN)).code() == (grpc.StatusCode.UNAVAILABLE)


def test_mutual_tls(pki: Pki, mtls: int) -> None:
    target = f"127.0.0.1:{mtls}"
    no_cert = ClientAuth(TOKEN, tls_ca=pki.ca)
    assert echo_error(target, no_cert).code() == grpc.StatusCode.UNAVAILABLE
    rogue = ClientAuth(TOKEN, tls_ca=pki.ca, tls_cert=pki.rogue_cert, tls_key=pki.rogue_key)
    assert echo_error(target, rogue).code() == grpc.StatusCode.UNAVAILABLE
    signed = ClientAuth(TOKEN, tls_ca=pki.ca, tls_cert=pki.client_cert, tls_key=pki.client_key)
    assert echo(target, signed) == b"echo:hi"
    # The token is still required on top of the client certificate.
    wrong = ClientAuth("wrong", tls_ca=pki.ca, tls_cert=pki.client_cert, tls_key=pki.client_key)
    assert echo_error(target, wrong).code() == grpc.StatusCode.UNAUTHENTICATED
