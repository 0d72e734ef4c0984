"""The webhook's verdicts: every config kind, claims and templates, each served version."""

from __future__ import annotations

from typing import Any

import pytest
from dra_api_types.testing import exactly, resource_claim
from dra_controller.webhook import AdmissionReviewError, judge_object, review
from dra_controller.webhook.admission import DEFAULT_GATES

NV = "resource.nvidia.com/v1beta1"
GPU = "gpu.nvidia.com"
CD = "compute-domain.nvidia.com"
#: Both sharing gates on: the configs are judged on their own rules.
SHARING_ON = {**DEFAULT_GATES, "TimeSlicingSettings": True, "MPSSupport": True}


def _config(driver: str, parameters: Any) -> dict[str, Any]:
    return {"requests": ["gpu"], "opaque": {"driver": driver, "parameters": parameters}}


def _devices(*configs: dict[str, Any]) -> dict[str, Any]:
    return {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
        "config": list(configs),
    }


def _claim(*configs: dict[str, Any], version: str = "v1") -> dict[str, Any]:
    return resource_claim(
        "c",
        namespace="ns",
        requests=[exactly("gpu")],
        config=configs,
        api_version=f"resource.k8s.io/{version}",
    )


def _template(*configs: dict[str, Any], version: str = "v1") -> dict[str, Any]:
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {"spec": {"devices": _devices(*configs)}},
    }


def _review(obj: Any, resource: str, version: str = "v1", op: str = "CREATE") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "resource": {"group": "resource.k8s.io", "version": version, "resource": resource},
            "operation": op,
            "namespace": "ns",
            "object": obj,
        },
    }


GOOD = [
    (GPU, {"apiVersion": NV, "kind": "GpuConfig"}),
    (
        GPU,
        {
            "apiVersion": NV,
            "kind": "GpuConfig",
            "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
        },
    ),
    (
        GPU,
        {
            "apiVersion": NV,
            "kind": "GpuConfig",
            "sharing": {
                "strategy": "MPS",
                "mpsConfig": {
                    "defaultActiveThreadPercentage": 50,
                    "defaultPinnedDeviceMemoryLimit": "10Gi",
                },
            },
        },
    ),
    (GPU, {"apiVersion": NV, "kind": "MigDeviceConfig", "sharing": {"strategy": "MPS"}}),
    (
        GPU,
        {"apiVersion": NV, "kind": "VfioDeviceConfig", "iommu": {"backendPolicy": "PreferIommuFD"}},
    ),
    (
        CD,
        {
            "apiVersion": NV,
            "kind": "ComputeDomainChannelConfig",
            "domainID": "d-1",
            "allocationMode": "All",
        },
    ),
    (CD, {"apiVersion": NV, "kind": "ComputeDomainDaemonConfig", "domainID": "d-1"}),
    # Another driver's parameters are not ours to judge, whatever they hold.
    ("example.com", {"anything": ["goes"]}),
]

