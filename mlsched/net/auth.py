"""Shared-token authentication and TLS for every mlsched gRPC endpoint.

Clients (agents, ``mlsched submit/status/cancel``) send ``authorization: Bearer <token>``
metadata on every call; the controller's interceptor rejects a call without the right token
with ``UNAUTHENTICATED`` before any handler runs. The standard health service is exempt, so
load balancers and probes need no token. TLS is used when certificates are configured;
with a CA on the server side, clients must present a certificate signed by it (mutual TLS).
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from mlsched.core.errors import SpecError

__all__ = [
    "ClientAuth",
    "TokenInterceptor",
    "check_listen",
    "client_channel",
    "is_loopback",
    "read_token",
    "server_credentials",
]

HEADER = "authorization"
_EXEMPT = ("/grpc.health.v1.Health/",)


def read_token(token: str | None, token_file: str | None) -> str | None:
    """The token from ``--token`` or ``--token-file`` (first line, stripped)."""
    if token and token_file:
        raise SpecError("token", "both --token and --token-file", "one of them")
    if token_file:
        try:
            text = Path(token_file).read_text().strip().splitlines()
        except OSError as err:
            raise SpecError("token_file", token_file, f"a readable file ({err.strerror})") from err
        if not text or not text[0].strip():
            raise SpecError("token_file", token_file, "a file whose first line is the token")
        return text[0].strip()
    if token is not None and not token.strip():
        raise SpecError("token", token, "a non-empty string")
    return token.strip() if token else None


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return all(
                ipaddress.ip_address(info[4][0]).is_loopback
                for info in socket.getaddrinfo(host, None)
            )
        except (OSError, ValueError):
            return False


def check_listen(address: str, token: str | None) -> None:
    """Refuse an unauthenticated endpoint reachable from other machines."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise SpecError("listen", address, "HOST:PORT (port 0 picks a free one)")
    if token is None and not is_loopback(host):
        raise SpecError(
            "listen",
            address,
            "a loopback address (127.0.0.1, localhost, [::1]) unless a token is set: "
            "pass --token or --token-file (and --tls-cert/--tls-key for TLS) to listen on "
            f"{host or 'all interfaces'}",
        )


class TokenInterceptor(grpc.ServerInterceptor):
    """Rejects calls without ``authorization: Bearer <token>`` (health checks exempt)."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

        def deny(requests: Any, context: grpc.ServicerContext) -> Any:
            context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "missing or wrong token: pass --token or --token-file with the controller's",
            )

        # Stream-stream: aborts before reading a request, whatever the method's shape.
        self._deny = grpc.stream_stream_rpc_method_handler(deny)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method or ""
        if method.startswith(_EXEMPT):
            return continuation(handler_call_details)
        for key, value in handler_call_details.invocation_metadata or ():
            if key == HEADER:
                got = value.encode() if isinstance(value, str) else value
                if hmac.compare_digest(got, self._expected):
                    return continuation(handler_call_details)
        return self._deny


def _read(path: str | None, name: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise SpecError(name, path, f"a readable PEM file ({err.strerror})") from err


def server_credentials(
    cert: str | None, key: str | None, ca: str | None = None
) -> grpc.ServerCredentials | None:
    """TLS credentials (mutual TLS when ``ca`` is given), or None for plaintext."""
    if cert is None and key is None:
        if ca is not None:
            raise SpecError("tls_ca", ca, "used together with --tls-cert and --tls-key")
        return None
    if cert is None or key is None:
        raise SpecError(
            "tls_cert" if cert is None else "tls_key", None, "both --tls-cert and --tls-key"
        )
    chain = _read(cert, "tls_cert")
    private = _read(key, "tls_key")
    assert chain is not None and private is not None
    return grpc.ssl_server_credentials(
        [(private, chain)],
        root_certificates=_read(ca, "tls_ca"),
        require_client_auth=ca is not None,
    )


class ClientAuth:
    """How a client reaches a controller: token and optional TLS material."""

    def __init__(
        self,
        token: str | None = None,
        *,
        tls_ca: str | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        server_name: str | None = None,
    ) -> None:
        self.token = token
        if (tls_cert is None) != (tls_key is None):
            raise SpecError(
                "tls_cert" if tls_cert is None else "tls_key", None, "both --tls-cert and --tls-key"
            )
        self.tls_ca, self.tls_cert, self.tls_key = tls_ca, tls_cert, tls_key
        self.server_name = server_name

    @property
    def tls(self) -> bool:
        """TLS when any certificate is given (no CA: the system's roots)."""
        return any(x is not None for x in (self.tls_ca, self.tls_cert, self.tls_key))

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return ((HEADER, f"Bearer {self.token}"),) if self.token else ()


def client_channel(target: str, auth: ClientAuth | None = None) -> grpc.Channel:
    """A channel to ``target`` that sends the token on every call (TLS when a CA is set)."""
    auth = auth or ClientAuth()
    options: list[tuple[str, Any]] = []
    if auth.server_name:
        options.append(("grpc.ssl_target_name_override", auth.server_name))
    if auth.tls:
        creds = grpc.ssl_channel_credentials(
            root_certificates=_read(auth.tls_ca, "tls_ca"),
            private_key=_read(auth.tls_key, "tls_key"),
            certificate_chain=_read(auth.tls_cert, "tls_cert"),
        )
        channel = grpc.secure_channel(target, creds, options=options)
    else:
        channel = grpc.insecure_channel(target, options=options)
    if auth.token:
        channel = grpc.intercept_channel(channel, _MetadataInterceptor(auth.metadata()))
    return channel


class _MetadataInterceptor(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self._metadata = metadata

    def _call(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        return continuation(_Details(details, self._metadata), request)

    intercept_unary_unary = _call
    intercept_unary_stream = _call
    intercept_stream_unary = _call
    intercept_stream_stream = _call


class _Details(grpc.ClientCallDetails):
    def __init__(self, base: Any, extra: tuple[tuple[str, str], ...]) -> None:
        self.method = base.method
        self.timeout = base.timeout
        self.metadata = [*(base.metadata or ()), *extra]
        self.credentials = base.credentials
        self.wait_for_ready = base.wait_for_ready
        self.compression = base.compression
