"""Certificates for the webhook's tests: a CA, serving pairs it signs, and a Secret volume.

:class:`SecretVolume` lays files out as the kubelet does for a Secret volume
(``tls.crt -> ..data/tls.crt``, ``..data -> ..<timestamp>``) and updates them as it does:
a new timestamped directory, then one atomic rename of the ``..data`` symlink.
"""

from __future__ import annotations

import datetime
import ipaddress
import itertools
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["CertificateAuthority", "SecretVolume", "ServingPair", "write_self_signed"]

_SANS = x509.SubjectAlternativeName(
    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _builder(
    subject: str, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
    )


@dataclass(frozen=True)
class ServingPair:
    """A serving certificate (PEM and DER) with its key (PEM)."""

    cert_pem: bytes
    key_pem: bytes
    der: bytes


class CertificateAuthority:
    """A CA that signs serving pairs for ``localhost``/``127.0.0.1`` (the API server's view)."""

    def __init__(self) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dra-webhook-test-ca")])
        cert = (
            _builder("dra-webhook-test-ca", self.name, self._key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.pem = cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, common_name: str) -> ServingPair:
        """A new serving certificate and key, signed by this CA."""
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            _builder(common_name, self.name, key.public_key())
            .add_extension(_SANS, critical=False)
            .sign(self._key, hashes.SHA256())
        )
        return ServingPair(
            cert_pem=cert.public_bytes(serialization.Encoding.PEM),
            key_pem=_key_pem(key),
            der=cert.public_bytes(serialization.Encoding.DER),
        )


def write_self_signed(directory: Path) -> tuple[Path, Path]:
    """A self-signed ``localhost`` certificate (its own trust anchor) and key in ``directory``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dra-webhook-test")])
    cert = (
        _builder("dra-webhook-test", name, key.public_key())
        .add_extension(_SANS, critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(_key_pem(key))
    return cert_file, key_file


class SecretVolume:
    """A directory updated the way the kubelet updates a Secret volume."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._versions = itertools.count()
        root.mkdir(parents=True, exist_ok=True)

    @property
    def cert_file(self) -> Path:
        """``tls.crt`` as the container sees it."""
        return self.root / "tls.crt"

    @property
    def key_file(self) -> Path:
        """``tls.key`` as the container sees it."""
        return self.root / "tls.key"

    def publish(self, *, cert_pem: bytes, key_pem: bytes) -> None:
        """Write a new version and switch ``..data`` to it in one rename."""
        version = self.root / f"..2026_01_01_00_00_{next(self._versions):02d}"
        version.mkdir()
        (version / "tls.crt").write_bytes(cert_pem)
        (version / "tls.key").write_bytes(key_pem)
        staged = self.root / "..data_tmp"
        staged.symlink_to(version.name)
        os.replace(staged, self.root / "..data")
        for name in ("tls.crt", "tls.key"):
            if not (self.root / name).is_symlink():
                (self.root / name).symlink_to(f"..data/{name}")
