"""Certificates for TLS tests of the transport: one CA, and certificates it issues for a
server (by DNS name or IP address) or a client (by common name), as PEM files."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Issued", "TestCa"]

_VALIDITY = datetime.timedelta(days=1)


@dataclass(frozen=True, slots=True)
class Issued:
    """A certificate and its private key, as PEM files and bytes."""

    cert: Path
    key: Path

    @property
    def cert_pem(self) -> bytes:
        """The certificate's PEM."""
        return self.cert.read_bytes()

    @property
    def key_pem(self) -> bytes:
        """The private key's PEM."""
        return self.key.read_bytes()


class TestCa:
    """A new self-signed CA (EC P-256: quick to make) writing into ``directory``."""

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, directory: Path, *, name: str = "test-ca") -> None:
        """Create the CA's key and certificate (``<name>.crt``)."""
        self._dir = directory
        self._dir.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self._cert = (
            _builder(subject, subject, self._key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.cert = directory / f"{name}.crt"
        self.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    @property
    def cert_pem(self) -> bytes:
        """The CA certificate's PEM."""
        return self.cert.read_bytes()

    def server(self, file_name: str, *, hosts: tuple[str, ...] = ("127.0.0.1",)) -> Issued:
        """A serving certificate for ``hosts`` (IP addresses or DNS names)."""
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        return self._issue(
            file_name,
            hosts[0],
            ExtendedKeyUsageOID.SERVER_AUTH,
            x509.SubjectAlternativeName(names),
        )

    def client(self, file_name: str, *, common_name: str) -> Issued:
        """A client certificate for the user ``common_name``."""
        return self._issue(file_name, common_name, ExtendedKeyUsageOID.CLIENT_AUTH, None)

    def server_context(self, issued: Issued, *, client_certs: bool) -> ssl.SSLContext:
        """A serving TLS context presenting ``issued``; with ``client_certs``, requiring a
        client certificate signed by this CA."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(issued.cert), str(issued.key))
        if client_certs:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cafile=str(self.cert))
        return context

    def _issue(
        self,
        file_name: str,
        common_name: str,
        usage: x509.ObjectIdentifier,
        names: x509.SubjectAlternativeName | None,
    ) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        builder = _builder(subject, self._cert.subject, key.public_key()).add_extension(
            x509.ExtendedKeyUsage([usage]), critical=False
        )
        if names is not None:
            builder = builder.add_extension(names, critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        issued = Issued(self._dir / f"{file_name}.crt", self._dir / f"{file_name}.key")
        issued.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        issued.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        issued.key.chmod(0o600)
        return issued


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
    )
