"""shopper/pinned.py over TLS: the connection goes to the address the policy judged, while TLS
still names the host (SNI) and checks the certificate against that name, not against the address."""

from __future__ import annotations

import ssl
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from haggler.shopper.pinned import pinned_client
from haggler.shopper.urls import URLPolicy

try:
    from tests.support.raw_server import RawServer
except ImportError:  # pragma: no cover
    from support.raw_server import RawServer  # type: ignore[no-redef]

HOST = "store.invalid"  # never in DNS (RFC 6761): only the policy's resolver knows it


def _certificate(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for ``name`` and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def _tls_server(cert: Path, key: Path, names: list[str | None]) -> RawServer:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, name, ctx: names.append(name)  # type: ignore[assignment,misc]
    return RawServer(lambda send: send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"),
                     tls=context)


def test_tls_names_the_host_while_connecting_to_the_judged_address(tmp_path, monkeypatch):
    cert, key = _certificate(tmp_path, HOST)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the one certificate trusted
    policy = URLPolicy(allow_private=True, resolver=lambda host: ["127.0.0.1"])
    names: list[str | None] = []
    with _tls_server(cert, key, names) as server, pinned_client(policy) as client:
        answer = client.get(f"https://{HOST}:{server.port}/")
    assert answer.status_code == 200 and answer.text == "ok"
    assert names == [HOST]
    assert f"host: {HOST}:{server.port}".encode() in server.requests[0].lower()


def test_a_certificate_for_another_name_is_refused(tmp_path, monkeypatch):
    cert, key = _certificate(tmp_path, "other.invalid")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    policy = URLPolicy(allow_private=True, resolver=lambda host: ["127.0.0.1"])
    with _tls_server(cert, key, []) as server, pinned_client(policy) as client:
        with pytest.raises(httpx.ConnectError, match="Hostname mismatch"):
            client.get(f"https://{HOST}:{server.port}/")
