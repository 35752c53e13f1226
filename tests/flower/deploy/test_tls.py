"""The deployment's TLS material, judged by real TLS handshakes over loopback."""

from __future__ import annotations

import ipaddress
import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest
from cryptography import x509

from fedprivacy.errors import ParameterError
from fedprivacy.files import _umask
from fedprivacy.flower.deploy.tls import TlsMaterials, generate_tls_materials

TIMEOUT = 5.0


def _serve_once(m: TlsMaterials) -> tuple[int, threading.Thread, list[BaseException]]:
    """A TLS server on 127.0.0.1 that answers one connection's line with 'ok: <line>'."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(m.server_cert, m.server_key)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(TIMEOUT)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            conn, _ = listener.accept()
            conn.settimeout(TIMEOUT)
            with context.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(b"ok: " + tls.recv(64))
        except (OSError, ssl.SSLError) as exc:  # the handshake a test expects to fail
            errors.append(exc)
        finally:
            listener.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread, errors


def _client(port: int, ca: Path, hostname: str) -> bytes:
    context = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw:
        with context.wrap_socket(raw, server_hostname=hostname) as tls:
            tls.sendall(b"hello")
            return tls.recv(64)


@pytest.mark.parametrize("hostname", ["127.0.0.1", "localhost"])
def test_a_client_trusting_the_ca_completes_the_handshake(tmp_path: Path, hostname: str) -> None:
    m = generate_tls_materials(tmp_path)
    port, thread, errors = _serve_once(m)
    assert _client(port, m.ca_cert, hostname) == b"ok: hello"
    thread.join(TIMEOUT)
    assert not errors


def test_a_client_trusting_another_ca_is_refused(tmp_path: Path) -> None:
    m = generate_tls_materials(tmp_path / "ours")
    other = generate_tls_materials(tmp_path / "theirs")
    port, thread, errors = _serve_once(m)
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        _client(port, other.ca_cert, "127.0.0.1")
    thread.join(TIMEOUT)
    assert errors  # the server saw the aborted handshake


def test_a_name_the_certificate_does_not_list_is_refused(tmp_path: Path) -> None:
    m = generate_tls_materials(tmp_path, hosts=("127.0.0.1",))
    port, thread, _ = _serve_once(m)
    with pytest.raises(ssl.SSLCertVerificationError, match="match|mismatch"):
        _client(port, m.ca_cert, "localhost")
    thread.join(TIMEOUT)


def test_the_certificates_say_what_they_are(tmp_path: Path) -> None:
    m = generate_tls_materials(tmp_path, hosts=("127.0.0.1", "::1", "superlink.example"), days=2)
    ca = x509.load_pem_x509_certificate(m.ca_cert.read_bytes())
    server = x509.load_pem_x509_certificate(m.server_cert.read_bytes())
    server.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not server.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]
    assert san.get_values_for_type(x509.DNSName) == ["superlink.example"]
    life = server.not_valid_after_utc - server.not_valid_before_utc
    assert 2 * 86400 <= life.total_seconds() <= 2 * 86400 + 60
    # two deployments never share a key or a serial number
    again = generate_tls_materials(tmp_path / "again")
    assert again.ca_key.read_bytes() != m.ca_key.read_bytes()
    other = x509.load_pem_x509_certificate(again.server_cert.read_bytes())
    assert other.serial_number != server.serial_number


def test_private_keys_are_owner_only(tmp_path: Path) -> None:
    m = generate_tls_materials(tmp_path)
    for key in (m.ca_key, m.server_key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    # certificates are public: the mode of any new file
    assert stat.S_IMODE(m.ca_cert.stat().st_mode) == 0o666 & ~_umask()


@pytest.mark.parametrize("hosts", [(), "127.0.0.1", ("",), ("bad host",), (7,)])
def test_bad_hosts_are_parameter_errors(tmp_path: Path, hosts: object) -> None:
    with pytest.raises(ParameterError, match="hosts"):
        generate_tls_materials(tmp_path, hosts=hosts)  # type: ignore[arg-type]


def test_days_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="days"):
        generate_tls_materials(tmp_path, days=0)
