"""The objects the controller makes per domain: names, labels, configs, and API validity."""

from __future__ import annotations

import pytest
from computedomain_support import DRIVER_NS, domain_body
from dra_api_types import ComputeDomain, ResourceClaimTemplate, decode_opaque_config
from dra_computedomain.errors import SpecError
from dra_computedomain.manifests import (
    DaemonSettings,
    daemon_claim_template,
    daemon_set,
    workload_claim_template,
)
from dra_computedomain.names import COMPUTE_DOMAIN_LABEL, FINALIZER, TARGET_LABEL

SETTINGS = DaemonSettings(namespace=DRIVER_NS, image="driver:1", imex_backend="fake")


def _domain(**kwargs: object) -> ComputeDomain:
    body = domain_body(**kwargs)  # type: ignore[arg-type]
    body["metadata"]["uid"] = "u-1"
    return ComputeDomain.from_dict(body)


def test_host_managed_imex_forces_single_channel_mode() -> None:
    # NVIDIA's channelAllocationModeFor: hostManaged -> Single, even when the domain asks All.
    rct = workload_claim_template(_domain(mode="All"), host_managed_imex=True)
    config = rct["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    assert config["allocationMode"] == "Single"


@pytest.mark.parametrize(("mode", "expected"), [(None, "Single"), ("All", "All")])
def test_workload_template_carries_channel_config(mode: str | None, expected: str) -> None:
    rct = workload_claim_template(_domain(mode=mode))
    parsed = ResourceClaimTemplate.from_dict(rct, validate=True)
    assert parsed.metadata.name == "imex-channel-0"
    assert parsed.metadata.namespace == "team-a"
    assert rct["metadata"]["labels"] == {COMPUTE_DOMAIN_LABEL: "u-1", TARGET_LABEL: "Workload"}
    assert rct["metadata"]["finalizers"] == [FINALIZER]
    request = rct["spec"]["spec"]["devices"]["requests"][0]
    assert request["exactly"]["deviceClassName"] == "compute-domain-default-channel.nvidia.com"
    config = rct["spec"]["spec"]["devices"]["config"][0]["opaque"]
    assert config["driver"] == "compute-domain.nvidia.com"
    decoded = decode_opaque_config(config["parameters"])
    assert decoded.to_dict()["domainID"] == "u-1"
    assert decoded.to_dict()["allocationMode"] == expected


def test_daemon_template_and_daemonset_live_in_the_driver_namespace() -> None:
    domain = _domain()
    rct = daemon_claim_template(domain, SETTINGS)
    ResourceClaimTemplate.from_dict(rct, validate=True)
    assert (rct["metadata"]["namespace"], rct["metadata"]["name"]) == (
        DRIVER_NS,
        "computedomain-daemon-u-1",
    )
    params = rct["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    assert params == {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomainDaemonConfig",
        "domainID": "u-1",
    }
    ds = daemon_set(domain, SETTINGS)
    assert ds["metadata"]["finalizers"] == [FINALIZER]
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {COMPUTE_DOMAIN_LABEL: "u-1"}
    assert pod["serviceAccountName"] == "compute-domain-daemon-service-account"
    assert pod["resourceClaims"] == [
        {"name": "compute-domain-daemon", "resourceClaimTemplateName": "computedomain-daemon-u-1"}
    ]
    container = pod["containers"][0]
    assert container["command"] == ["dra-compute-domain-daemon", "run"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert env["IMEX_BACKEND"] == "fake"
    assert container["startupProbe"]["exec"]["command"] == ["dra-compute-domain-daemon", "check"]
    assert {t["effect"] for t in pod["tolerations"]} == {
        "NoSchedule",
        "NoExecute",
        "PreferNoSchedule",
    }


def test_missing_template_name_names_the_field() -> None:
    with pytest.raises(SpecError) as err:
        workload_claim_template(_domain(template=""))
    assert err.value.field == "spec.channel.resourceClaimTemplate.name"
    assert "team-a/cd1" in str(err.value)


def test_num_nodes_is_optional_with_default_zero() -> None:
    from dra_api_types.crds import render_crd

    body = domain_body()
    del body["spec"]["numNodes"]
    body["metadata"]["uid"] = "u-2"
    domain = ComputeDomain.from_dict(body, validate=True)
    assert domain.spec.num_nodes == 0
    crd = render_crd(ComputeDomain)
    spec_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec_schema["required"] == ["channel"]
    assert spec_schema["x-kubernetes-validations"][0]["rule"] == "self == oldSelf"