BAD = [
    (
        GPU,
        {"apiVersion": NV, "kind": "GpuConfig", "sharing": {"strategy": "Foo"}},
        "sharing.strategy",
        "Unsupported value: 'Foo'",
    ),
    (
        GPU,
        {
            "apiVersion": NV,
            "kind": "GpuConfig",
            "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Soon"}},
        },
        "sharing.timeSlicingConfig.interval",
        "Unsupported value: 'Soon'",
    ),
    (
        GPU,
        {
            "apiVersion": NV,
            "kind": "GpuConfig",
            "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 101}},
        },
        "sharing.mpsConfig.defaultActiveThreadPercentage",
        "between 0 and 100",
    ),
    (GPU, {"apiVersion": NV, "kind": "GpuConfig", "sharng": {}}, "sharng", "unknown field"),
    (
        GPU,
        {"apiVersion": NV, "kind": "MigDeviceConfig", "sharing": {"strategy": 7}},
        "sharing.strategy",
        "valid string",
    ),
    (
        GPU,
        {"apiVersion": NV, "kind": "VfioDeviceConfig", "iommu": {"backendPolicy": "Always"}},
        "iommu.backendPolicy",
        "Unsupported value: 'Always'",
    ),
    (GPU, {"apiVersion": NV, "kind": "GPUConfig"}, "kind", "unknown kind 'GPUConfig'"),
    (
        GPU,
        {"apiVersion": "resource.nvidia.com/v1", "kind": "GpuConfig"},
        "apiVersion",
        "unsupported apiVersion",
    ),
    (CD, {"apiVersion": NV, "kind": "ComputeDomainChannelConfig"}, "domainID", "required value"),
    (
        CD,
        {
            "apiVersion": NV,
            "kind": "ComputeDomainChannelConfig",
            "domainID": "d",
            "allocationMode": "Some",
        },
        "allocationMode",
        "Unsupported value: 'Some'",
    ),
    (
        CD,
        {"apiVersion": NV, "kind": "ComputeDomainDaemonConfig", "domainID": ""},
        "domainID",
        "required value",
    ),
    # A config of the other driver would fail at prepare time: refused here.
    (CD, {"apiVersion": NV, "kind": "GpuConfig"}, "kind", "config of driver gpu.nvidia.com"),
    (
        GPU,
        {"apiVersion": NV, "kind": "ComputeDomainDaemonConfig", "domainID": "d"},
        "kind",
        "config of driver compute-domain.nvidia.com",
    ),
    (GPU, "not-an-object", "", "must be an object"),
]


@pytest.mark.parametrize(("driver", "params"), GOOD)
@pytest.mark.parametrize("version", ["v1", "v1beta1", "v1beta2"])
def test_good_configs_are_admitted(driver: str, params: dict[str, Any], version: str) -> None:
    for resource, obj in (
        ("resourceclaims", _claim(_config(driver, params), version=version)),
        ("resourceclaimtemplates", _template(_config(driver, params), version=version)),
    ):
        answer = review(_review(obj, resource, version), gates=SHARING_ON)
        assert answer["apiVersion"] == "admission.k8s.io/v1"
        assert answer["kind"] == "AdmissionReview"
        assert answer["response"] == {"uid": "u-1", "allowed": True}


@pytest.mark.parametrize(("driver", "params", "field", "text"), BAD)
@pytest.mark.parametrize("version", ["v1", "v1beta1", "v1beta2"])
def test_bad_configs_are_refused_with_the_field_path(
    driver: str, params: Any, field: str, text: str, version: str
) -> None:
    good = _config(GPU, {"apiVersion": NV, "kind": "GpuConfig"})
    cases = (
        (
            "resourceclaims",
            _claim(good, _config(driver, params), version=version),
            "spec.devices.config[1].opaque.parameters",
            "ResourceClaim 'ns/c'",
        ),
        (
            "resourceclaimtemplates",
            _template(good, _config(driver, params), version=version),
            "spec.spec.devices.config[1].opaque.parameters",
            "ResourceClaimTemplate 'ns/t'",
        ),
    )
    for resource, obj, prefix, who in cases:
        response = review(_review(obj, resource, version), gates=SHARING_ON)["response"]
        path = f"{prefix}.{field}" if field else prefix
        assert response["allowed"] is False
        status = response["status"]
        assert status["code"] == 422
        assert status["reason"] == "Invalid"
        assert status["message"].startswith(f"{who}: 1 config failed to validate: {path}: ")
        assert text in status["message"]
        assert "details" not in status


def test_the_seed_message_names_the_strategy_path() -> None:
    obj = _claim(
        _config(GPU, {"apiVersion": NV, "kind": "GpuConfig", "sharing": {"strategy": "Foo"}})
    )
    message = review(_review(obj, "resourceclaims"))["response"]["status"]["message"]
    assert message == (
        "ResourceClaim 'ns/c': 1 config failed to validate: "
        "spec.devices.config[0].opaque.parameters.sharing.strategy: "
        'Unsupported value: \'Foo\': supported values: "TimeSlicing", "MPS"'
    )


