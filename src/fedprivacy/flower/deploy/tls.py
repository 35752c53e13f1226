"""TLS material for a Flower deployment: a fresh certificate authority and a server certificate.

A SuperLink serves gRPC over TLS with a certificate signed by a CA that every SuperNode (and
``flwr run``) trusts. :func:`generate_tls_materials` makes both in a run directory: an ECDSA
P-256 CA (``ca.crt``, ``ca.key``) and a server certificate for the given hosts (``server.crt``,
``server.key``, subject alternative names: IP addresses and DNS names, extended key usage
``serverAuth``), every key from the OS's randomness (``cryptography``), private keys written
0600. They are the files of Flower's ``--ssl-ca-certfile`` / ``--ssl-certfile`` /
``--ssl-keyfile`` (SuperLink) and ``--root-certificates`` (SuperNode).

A client that trusts another CA, or connects by a name the certificate does not list, is
refused by the TLS handshake itself (``tests/flower/deploy/test_tls.py`` runs real handshakes over
loopback).

Examples
--------
>>> import tempfile
>>> m = generate_tls_materials(tempfile.mkdtemp(), hosts=("127.0.0.1", "localhost"))
>>> sorted(p.name for p in m.files())
['ca.crt', 'ca.key', 'server.crt', 'server.key']
>>> m.hosts
('127.0.0.1', 'localhost')
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from fedprivacy._validation import require_int
from fedprivacy.errors import ParameterError
from fedprivacy.files import atomic_write_bytes

__all__ = ["TlsMaterials", "generate_tls_materials"]

#: Validity of a generated certificate when not given (a deployment is short-lived).
DEFAULT_DAYS = 7


@dataclass(frozen=True)
class TlsMaterials:
    """Paths of a deployment's TLS files.

    Attributes
    ----------
    ca_cert, ca_key : pathlib.Path
        The certificate authority (its key signs the server certificate; keep it private).
    server_cert, server_key : pathlib.Path
        The SuperLink's certificate and key.
    hosts : tuple of str
        The names and addresses the server certificate is valid for.
    """

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    hosts: tuple[str, ...]

    def files(self) -> tuple[Path, ...]:
        """The four files."""
        return (self.ca_cert, self.ca_key, self.server_cert, self.server_key)


def _names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    """Subject alternative names: an IP address where the host parses as one, else a DNS name."""
    if isinstance(hosts, str) or not hosts:
        raise ParameterError("hosts", "must be a non-empty sequence of host names or addresses")
    names: list[x509.GeneralName] = []
    for host in hosts:
        if not isinstance(host, str) or not host or any(c.isspace() for c in host):
            raise ParameterError("hosts", f"each host must be a name or an address, got {host!r}")
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _ca_certificate(
    key: ec.EllipticCurvePrivateKey, name: x509.Name, start: dt.datetime, end: dt.datetime
) -> x509.Certificate:
    """A self-signed CA certificate that may sign certificates only (path length 0)."""
    usage = x509.KeyUsage(
        digital_signature=False,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )


def generate_tls_materials(
    out_dir: str | Path,
    *,
    hosts: Sequence[str] = ("127.0.0.1", "localhost"),
    days: int = DEFAULT_DAYS,
    common_name: str = "fedprivacy deployment",
) -> TlsMaterials:
    """Make a fresh CA and a server certificate for ``hosts`` in ``out_dir``.

    Parameters
    ----------
    out_dir : str or pathlib.Path
        Folder of the four files (created if missing; existing files are replaced).
    hosts : sequence of str
        Addresses (``127.0.0.1``, ``::1``) and DNS names the SuperLink is reached by.
    days : int
        Validity in days (at least 1), from one minute ago (clock skew).
    common_name : str
        The CA's common name.

    Returns
    -------
    TlsMaterials
        The paths.

    Raises
    ------
    ParameterError
        For an empty or malformed host, or ``days < 1``.
    """
    names = _names(hosts)
    validity = dt.timedelta(days=require_int("days", days, minimum=1))
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{common_name} CA")])
    ca_cert = _ca_certificate(ca_key, ca_name, now, now + validity)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + validity)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    folder = Path(out_dir)
    materials = TlsMaterials(
        folder / "ca.crt",
        folder / "ca.key",
        folder / "server.crt",
        folder / "server.key",
        tuple(hosts),
    )
    atomic_write_bytes(materials.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM))
    atomic_write_bytes(materials.ca_key, _pem_key(ca_key), private=True)
    atomic_write_bytes(materials.server_cert, server_cert.public_bytes(serialization.Encoding.PEM))
    atomic_write_bytes(materials.server_key, _pem_key(server_key), private=True)
    return materials
