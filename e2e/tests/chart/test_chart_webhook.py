"""The chart's validating admission webhook (``webhook.*``), rendered offline by the pinned Helm."""

from __future__ import annotations

import base64
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import (
    BASE_SETS,
    CHART,
    NAMESPACE,
    REPO,
    HelmFailed,
    helm_path,
    run_helm,
    set_args,
)
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import padding, rsa

WEBHOOK = "dra-dra-driver-nvidia-gpu-webhook"
SERVICE_HOST = f"{WEBHOOK}.{NAMESPACE}.svc"


@pytest.fixture(scope="module")
def helm() -> Path:
    """The pinned Helm binary."""
    try:
        return helm_path()
    except HelmFailed as exc:
        pytest.fail(str(exc))


def _render(helm: Path, sets: Mapping[str, str]) -> list[dict[str, Any]]:
    args = ["template", "dra", str(CHART), "--namespace", NAMESPACE]
    out = run_helm(helm, *args, *set_args({**BASE_SETS, **sets}))
    return [doc for doc in yaml.safe_load_all(out) if doc]


def _named(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def _webhook_objects(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted(
        (o["kind"], o["metadata"]["name"])
        for o in objects
        if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "webhook"
    )


def test_webhook_is_off_by_default(helm: Path) -> None:
    objects = _render(helm, {})
    assert _webhook_objects(objects) == []
    assert not _named(objects, "ValidatingWebhookConfiguration")


def test_chart_made_secret_serves_the_service_name_under_the_ca_bundle(helm: Path) -> None:
    objects = _render(helm, {"webhook.enabled": "true", "webhook.tls.mode": "secret"})
    assert _webhook_objects(objects) == [
        ("Deployment", WEBHOOK),
        ("Secret", f"{WEBHOOK}-cert"),
        ("Service", WEBHOOK),
        ("ServiceAccount", WEBHOOK),
        ("ValidatingWebhookConfiguration", WEBHOOK),
    ]
    secret = _named(objects, "Secret")[f"{WEBHOOK}-cert"]
    assert secret["type"] == "kubernetes.io/tls"
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert SERVICE_HOST in sans.get_values_for_type(x509.DNSName)
    (hook,) = _named(objects, "ValidatingWebhookConfiguration")[WEBHOOK]["webhooks"]
    ca = x509.load_pem_x509_certificate(base64.b64decode(hook["clientConfig"]["caBundle"]))
    assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    ca_key = ca.public_key()
    assert isinstance(ca_key, rsa.RSAPublicKey)
    # The API server trusts the serving certificate through the bundle: signed by that CA.
    assert cert.signature_hash_algorithm is not None
    ca_key.verify(
        cert.signature,
        cert.tbs_certificate_bytes,
        padding.PKCS1v15(),
        cert.signature_hash_algorithm,
    )


def test_webhook_configuration_matches_nvidias(helm: Path) -> None:
    objects = _render(helm, {"webhook.enabled": "true", "webhook.tls.mode": "secret"})
    (hook,) = _named(objects, "ValidatingWebhookConfiguration")[WEBHOOK]["webhooks"]
    assert hook["name"] == "gpu.nvidia.com"
    (rule,) = hook["rules"]
    assert rule["apiGroups"] == ["resource.k8s.io"]
    assert sorted(rule["apiVersions"]) == ["v1", "v1beta1", "v1beta2"]
    assert sorted(rule["operations"]) == ["CREATE", "UPDATE"]
    assert sorted(rule["resources"]) == ["resourceclaims", "resourceclaimtemplates"]
    assert hook["clientConfig"]["service"] == {
        "namespace": NAMESPACE,
        "name": WEBHOOK,
        "port": 443,
        "path": "/validate-resource-claim-parameters",
    }
    assert hook["failurePolicy"] == "Fail"
    assert hook["sideEffects"] == "None"
    assert hook["admissionReviewVersions"] == ["v1"]


def test_deployment_runs_the_console_script_on_the_values_ports(helm: Path) -> None:
    objects = _render(
        helm,
        {
            "webhook.enabled": "true",
            "webhook.tls.mode": "secret",
            "webhook.servicePort": "8443",
            "webhook.containerPort": "9443",
            "webhook.failurePolicy": "Ignore",
        },
    )
    pod = _named(objects, "Deployment")[WEBHOOK]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    scripts = tomllib.loads((REPO / "packages/controller/pyproject.toml").read_text())
    assert container["command"][0] in scripts["project"]["scripts"]
    assert container["command"] == ["dra-webhook"]
    assert "--port=9443" in container["args"]
    assert "--tls-cert-file=/cert/tls.crt" in container["args"]
    assert container["ports"] == [{"name": "webhook", "containerPort": 9443, "protocol": "TCP"}]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {
            "path": "/readyz",
            "port": "webhook",
            "scheme": "HTTPS",
        }
    security = container["securityContext"]
    assert security["privileged"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}
    assert pod["automountServiceAccountToken"] is False
    assert pod["priorityClassName"] == "system-cluster-critical"
    (volume,) = [v for v in pod["volumes"] if v["name"] == "cert"]
    assert volume["secret"]["secretName"] == f"{WEBHOOK}-cert"
    service = _named(objects, "Service")[WEBHOOK]
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 8443, "targetPort": "webhook", "protocol": "TCP"}
    ]
    selector = _named(objects, "Deployment")[WEBHOOK]["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == selector
    assert selector["app.kubernetes.io/component"] == "webhook"
    (hook,) = _named(objects, "ValidatingWebhookConfiguration")[WEBHOOK]["webhooks"]
    assert hook["clientConfig"]["service"]["port"] == 8443
    assert hook["failurePolicy"] == "Ignore"


def test_cert_manager_mode_asks_for_a_certificate_and_ca_injection(helm: Path) -> None:
    objects = _render(
        helm, {"webhook.enabled": "true", "webhook.tls.certManager.dnsNames": "{extra.example}"}
    )
    certificate = _named(objects, "Certificate")[f"{WEBHOOK}-cert"]
    assert certificate["spec"]["secretName"] == f"{WEBHOOK}-cert"
    assert SERVICE_HOST in certificate["spec"]["dnsNames"]
    assert "extra.example" in certificate["spec"]["dnsNames"]
    assert certificate["spec"]["issuerRef"] == {"kind": "Issuer", "name": f"{WEBHOOK}-issuer"}
    assert _named(objects, "Issuer")[f"{WEBHOOK}-issuer"]["spec"] == {"selfSigned": {}}
    assert not _named(objects, "Secret")
    vwc = _named(objects, "ValidatingWebhookConfiguration")[WEBHOOK]
    assert vwc["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": f"{NAMESPACE}/{WEBHOOK}-cert"
    }
    assert "caBundle" not in vwc["webhooks"][0]["clientConfig"]


def test_cert_manager_cluster_issuer(helm: Path) -> None:
    sets = {"webhook.enabled": "true", "webhook.tls.certManager.issuerType": "clusterissuer"}
    with pytest.raises(HelmFailed, match=r"needs webhook\.tls\.certManager\.issuerName"):
        _render(helm, sets)
    objects = _render(helm, {**sets, "webhook.tls.certManager.issuerName": "corp-ca"})
    certificate = _named(objects, "Certificate")[f"{WEBHOOK}-cert"]
    assert certificate["spec"]["issuerRef"] == {"kind": "ClusterIssuer", "name": "corp-ca"}
    assert not _named(objects, "Issuer")


def test_user_secret_needs_its_ca_bundle(helm: Path) -> None:
    sets = {
        "webhook.enabled": "true",
        "webhook.tls.mode": "secret",
        "webhook.tls.secret.name": "my-tls",
    }
    with pytest.raises(HelmFailed, match=r"needs webhook\.tls\.secret\.caBundle"):
        _render(helm, sets)
    objects = _render(helm, {**sets, "webhook.tls.secret.caBundle": "Q0E="})
    assert not _named(objects, "Secret")
    (hook,) = _named(objects, "ValidatingWebhookConfiguration")[WEBHOOK]["webhooks"]
    assert hook["clientConfig"]["caBundle"] == "Q0E="
    pod = _named(objects, "Deployment")[WEBHOOK]["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "cert"]
    assert volume["secret"]["secretName"] == "my-tls"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("webhook.tls.mode", "vault"),
        ("webhook.failurePolicy", "Retry"),
        ("webhook.tls.certManager.issuerType", "acme"),
        ("webhook.enabeld", "true"),
        ("webhook.tls.secret.nmae", "x"),
    ],
)
def test_schema_rejects_bad_webhook_values(helm: Path, key: str, value: str) -> None:
    with pytest.raises(HelmFailed, match="values don't meet the specifications of the schema"):
        _render(helm, {key: value})


def test_values_carry_nvidias_webhook_defaults() -> None:
    webhook = yaml.safe_load((CHART / "values.yaml").read_text())["webhook"]
    assert webhook["enabled"] is False
    assert (webhook["servicePort"], webhook["containerPort"]) == (443, 443)
    assert webhook["failurePolicy"] == "Fail"
    assert webhook["tls"]["mode"] == "cert-manager"
    assert webhook["tls"]["certManager"]["issuerType"] == "selfsigned"
    assert webhook["priorityClassName"] == "system-cluster-critical"
