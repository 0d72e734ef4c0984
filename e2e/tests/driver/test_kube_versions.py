"""The driver on an older Kubernetes: run on demand with ``DRA_E2E_KUBE_VERSION=1.34``
(or 1.35, 1.36).

``e2e-cluster --kube-version 1.34`` (or this variable for the pytest session) builds and runs
that release's pinned patch version. The plugin finds the ``resource.k8s.io`` version by discovery
(``dra_kubelet_core.resource_api``), publishes its slices in it and reads claims in
it; a pod with a claim gets its GPU. On the default (1.37) cluster the test is skipped: CI
does not build a second Kubernetes. 1.32 and 1.33 (``v1beta1``, ``v1beta2`` only) are covered
by the unit tests of the conversions; the harness pins no release that old.
"""

from __future__ import annotations

import json
import os
import uuid

import pytest
from dra_e2e.versions import KUBERNETES_VERSION, resolve_kube_version
from driver_support import Driver, applied, as_json, pod_claims, smi_lines, wait_running

_SESSION_VERSION = resolve_kube_version(
    os.environ.get("DRA_E2E_KUBE_VERSION") or KUBERNETES_VERSION
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        _SESSION_VERSION == KUBERNETES_VERSION,
        reason=f"on demand: run with DRA_E2E_KUBE_VERSION=1.34 (or 1.35, 1.36; this session: "
        f"{os.environ.get('DRA_E2E_KUBE_VERSION') or 'the default version'})",
    ),
    pytest.mark.usefixtures("driver_diagnostics"),
]


def test_plugin_discovers_the_resource_api_and_serves_a_claim(
    driver: Driver, e2e_namespace: str
) -> None:
    cluster = driver.cluster
    server = json.loads(cluster.kubectl("version", "-o", "json"))["serverVersion"]["gitVersion"]
    assert server == _SESSION_VERSION, server
    logs = "".join(
        cluster.kubectl("logs", "-n", driver.namespace, p["metadata"]["name"], "-c", "gpus")
        for p in driver.plugin_pods()
    )
    assert '"event": "resource_api_discovered"' in logs, logs[-3000:]
    name = f"kv-{uuid.uuid4().hex[:6]}"
    manifest = as_json({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": name, "namespace": e2e_namespace},
         "spec": {"spec": {"devices": {"requests": [
             {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": e2e_namespace},
         "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                  "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": name}],
                  "containers": [{"name": "ctr", "image": "ubuntu:22.04",
                                  "command": ["bash", "-c", "nvidia-smi -L; sleep 9999"],
                                  "resources": {"claims": [{"name": "gpu"}]}}]}},
    ]})  # fmt: skip
    with applied(cluster, manifest):
        wait_running(cluster, name, e2e_namespace)
        (claim,) = pod_claims(cluster, name, e2e_namespace).values()
        assert claim["status"]["allocation"]["devices"]["results"]
        log = cluster.kubectl("logs", name, "-n", e2e_namespace)
        assert len(smi_lines(log)) == 1, log
