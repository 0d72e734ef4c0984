"""The validating admission webhook on the harness cluster: the chart installed with
``webhook.enabled=true`` (TLS from the chart-made secret) and ``TimeSlicingSettings`` on,
bad opaque configs (and sharing configs whose gate is off) refused at
``kubectl apply`` with the field path, good ones admitted, for ResourceClaims and
ResourceClaimTemplates in every ``resource.k8s.io`` version the cluster serves. A pod's claim
copied from a judged template is made with no webhook pod running.

Last, the webhook rolled with its own metrics port on (``webhook.metrics.enabled``) starts,
serves, and counts its reviews by kind and outcome; then rolled back to off.

The harness runs no kube-proxy; the API server reaches the webhook at its pod address
(``--enable-aggregator-routing=true``, see dra_e2e.commands).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from dra_controller.webhook.metrics import REVIEW_SECONDS
from dra_e2e.errors import KubectlError
from dra_e2e.handle import ClusterHandle
from dra_e2e.scale_metrics import parse_samples
from driver_support import (
    Driver,
    dump_diagnostics,
    exists,
    install,
    pod_claims,
    uninstall,
    wait_webhook_serving,
)
from upgrade_support import upgrade_reusing_values

pytestmark = pytest.mark.e2e

NV = "resource.nvidia.com/v1beta1"
BAD_STRATEGY = {"apiVersion": NV, "kind": "GpuConfig", "sharing": {"strategy": "Bogus"}}
GOOD_CONFIG = {"apiVersion": NV, "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}}
# The chart's label on the webhook's Deployment and pods.
WEBHOOK = "app.kubernetes.io/component=webhook"


def _set_webhook(driver: Driver, enabled: bool) -> str:
    values = {"webhook.enabled": str(enabled).lower()}
    if enabled:
        # No cert-manager on the harness: the chart makes the CA and the certificate.
        values["webhook.tls.mode"] = "secret"
        # The webhook judges by the plugin's gates: GOOD_CONFIG (TimeSlicing) needs its gate;
        # MPSSupport stays off, so an MPS config is refused naming it.
        values["featureGates.TimeSlicingSettings"] = "true"
    return upgrade_reusing_values(driver, values)


def _devices(version: str, parameters: dict[str, Any]) -> dict[str, Any]:
    if version == "v1beta1":
        request: dict[str, Any] = {"name": "gpu", "deviceClassName": "gpu.nvidia.com"}
    else:
        request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    return {
        "requests": [request],
        "config": [
            {"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": parameters}}
        ],
    }


def _claim(name: str, namespace: str, version: str, parameters: dict[str, Any]) -> str:
    return json.dumps(
        {
            "apiVersion": f"resource.k8s.io/{version}",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": _devices(version, parameters)},
        }
    )


def _template(name: str, namespace: str, version: str, parameters: dict[str, Any]) -> str:
    return json.dumps(
        {
            "apiVersion": f"resource.k8s.io/{version}",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": _devices(version, parameters)}},
        }
    )


def _refused(cluster: ClusterHandle, manifest: str, *extra: str) -> str:
    """kubectl apply's stderr; fails the test when the object was admitted."""
    try:
        cluster.kubectl("apply", "-f", "-", *extra, input_text=manifest)
    except KubectlError as exc:
        return exc.stderr
    pytest.fail(f"admitted, expected the webhook to refuse it: {manifest}")


