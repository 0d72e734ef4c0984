"""The chart's validating admission webhook (``webhook.*``), rendered offline by the pinned Helm."""

from __future__ import annotations

import base64
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from admission_cel import evaluate
from chart_helpers import (
    BASE_SETS,
    CHART,
    NAMESPACE,
    OWN_IMAGE,
    REPO,
    HelmFailed,
    run_helm,
    set_args,
)
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from dra_api_types.nvidia_gates import parse_feature_gates
from dra_controller.webhook import judge_object

WEBHOOK = "dra-dra-driver-nvidia-gpu-webhook"
NVIDIA_VALUES = Path(__file__).parent / "fixtures" / "nvidia-values-0.5.0-dev.yaml"
SERVICE_HOST = f"{WEBHOOK}.{NAMESPACE}.svc"


def _render(helm: Path, sets: Mapping[str, str]) -> list[dict[str, Any]]:
    args = ["template", "dra", str(CHART), "--namespace", NAMESPACE]
    out = run_helm(helm, *args, *set_args({**BASE_SETS, **sets}))
    return [doc for doc in yaml.safe_load_all(out) if doc]


def _hooks(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    vwc = _named(objects, "ValidatingWebhookConfiguration")[WEBHOOK]
    return {hook["name"]: hook for hook in vwc["webhooks"]}


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
        ("PodDisruptionBudget", WEBHOOK),
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
    hook = _hooks(objects)["gpu.nvidia.com"]
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
    hook = _hooks(objects)["gpu.nvidia.com"]
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
    hook = _hooks(objects)["gpu.nvidia.com"]
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
    # The serving certificate is signed by a chart-made CA, itself self-signed: a renewal of
    # the serving certificate keeps the CA the API server trusts.
    issuers = _named(objects, "Issuer")
    assert issuers[f"{WEBHOOK}-issuer"]["spec"] == {"ca": {"secretName": f"{WEBHOOK}-ca"}}
    assert issuers[f"{WEBHOOK}-selfsigned"]["spec"] == {"selfSigned": {}}
    ca = _named(objects, "Certificate")[f"{WEBHOOK}-ca"]["spec"]
    assert ca["isCA"] is True
    assert ca["secretName"] == f"{WEBHOOK}-ca"
    assert ca["issuerRef"] == {"kind": "Issuer", "name": f"{WEBHOOK}-selfsigned"}
    assert not [name for name in _named(objects, "Secret") if name.startswith(WEBHOOK)]
    vwc = _named(objects, "ValidatingWebhookConfiguration")[WEBHOOK]
    assert vwc["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": f"{NAMESPACE}/{WEBHOOK}-cert"
    }
    assert all("caBundle" not in hook["clientConfig"] for hook in vwc["webhooks"])


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
    assert not [name for name in _named(objects, "Secret") if name.startswith(WEBHOOK)]
    hook = _hooks(objects)["gpu.nvidia.com"]
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


# --- Availability: rotation, rollouts, and what the API server sends -----------------------

ENABLED = {"webhook.enabled": "true", "webhook.tls.mode": "secret"}


def _config(driver: str) -> dict[str, Any]:
    params = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"}
    return {"requests": ["gpu"], "opaque": {"driver": driver, "parameters": params}}


def _claim(
    *, configs: list[dict[str, Any]] | None = None, selector: str | None = None
) -> dict[str, Any]:
    request: dict[str, Any] = {"name": "gpu", "exactly": {"deviceClassName": "x.example.com"}}
    if selector is not None:
        request["exactly"]["selectors"] = [{"cel": {"expression": selector}}]
    devices: dict[str, Any] = {"requests": [request]}
    if configs is not None:
        devices["config"] = configs
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": devices},
    }


def _template(claim: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "ResourceClaimTemplate",
        "metadata": claim["metadata"],
        "spec": {"spec": claim["spec"]},
    }


