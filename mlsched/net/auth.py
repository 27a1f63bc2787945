"""Token authentication with two roles, and TLS, for every mlsched gRPC endpoint.

Clients send ``authorization: Bearer <token>`` metadata on every call, and the controller's
interceptor rejects a call without a valid credential for the method's role with
``UNAUTHENTICATED`` before any handler runs:

* **users** (``mlsched submit/status/cancel``: the JobService) present the user token;
* **agents** (the AgentService) present an agent credential ``agent:<agent id>:<mac>``,
  an HMAC-SHA256 of the id under the controller's agent secret (``mlsched agent-token``
  derives it). The credential is bound to its id: the handlers refuse a Register or
  Heartbeat that names another agent (PERMISSION_DENIED), and a user token is no agent
  credential. Without an agent secret (a one-machine setup on loopback) the user token
  serves both roles.

The standard health service is exempt, so load balancers and probes need no token. TLS is
used when certificates are configured; with a CA on the server side, clients must present
a certificate signed by it (mutual TLS). Token and secret files readable by group or others
are refused.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import os
import secrets
import socket
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from mlsched.core.errors import SpecError

__all__ = [
    "ClientAuth",
    "TokenInterceptor",
    "agent_of",
    "agent_token",
    "bearer_token",
    "check_listen",
    "client_channel",
    "is_loopback",
    "new_secret",
    "read_secret_file",
    "read_token",
    "server_credentials",
    "write_file",
    "write_private_file",
]

log = logging.getLogger(__name__)

HEADER = "authorization"
_EXEMPT = ("/grpc.health.v1.Health/",)
_AGENT_METHODS = "/mlsched.v1.AgentService/"
_USER_METHODS = "/mlsched.v1.JobService/"
_AGENT_PREFIX = "agent:"


def write_private_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` readable by its owner only, atomically (:func:`write_file`)."""
    write_file(path, data, 0o600)


def new_secret() -> str:
    """A new random token (256 bits, URL-safe) that never starts with ``-``: a token is
    handed to commands as ``--token TOKEN``, and argparse takes a value that starts with
    ``-`` for an option (one draw in 64 did)."""
    while True:
        token = secrets.token_urlsafe(32)
        if not token.startswith("-"):
            return token