@pytest.fixture(scope="module")
def driver(
    e2e_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart installed on fake GPUs, then upgraded to run the webhook."""
    installed = install(e2e_cluster, tmp_path_factory.mktemp("driver-images"))
    try:
        if not installed.installed_here:
            pytest.fail("the webhook test installs the chart itself; unset DRA_E2E_RELEASE")
        _set_webhook(installed, True)
        wait_webhook_serving(e2e_cluster)
        yield installed
    except BaseException:
        print(dump_diagnostics(installed))
        raise
    finally:
        uninstall(installed)


@pytest.fixture
def served_versions(e2e_cluster: ClusterHandle) -> list[str]:
    """The resource.k8s.io versions the cluster serves that the webhook is registered for."""
    groups = e2e_cluster.kubectl("api-versions").split()
    return [v for v in ("v1", "v1beta2", "v1beta1") if f"resource.k8s.io/{v}" in groups]


def test_bad_gpu_config_in_a_claim_is_refused_with_the_field_path(
    driver: Driver, e2e_namespace: str
) -> None:
    stderr = _refused(driver.cluster, _claim("bad", e2e_namespace, "v1", BAD_STRATEGY))
    assert 'admission webhook "gpu.nvidia.com" denied the request' in stderr
    assert "spec.devices.config[0].opaque.parameters.sharing.strategy" in stderr
    assert "'Bogus'" in stderr
    assert f"ResourceClaim '{e2e_namespace}/bad'" in stderr
    assert not exists(driver.cluster, "resourceclaim", "bad", "-n", e2e_namespace)


def test_good_gpu_config_in_a_claim_is_admitted(driver: Driver, e2e_namespace: str) -> None:
    driver.cluster.apply(_claim("good", e2e_namespace, "v1", GOOD_CONFIG))
    claim = driver.cluster.kubectl_json("get", "resourceclaim", "good", "-n", e2e_namespace)
    config = claim["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    assert config == GOOD_CONFIG


def test_a_sharing_config_whose_gate_is_off_is_refused_naming_the_gate_as_nvidia(
    driver: Driver, e2e_namespace: str
) -> None:
    mps = {"apiVersion": NV, "kind": "GpuConfig", "sharing": {"strategy": "MPS"}}
    stderr = _refused(driver.cluster, _claim("mps", e2e_namespace, "v1", mps))
    assert (
        'spec.devices.config[0].opaque.parameters.sharing.strategy: "MPS" is selected as the '
        'GPU sharing strategy, but the "MPSSupport" feature gate is not enabled'
    ) in stderr
    assert not exists(driver.cluster, "resourceclaim", "mps", "-n", e2e_namespace)


def test_templates_are_checked_too(driver: Driver, e2e_namespace: str) -> None:
    stderr = _refused(driver.cluster, _template("bad", e2e_namespace, "v1", BAD_STRATEGY))
    assert "spec.spec.devices.config[0].opaque.parameters.sharing.strategy" in stderr
    assert f"ResourceClaimTemplate '{e2e_namespace}/bad'" in stderr
    driver.cluster.apply(_template("good", e2e_namespace, "v1", GOOD_CONFIG))
    assert exists(driver.cluster, "resourceclaimtemplate", "good", "-n", e2e_namespace)


def test_every_served_version_is_checked(
    driver: Driver, e2e_namespace: str, served_versions: list[str]
) -> None:
    # The harness serves v1beta1 and v1beta2 next to v1 (dra_e2e.commands).
    assert served_versions == ["v1", "v1beta2", "v1beta1"]
    for version in served_versions:
        bad = _claim(f"bad-{version}", e2e_namespace, version, BAD_STRATEGY)
        stderr = _refused(driver.cluster, bad)
        assert "spec.devices.config[0].opaque.parameters.sharing.strategy" in stderr, version
        stderr = _refused(
            driver.cluster, _template(f"bad-{version}", e2e_namespace, version, BAD_STRATEGY)
        )
        assert "spec.spec.devices.config[0].opaque.parameters.sharing.strategy" in stderr
        driver.cluster.apply(_claim(f"good-{version}", e2e_namespace, version, GOOD_CONFIG))
        assert exists(driver.cluster, "resourceclaim", f"good-{version}", "-n", e2e_namespace)


def test_every_config_kind_of_ours_is_judged(driver: Driver, e2e_namespace: str) -> None:
    vfio_bad = {"apiVersion": NV, "kind": "VfioDeviceConfig", "iommu": {"backendPolicy": "X"}}
    stderr = _refused(driver.cluster, _claim("vfio", e2e_namespace, "v1", vfio_bad))
    assert "spec.devices.config[0].opaque.parameters.iommu.backendPolicy" in stderr
    unknown = {"apiVersion": NV, "kind": "GpuConfig", "typo": True}
    stderr = _refused(driver.cluster, _claim("typo", e2e_namespace, "v1", unknown))
    assert "spec.devices.config[0].opaque.parameters.typo: unknown field" in stderr
    vfio_good = {"apiVersion": NV, "kind": "VfioDeviceConfig"}
    driver.cluster.apply(_claim("vfio-good", e2e_namespace, "v1", vfio_good))
    assert exists(driver.cluster, "resourceclaim", "vfio-good", "-n", e2e_namespace)


def test_a_selector_naming_an_unpublished_attribute_is_admitted_with_a_warning(
    driver: Driver, e2e_namespace: str
) -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "typo", "namespace": e2e_namespace},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "selectors": [
                                {
                                    "cel": {
                                        "expression": 'device.attributes["gpu.nvidia.com"]'
                                        ".productname == 'NVIDIA A100'"
                                    }
                                }
                            ],
                        },
                    }
                ]
            }
        },
    }
    # kubectl prints an admitted object's warnings on stderr ("Warning: ...").
    proc = subprocess.run(
        driver.cluster.client.argv("create", "--dry-run=server", "-o", "name", "-f", "-"),
        input=json.dumps(claim),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "Warning: spec.devices.requests[0].exactly.selectors[0].cel.expression: gpu.nvidia.com "
        "publishes no attribute 'productname' (did you mean 'productName'?)"
    ) in proc.stderr


def _scale_webhook(driver: Driver, replicas: int) -> None:
    driver.cluster.kubectl(
        "scale",
        "deployment",
        "-n",
        driver.namespace,
        "-l",
        WEBHOOK,
        f"--replicas={replicas}",
    )


def test_a_pods_claim_copied_from_a_judged_template_is_made_while_no_webhook_answers(
    driver: Driver, e2e_namespace: str
) -> None:
    """The template is judged when it is written; the claim the resourceclaim controller copies
    from it for a pod is not sent again (matchConditions), so with every webhook pod gone
    (failurePolicy Fail) the pod still gets its claim, while a user's claim with the same
    config is refused for want of an answer."""
    cluster = driver.cluster
    cluster.apply(_template("checked", e2e_namespace, "v1", GOOD_CONFIG))
    deployment = cluster.kubectl_json("get", "deployment", "-n", driver.namespace, "-l", WEBHOOK)[
        "items"
    ][0]
    direct = _claim("direct", e2e_namespace, "v1", GOOD_CONFIG)
    _scale_webhook(driver, 0)
    try:

        def unanswered() -> bool:
            try:
                cluster.kubectl("apply", "--dry-run=server", "-f", "-", input_text=direct)
            except KubectlError as exc:
                return "failed calling webhook" in exc.stderr
            return False

        cluster.wait_until("the API server to find no webhook to call", unanswered, timeout=120)
        stderr = _refused(cluster, direct)
        assert "failed calling webhook" in stderr
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "copied", "namespace": e2e_namespace},
            "spec": {
                # Never scheduled: only the claim's creation is under test.
                "nodeSelector": {"example.com/no-such-node": "true"},
                "containers": [{"name": "c", "image": "ubuntu:22.04"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "checked"}],
            },
        }
        cluster.apply(json.dumps(pod))

        claim = cluster.wait_until(
            "the pod's claim to be made",
            lambda: pod_claims(cluster, "copied", e2e_namespace).get("gpu"),
            timeout=120,
        )
        assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
        config = claim["spec"]["devices"]["config"][0]["opaque"]["parameters"]
        assert config["sharing"]["strategy"] == "TimeSlicing"
    finally:
        _scale_webhook(driver, deployment["spec"]["replicas"])
        cluster.kubectl("delete", "pod", "copied", "-n", e2e_namespace, "--ignore-not-found")
    wait_webhook_serving(cluster)


def _review_counts(driver: Driver) -> dict[tuple[str, str], float]:
    """``dra_webhook_review_duration_seconds_count`` by (kind, outcome), summed over the
    webhook pods, read through the API server's pod proxy (plain HTTP, no token)."""
    pods = driver.cluster.kubectl_json("get", "pods", "-n", driver.namespace, "-l", WEBHOOK)
    counts: dict[tuple[str, str], float] = {}
    for pod in pods["items"]:
        ports = [
            p["containerPort"]
            for c in pod["spec"]["containers"]
            for p in c.get("ports", [])
            if p.get("name") == "metrics"
        ]
        # Pods of the rollout before (no metrics port) may still be draining.
        if not ports or pod["metadata"].get("deletionTimestamp"):
            continue
        port = ports[0]
        name = pod["metadata"]["name"]
        text = driver.cluster.kubectl(
            "get",
            "--raw",
            f"/api/v1/namespaces/{driver.namespace}/pods/{name}:{port}/proxy/metrics",
        )
        for labels, value in parse_samples(text, f"{REVIEW_SECONDS}_count").items():
            key = (dict(labels)["kind"], dict(labels)["outcome"])
            counts[key] = counts.get(key, 0.0) + value
    return counts


def _set_metrics(driver: Driver, enabled: bool) -> str:
    return upgrade_reusing_values(driver, {"webhook.metrics.enabled": str(enabled).lower()})


def test_the_webhooks_own_metrics_count_its_reviews_when_turned_on(
    driver: Driver, e2e_namespace: str
) -> None:
    """Last in the module: the webhook rolled with ``webhook.metrics.enabled=true`` starts,
    serves, and counts each review by kind and outcome; then it is rolled back to off."""
    try:
        _set_metrics(driver, True)
        wait_webhook_serving(driver.cluster)
        bad = _claim("metrics-bad", e2e_namespace, "v1", BAD_STRATEGY)
        good = _template("metrics-good", e2e_namespace, "v1", GOOD_CONFIG)

        def counted() -> bool:
            # Server-side dry runs go through admission; sent again each round, since the
            # API server may still send one to a draining pod of the rollout before.
            _refused(driver.cluster, bad, "--dry-run=server")
            driver.cluster.kubectl("apply", "--dry-run=server", "-f", "-", input_text=good)
            counts = _review_counts(driver)
            return (
                counts.get(("ResourceClaim", "denied"), 0) >= 1
                and counts.get(("ResourceClaimTemplate", "allowed"), 0) >= 1
            )

        driver.cluster.wait_until(
            "the webhook pods to count a denied claim and an admitted template", counted
        )
    finally:
        _set_metrics(driver, False)
    wait_webhook_serving(driver.cluster)
    pods = driver.cluster.kubectl_json("get", "pods", "-n", driver.namespace, "-l", WEBHOOK)
    ports = [
        port["name"]
        for pod in pods["items"]
        if not pod["metadata"].get("deletionTimestamp")
        for container in pod["spec"]["containers"]
        for port in container.get("ports", [])
    ]
    assert "metrics" not in ports