def _sent(
    hook: dict[str, Any],
    obj: dict[str, Any],
    *,
    old: dict[str, Any] | None = None,
    user: str = "alice@example.com",
) -> bool:
    """Whether the API server calls ``hook`` for a CREATE of ``obj`` (UPDATE with ``old``)
    written by ``user``."""
    operation = "CREATE" if old is None else "UPDATE"
    request = {"operation": operation, "userInfo": {"username": user}}
    variables = {"object": obj, "oldObject": old, "request": request}
    return all(bool(evaluate(c["expression"], variables)) for c in hook["matchConditions"])


GPU_SELECTOR = "device.attributes['gpu.nvidia.com'].productName == 'H200'"


@pytest.mark.parametrize(
    ("obj", "sent"),
    [
        (_claim(configs=[_config("gpu.nvidia.com")]), True),
        (
            _claim(configs=[_config("other.example.com"), _config("compute-domain.nvidia.com")]),
            True,
        ),
        (_template(_claim(configs=[_config("gpu.nvidia.com")])), True),
        (_claim(configs=[_config("other.example.com")]), False),
        (_template(_claim(configs=[_config("other.example.com")])), False),
        (_claim(configs=[{"requests": ["gpu"]}]), False),
        (_claim(), False),
        (_claim(selector=GPU_SELECTOR), False),
        ({"kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": {}}, False),
        ({"kind": "ResourceClaim", "metadata": {"name": "c"}}, False),
    ],
    ids=[
        "gpu-config",
        "cd-config-among-others",
        "template-gpu-config",
        "other-driver",
        "template-other-driver",
        "config-without-opaque",
        "no-config",
        "gpu-selector-no-config",
        "empty-spec",
        "no-spec",
    ],
)
def test_only_objects_with_our_opaque_configs_are_sent_to_the_judging_hook(
    helm: Path, obj: dict[str, Any], sent: bool
) -> None:
    assert _sent(_hooks(_render(helm, ENABLED))["gpu.nvidia.com"], obj) is sent


def test_an_update_that_keeps_spec_is_never_sent(helm: Path) -> None:
    """Finalizer removal on one of our claims never waits on the webhook."""
    hooks = _hooks(_render(helm, ENABLED))
    for obj in (_claim(configs=[_config("gpu.nvidia.com")]), _claim(selector=GPU_SELECTOR)):
        finalized = {**obj, "metadata": {**obj["metadata"], "finalizers": ["x.example.com/f"]}}
        assert not any(_sent(hook, obj, old=finalized) for hook in hooks.values())
        changed = _claim(configs=[_config("gpu.nvidia.com")], selector="true")
        assert any(_sent(hook, changed, old=finalized) for hook in hooks.values())


CLAIM_CONTROLLER = "system:serviceaccount:kube-system:resource-claim-controller"
OURS = _claim(configs=[_config("gpu.nvidia.com")])


def _copied(claim: dict[str, Any]) -> dict[str, Any]:
    """``claim`` as the resourceclaim controller makes it for a pod from a template."""
    annotations = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    return {**claim, "metadata": {**claim["metadata"], "annotations": annotations}}


@pytest.mark.parametrize(
    ("claim", "copied", "user", "sent"),
    [
        (OURS, True, CLAIM_CONTROLLER, False),
        (_claim(selector=GPU_SELECTOR), True, CLAIM_CONTROLLER, False),
        # The controller manager without --use-service-account-credentials.
        (OURS, True, "system:kube-controller-manager", False),
        # Anyone else writing the annotation is judged as usual.
        (OURS, True, "alice@example.com", True),
        (_claim(selector=GPU_SELECTOR), True, "alice@example.com", True),
        # The controller's identity without the annotation it always sets: judged.
        (OURS, False, CLAIM_CONTROLLER, True),
    ],
    ids=[
        "copied-config",
        "copied-selector",
        "copied-shared-identity",
        "user-with-annotation",
        "user-with-annotation-selector",
        "controller-without-annotation",
    ],
)
def test_a_claim_copied_from_a_judged_template_for_a_pod_is_not_sent_again(
    helm: Path, claim: dict[str, Any], copied: bool, user: str, sent: bool
) -> None:
    """The template was judged when it was written; its copies for pods (the resourceclaim
    controller's creates) do not wait on the webhook, nor fail while it is down."""
    hooks = _hooks(_render(helm, ENABLED)).values()
    obj = _copied(claim) if copied else claim
    assert any(_sent(hook, obj, user=user) for hook in hooks) is sent
    # The template it is copied from, written by a user, goes to the hook its contents pick.
    assert any(_sent(hook, _template(claim)) for hook in hooks)


