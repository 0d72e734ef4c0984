"""Certificates: chain to the CA, carry the right names, usages and file modes."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from dra_e2e.kubeconfig import write_kubeconfig
from dra_e2e.pki import CertificateAuthority, write_service_account_keys


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_serving_cert_chains_to_ca_with_sans(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path)
    pair = ca.issue(
        tmp_path,
        "apiserver",
        common_name="kube-apiserver",
        server=True,
        dns_names=("kubernetes.default.svc",),
        ip_addresses=("10.200.3.1", "127.0.0.1"),
    )
    cert, ca_cert = _load(pair.cert), _load(ca.pair.cert)
    cert.verify_directly_issued_by(ca_cert)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["kubernetes.default.svc"]
    assert sans.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("10.200.3.1"),
        ipaddress.ip_address("127.0.0.1"),
    ]
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert (pair.key.stat().st_mode & 0o777) == 0o600


def test_client_cert_carries_user_and_groups(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path)
    pair = ca.issue(
        tmp_path,
        "kubelet",
        common_name="system:node:e2e-node-0",
        organizations=("system:nodes",),
        client=True,
    )
    subject = _load(pair.cert).subject
    assert subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:node:e2e-node-0"
    assert subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:nodes"


def test_ca_round_trips_and_keeps_issuing(tmp_path: Path) -> None:
    CertificateAuthority.create(tmp_path)
    loaded = CertificateAuthority.load(tmp_path)
    pair = loaded.issue(tmp_path, "later", common_name="later", client=True)
    _load(pair.cert).verify_directly_issued_by(_load(loaded.pair.cert))


def test_service_account_keys_are_ec(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    pair = write_service_account_keys(tmp_path)
    key = serialization.load_pem_private_key(pair.key.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert b"BEGIN PUBLIC KEY" in pair.cert.read_bytes()


def test_kubeconfig_references_absolute_cert_paths(tmp_path: Path) -> None:
    import yaml

    ca = CertificateAuthority.create(tmp_path)
    client = ca.issue(tmp_path, "admin", common_name="admin", client=True)
    path = write_kubeconfig(
        tmp_path / "admin.kubeconfig",
        server="https://10.200.0.1:6443",
        ca_cert=ca.pair.cert,
        client=client,
        user="admin",
    )
    config = yaml.safe_load(path.read_text())
    assert config["clusters"][0]["cluster"]["server"] == "https://10.200.0.1:6443"
    assert Path(config["users"][0]["user"]["client-key"]).is_absolute()
    assert (path.stat().st_mode & 0o777) == 0o600