def write_file(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to ``path`` with ``mode``, and atomically: a reader sees the old file
    or the new one whole, never a part or a moment with another mode."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(tmp, mode)  # a leftover file keeps its own mode through O_CREAT
    os.replace(tmp, path)


def read_secret_file(path: str, field: str) -> str:
    """The first line of ``path``, refused when group or others may read the file."""
    try:
        mode = os.stat(path).st_mode
        text = Path(path).read_text(encoding="utf-8", errors="strict").strip().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        why = getattr(err, "strerror", None) or "not UTF-8 text"
        raise SpecError(field, path, f"a readable file ({why})") from None
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        raise SpecError(
            field, path, f"a file only its owner can read (chmod 600 {path}: it holds a secret)"
        )
    if not text or not text[0].strip():
        raise SpecError(
            field,
            path,
            f"a file whose first line is the {'token' if 'token' in field else 'secret'}",
        )
    return text[0].strip()


def read_token(token: str | None, token_file: str | None) -> str | None:
    """The token from ``--token`` or ``--token-file`` (first line, stripped)."""
    if token and token_file:
        raise SpecError("token", "both --token and --token-file", "one of them")
    if token_file:
        return read_secret_file(token_file, "token_file")
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


def check_listen(
    address: str, token: str | None, agent_secret: str | None = None, *, tls: bool = False
) -> None:
    """Refuse an endpoint reachable from other machines without both roles' credentials
    (a user token and an agent secret); warn when it would carry them in plaintext."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise SpecError("listen", address, "HOST:PORT (port 0 picks a free one)")
    if is_loopback(host):
        return
    where = host or "all interfaces"
    if token is None:
        raise SpecError(
            "listen",
            address,
            "a loopback address (127.0.0.1, localhost, [::1]) unless a token is set: "
            "pass --token or --token-file (and --tls-cert/--tls-key for TLS) to listen on "
            f"{where}",
        )
    if agent_secret is None:
        raise SpecError(
            "listen",
            address,
            "a loopback address unless agents have credentials of their own: pass "
            f"--agent-secret-file (see mlsched agent-token) to listen on {where}",
        )
    if not tls:
        log.warning(
            "[auth] listening on %s without TLS: tokens cross the network in plaintext "
            "(pass --tls-cert/--tls-key)",
            where,
        )


def agent_token(secret: str, agent_id: str) -> str:
    """The credential of agent ``agent_id`` under the controller's agent ``secret``."""
    mac = hmac.new(secret.encode(), f"mlsched-agent:{agent_id}".encode(), hashlib.sha256)
    return f"{_AGENT_PREFIX}{agent_id}:{mac.hexdigest()}"


def bearer_token(context: grpc.ServicerContext) -> str | None:
    """The bearer token a call came with (None: none)."""
    return _bearer(context.invocation_metadata())


def _bearer(metadata: Any) -> str | None:
    for key, value in metadata or ():
        if key == HEADER:
            text = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
            return text.removeprefix("Bearer ") if text.startswith("Bearer ") else None
    return None


def agent_of(context: grpc.ServicerContext) -> str | None:
    """The agent id a call's credential is bound to (None: a shared token, or none). The
    interceptor has checked the credential before any handler calls this."""
    token = _bearer(context.invocation_metadata())
    if token is None or not token.startswith(_AGENT_PREFIX):
        return None
    return token[len(_AGENT_PREFIX) :].rpartition(":")[0] or None


class TokenInterceptor(grpc.ServerInterceptor):
    """Rejects calls without a valid credential for the method's role (health exempt).

    ``token`` is the user token; with ``agent_secret`` the AgentService takes only agent
    credentials derived from it, otherwise the user token serves agents too.
    """

    def __init__(
        self,
        token: str,
        agent_secret: str | None = None,
        is_user: Callable[[str], bool] | None = None,
    ) -> None:
        self._user = token.encode()
        self._secret = agent_secret
        self._is_user_token = is_user  # other users' tokens (mlsched/net/users.py)

        def deny(requests: Any, context: grpc.ServicerContext) -> Any:
            context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "missing or wrong token: pass --token or --token-file with the controller's "
                "(agents: their own credential from mlsched agent-token)",
            )

        # Stream-stream: aborts before reading a request, whatever the method's shape.
        self._deny = grpc.stream_stream_rpc_method_handler(deny)

    def _is_operator(self, token: bytes) -> bool:
        return hmac.compare_digest(token, self._user)

    def _is_user(self, token: bytes) -> bool:
        if self._is_operator(token):
            return True
        other = self._is_user_token
        return other is not None and other(token.decode(errors="replace"))

    def _is_agent(self, token: bytes) -> bool:
        if self._secret is None:
            return self._is_operator(token)  # never a user's own token
        text = token.decode(errors="replace")
        if not text.startswith(_AGENT_PREFIX):
            return False
        agent_id = text[len(_AGENT_PREFIX) :].rpartition(":")[0]
        return bool(agent_id) and hmac.compare_digest(
            token, agent_token(self._secret, agent_id).encode()
        )

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method or ""
        if method.startswith(_EXEMPT):
            return continuation(handler_call_details)
        bearer = _bearer(handler_call_details.invocation_metadata)
        if bearer is None:
            return self._deny
        token = bearer.encode()
        if method.startswith(_AGENT_METHODS):
            ok = self._is_agent(token)
        elif method.startswith(_USER_METHODS):
            ok = self._is_user(token)
        else:  # unknown methods: any valid credential learns that they do not exist
            ok = self._is_user(token) or self._is_agent(token)
        return continuation(handler_call_details) if ok else self._deny


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