@pytest.mark.parametrize(
    ("obj", "sent"),
    [
        (_claim(selector=GPU_SELECTOR), True),
        (_template(_claim(selector=GPU_SELECTOR)), True),
        (_claim(selector="device.driver == 'other.example.com'"), False),
        (_claim(configs=[_config("gpu.nvidia.com")], selector=GPU_SELECTOR), False),
        (_claim(configs=[_config("other.example.com")], selector=GPU_SELECTOR), True),
        (_claim(), False),
    ],
    ids=["claim", "template", "other-driver", "ours-goes-to-the-judge", "other-config", "none"],
)
def test_selector_warnings_hook_gets_the_rest_and_never_fails_a_request(
    helm: Path, obj: dict[str, Any], sent: bool
) -> None:
    hook = _hooks(_render(helm, ENABLED))["selectors.gpu.nvidia.com"]
    assert hook["failurePolicy"] == "Ignore"
    assert hook["clientConfig"]["service"]["path"] == "/validate-resource-claim-parameters"
    assert _sent(hook, obj) is sent


def test_selector_hook_sees_v1beta1_and_first_available_selectors(helm: Path) -> None:
    hook = _hooks(_render(helm, ENABLED))["selectors.gpu.nvidia.com"]
    selectors = [{"cel": {"expression": GPU_SELECTOR}}]
    v1beta1 = {"spec": {"devices": {"requests": [{"name": "a", "selectors": selectors}]}}}
    first = {
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "a",
                        "firstAvailable": [{"name": "s"}, {"name": "t", "selectors": selectors}],
                    }
                ]
            }
        }
    }
    assert _sent(hook, v1beta1)
    assert _sent(hook, first)


def test_selector_warnings_can_be_turned_off(helm: Path) -> None:
    hooks = _hooks(_render(helm, {**ENABLED, "webhook.selectorWarnings.enabled": "false"}))
    assert list(hooks) == ["gpu.nvidia.com"]


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_failure_policy_is_the_operators_choice_for_the_judging_hook_only(
    helm: Path, policy: str
) -> None:
    hooks = _hooks(_render(helm, {**ENABLED, "webhook.failurePolicy": policy}))
    assert hooks["gpu.nvidia.com"]["failurePolicy"] == policy
    assert hooks["selectors.gpu.nvidia.com"]["failurePolicy"] == "Ignore"


def test_values_document_what_failure_policy_does() -> None:
    text = (CHART / "values.yaml").read_text()
    block = text[text.index("  failurePolicy: Fail") - 1200 : text.index("  failurePolicy: Fail")]
    for words in ("Fail   : refuse the write", "Ignore : admit the write unchecked", "finalizer"):
        assert words in block


def test_two_replicas_a_budget_and_surge_only_rollouts(helm: Path) -> None:
    objects = _render(helm, ENABLED)
    deployment = _named(objects, "Deployment")[WEBHOOK]
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    pdb = _named(objects, "PodDisruptionBudget")[WEBHOOK]
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    pod = deployment["spec"]["template"]["spec"]
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["whenUnsatisfiable"] == "ScheduleAnyway"
    assert spread["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    (container,) = pod["containers"]
    assert "--tls-reload-interval=10" in container["args"]
    # The certificate comes from the Secret volume, which the kubelet updates in place
    # (a subPath mount would never see a renewal).
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "cert"]
    assert "subPath" not in mount