def test_every_bad_config_is_reported() -> None:
    bad = _config(GPU, {"apiVersion": NV, "kind": "GpuConfig", "sharing": {"strategy": "X"}})
    verdict = judge_object(_claim(bad, bad), "resourceclaims")
    assert not verdict.allowed
    assert [p.path for p in verdict.problems] == [
        "spec.devices.config[0].opaque.parameters.sharing.strategy",
        "spec.devices.config[1].opaque.parameters.sharing.strategy",
    ]
    assert "2 configs failed to validate" in verdict.message


def test_defaults_filled_in_must_hold_too() -> None:
    # MPS without mpsConfig gets an empty MpsConfig: still valid.
    ok = _config(GPU, {"apiVersion": NV, "kind": "GpuConfig", "sharing": {"strategy": "MPS"}})
    assert judge_object(_claim(ok), "resourceclaims", gates=SHARING_ON).allowed


def test_missing_parameters_of_our_driver_are_refused() -> None:
    obj = _claim({"requests": ["gpu"], "opaque": {"driver": GPU}})
    verdict = judge_object(obj, "resourceclaims")
    assert [p.path for p in verdict.problems] == ["spec.devices.config[0].opaque.parameters"]


@pytest.mark.parametrize(
    "obj",
    [
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "spec": {"devices": {}}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "spec": {}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim"},
    ],
)
def test_claims_without_configs_are_admitted(obj: dict[str, Any]) -> None:
    assert review(_review(obj, "resourceclaims"))["response"]["allowed"] is True


def test_delete_without_object_is_admitted() -> None:
    answer = review(_review(None, "resourceclaims", op="DELETE"))
    assert answer["response"] == {"uid": "u-1", "allowed": True}


@pytest.mark.parametrize(
    ("group", "version", "resource"),
    [
        ("resource.k8s.io", "v1alpha3", "resourceclaims"),
        ("resource.k8s.io", "v1", "resourceslices"),
        ("", "v1", "pods"),
    ],
)
def test_other_resources_are_refused_with_a_reason(group: str, version: str, resource: str) -> None:
    body = _review(_claim(), resource, version)
    body["request"]["resource"]["group"] = group
    status = review(body)["response"]["status"]
    assert status["code"] == 400
    assert status["reason"] == "BadRequest"
    assert f"got {resource!r} of {group}/{version}" in status["message"]


def test_generate_name_is_named_in_the_message() -> None:
    obj = _claim(_config(GPU, {"apiVersion": NV, "kind": "GpuConfig", "x": 1}))
    obj["metadata"] = {"generateName": "pod-gpu-", "namespace": "ns"}
    message = judge_object(obj, "resourceclaims").message
    assert message.startswith("ResourceClaim 'ns/pod-gpu-': ")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([], ""),
        ({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}, "apiVersion"),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "request"),
        (
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}},
            "request.uid",
        ),
    ],
)
def test_malformed_reviews_raise_naming_the_field(body: Any, field: str) -> None:
    with pytest.raises(AdmissionReviewError) as info:
        review(body)
    assert info.value.field == field


def test_updates_that_leave_the_spec_alone_are_admitted() -> None:
    bad = _claim(
        _config(GPU, {"apiVersion": NV, "kind": "GpuConfig", "sharing": {"strategy": "X"}})
    )
    body = _review(bad, "resourceclaims", op="UPDATE")
    body["request"]["oldObject"] = {**bad, "metadata": {**bad["metadata"], "finalizers": ["f"]}}
    # Removing a finalizer of a claim stored before the webhook was installed.
    assert review(body)["response"]["allowed"] is True
    good = _claim(_config(GPU, {"apiVersion": NV, "kind": "GpuConfig"}))
    body["request"]["oldObject"] = good
    assert review(body)["response"]["allowed"] is False


def test_an_object_that_is_not_an_object_is_refused() -> None:
    status = review(_review(["x"], "resourceclaims"))["response"]["status"]
    assert status["reason"] == "BadRequest"
    assert "request.object must be an object, got list" in status["message"]
