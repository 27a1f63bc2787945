"""Certificates for a cluster's TLS (``mlsched certs``): a CA of the cluster's own, the
controller's server certificate for the DNS names and IP addresses clients and agents reach
it at, and client certificates for users and agents (mutual TLS: a controller started with
``--tls-ca`` refuses a peer without a certificate of its CA).

Keys are ECDSA P-256 (what gRPC's TLS takes, small and fast), written readable by their
owner only; certificates are PEM. A CA found in the directory is reused, never replaced:
re-running the command re-issues the server and client certificates asked for (a rotation)
under the same CA, so agents and users keep trusting it.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mlsched.core.errors import SpecError
from mlsched.core.ids import check_id
from mlsched.net.auth import write_private_file

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

__all__ = ["CA_DAYS", "LEAF_DAYS", "Issued", "issue"]

CA_DAYS = 3650
#: A leaf's lifetime: within the 825 days browsers and many TLS stacks still accept.
LEAF_DAYS = 825
_DNS = re.compile(
    r"^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$"
)


@dataclass(frozen=True)
class Issued:
    """What one run wrote (paths), and whether the CA was made now or found."""

    ca_cert: Path
    ca_key: Path
    ca_created: bool
    written: tuple[Path, ...]


def issue(
    directory: Path,
    *,
    dns: list[str] | tuple[str, ...] = (),
    ips: list[str] | tuple[str, ...] = (),
    clients: list[str] | tuple[str, ...] = (),
    days: int = LEAF_DAYS,
    cluster: str = "mlsched",
) -> Issued:
    """Make (or reuse) the CA in ``directory``; with ``dns`` or ``ips``, the controller's
    certificate (``server.pem``, ``server.key``); one ``NAME.pem``/``NAME.key`` per client.
    Every argument is checked before anything is written."""
    names = [_dns_name(d) for d in dns]
    addresses = [_ip(a) for a in ips]
    who = [check_id(c, "--client") for c in clients]
    if len(set(who)) != len(who):
        raise SpecError("--client", ", ".join(who), "names given once each")
    if {"ca", "server"} & set(who):
        raise SpecError("--client", ", ".join(who), "names other than ca and server")
    if not (isinstance(days, int) and 1 <= days <= 36500):
        raise SpecError("--days", days, "a whole number of days, 1 to 36500")
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert_path, ca_key_path = directory / "ca.pem", directory / "ca.key"
    created = not ca_cert_path.exists()
    if created:
        if ca_key_path.exists():
            raise SpecError("--dir", str(directory), "a directory whose ca.key has its ca.pem")
        ca_cert, ca_key = _make_ca(cluster)
        _write_key(ca_key_path, ca_key)
        _write_cert(ca_cert_path, ca_cert)
    else:
        ca_cert, ca_key = _load_ca(ca_cert_path, ca_key_path)
    written: list[Path] = []
    if names or addresses:
        written += _leaf(directory, "server", ca_cert, ca_key, days, server=(names, addresses))
    for name in who:
        written += _leaf(directory, name, ca_cert, ca_key, days, server=None)
    return Issued(ca_cert_path, ca_key_path, created, tuple(written))


def _dns_name(name: str) -> str:
    text = name.strip().lower().rstrip(".")
    if not text or len(text) > 253 or not _DNS.match(text):
        raise SpecError("--dns", name, "a host name such as ctl.example.org or localhost")
    return text


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        raise SpecError("--ip", text, "an IPv4 or IPv6 address such as 10.0.0.5") from None


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _key() -> ec.EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _make_ca(cluster: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{cluster} CA")])
    start = _now() - dt.timedelta(minutes=5)  # peers whose clocks run a little behind
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + dt.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _load_ca(
    cert_path: Path, key_path: Path
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError) as err:
        raise SpecError(
            "--dir", str(cert_path.parent), f"a readable ca.pem and ca.key ({err})"
        ) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != cert.public_key():
        raise SpecError("--dir", str(cert_path.parent), "a ca.key that belongs to its ca.pem")
    return cert, key


def _leaf(
    directory: Path,
    stem: str,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    days: int,
    *,
    server: tuple[list[str], list[ipaddress.IPv4Address | ipaddress.IPv6Address]] | None,
) -> list[Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = _key()
    common = (server[0][0] if server[0] else str(server[1][0])) if server else stem
    start = _now() - dt.timedelta(minutes=5)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH] if server else [ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
    )
    if server:
        # TLS checks the name a client dialled against these, never the common name.
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in server[0]]
        sans += [x509.IPAddress(a) for a in server[1]]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    key_path, cert_path = directory / f"{stem}.key", directory / f"{stem}.pem"
    _write_key(key_path, key)
    _write_cert(cert_path, cert)
    return [cert_path, key_path]


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    from cryptography.hazmat.primitives import serialization

    write_private_file(
        path,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    from cryptography.hazmat.primitives import serialization

    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    os.replace(tmp, path)