def test_budget_can_be_turned_off(helm: Path) -> None:
    objects = _render(helm, {**ENABLED, "webhook.podDisruptionBudget.enabled": "false"})
    assert not _named(objects, "PodDisruptionBudget")


def test_nvidias_values_keep_their_replicas_and_strategy(helm: Path) -> None:
    out = run_helm(
        helm,
        "template",
        "dra",
        str(CHART),
        "--namespace",
        NAMESPACE,
        "-f",
        str(NVIDIA_VALUES),
        *set_args({**BASE_SETS, **ENABLED, "image.repository": OWN_IMAGE}),
    )
    objects = [doc for doc in yaml.safe_load_all(out) if doc]
    deployment = _named(objects, "Deployment")[WEBHOOK]
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == "100%"
    # One replica: a maxUnavailable budget still lets a drain evict it.
    assert _named(objects, "PodDisruptionBudget")[WEBHOOK]["spec"]["maxUnavailable"] == 1


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("webhook.podDisruptionBudget.maxUnavailable", "many"),
        ("webhook.podDisruptionBudget.minAvailable", "1"),
        ("webhook.tlsReloadIntervalSeconds", "0"),
        ("webhook.selectorWarnings.enable", "true"),
    ],
)
def test_schema_rejects_bad_availability_values(helm: Path, key: str, value: str) -> None:
    with pytest.raises(HelmFailed, match="values don't meet the specifications of the schema"):
        _render(helm, {key: value})


# --- Feature gates: the plugin's value, so admission and prepare agree ---------------------


def _args(objects: list[dict[str, Any]], kind: str, name: str) -> list[str]:
    (container,) = [
        c
        for o in objects
        if o["kind"] == kind and o["metadata"]["name"] == name
        for c in o["spec"]["template"]["spec"]["containers"]
        if c["name"] in ("webhook", "gpus")
    ]
    return list(container["args"])


def _gates_flag(args: list[str]) -> list[str]:
    return [a for a in args if a.startswith("--feature-gates=")]


def test_webhook_gets_the_feature_gates_the_plugin_gets_as_nvidias_chart_passes_them(
    helm: Path,
) -> None:
    sets = {**ENABLED, "featureGates.MPSSupport": "true", "featureGates.DeviceTaints": "false"}
    objects = _render(helm, sets)
    webhook = _gates_flag(_args(objects, "Deployment", WEBHOOK))
    plugin = _gates_flag(_args(objects, "DaemonSet", "dra-dra-driver-nvidia-gpu-kubelet-plugin"))
    assert webhook == plugin == ["--feature-gates=DeviceTaints=false,MPSSupport=true"]
    # What the webhook judges by with that value: MPS admitted, TimeSlicing refused (gate off).
    gates, _ = parse_feature_gates(webhook[0].removeprefix("--feature-gates="))
    mps, time_slicing = (
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
                    "config": [
                        {
                            "opaque": {
                                "driver": "gpu.nvidia.com",
                                "parameters": {
                                    "apiVersion": "resource.nvidia.com/v1beta1",
                                    "kind": "GpuConfig",
                                    "sharing": {"strategy": strategy},
                                },
                            }
                        }
                    ],
                }
            },
        }
        for strategy in ("MPS", "TimeSlicing")
    )
    assert judge_object(mps, "resourceclaims", gates=gates).allowed
    refused = judge_object(time_slicing, "resourceclaims", gates=gates)
    assert '"TimeSlicingSettings" feature gate is not enabled' in refused.message


def test_webhook_without_feature_gates_runs_on_nvidias_defaults(helm: Path) -> None:
    assert _gates_flag(_args(_render(helm, ENABLED), "Deployment", WEBHOOK)) == []
