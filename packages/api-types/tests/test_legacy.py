"""The classic DRA models (read only to migrate) and beta-to-v1 conversion."""

from __future__ import annotations

import pytest
from dra_api_types.beta_to_v1 import convert_to_v1, is_convertible_beta
from dra_api_types.errors import ValidationError
from dra_api_types.legacy import (
    LegacyResourceClaim,
    NvidiaGpuConfig,
    legacy_kind,
    parse_legacy,
)

SEED_CONFIG = {
    "apiVersion": "gpu.nvidia.com/v1",
    "kind": "NvidiaGPUConfig",
    "metadata": {"name": "shared-gpu-config"},
    "spec": {
        "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "5ms"}},
        "sharing.maxSharableGPU": 4,
    },
}


def test_seed_config_parses_with_its_dotted_key() -> None:
    config = parse_legacy(SEED_CONFIG)
    assert isinstance(config, NvidiaGpuConfig)
    assert config.spec.max_sharable_gpu() == 4
    assert config.spec.sharing is not None
    assert config.spec.sharing.strategy == "TimeSlicing"


def test_unknown_fields_are_errors_naming_object_and_field() -> None:
    bad = {**SEED_CONFIG, "spec": {"memory": "40Gi", "ecc": True}}
    with pytest.raises(ValidationError) as info:
        parse_legacy(bad)
    assert info.value.path == "spec.ecc"
    assert str(info.value.object_ref) == "NvidiaGPUConfig 'shared-gpu-config'"


@pytest.mark.parametrize(
    ("obj", "kind"),
    [
        ({"apiVersion": "resource.k8s.io/v1beta2", "kind": "ResourceClass"}, "ResourceClass"),
        (SEED_CONFIG, "NvidiaGPUConfig"),
        (
            {
                "apiVersion": "resource.k8s.io/v1beta2",
                "kind": "ResourceClaim",
                "spec": {"resourceClassName": "x"},
            },
            "ResourceClaim",
        ),
        (
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "spec": {"resourceClaims": [{"name": "g", "source": {"resourceClaimName": "c"}}]},
            },
            "Pod",
        ),
        (
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "spec": {"devices": {"requests": []}},
            },
            None,
        ),
        (
            {"apiVersion": "v1", "kind": "Pod", "spec": {"resourceClaims": [{"name": "g"}]}},
            None,
        ),
    ],
)
def test_legacy_kind_tells_classic_objects_from_current_ones(
    obj: dict[str, object], kind: str | None
) -> None:
    assert legacy_kind(obj) == kind


def test_legacy_claim_model() -> None:
    claim = parse_legacy(
        {
            "apiVersion": "resource.k8s.io/v1beta2",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "n"},
            "spec": {"resourceClassName": "a100", "allocationMode": "WaitForFirstConsumer"},
        }
    )
    assert isinstance(claim, LegacyResourceClaim)
    assert claim.spec.resource_class_name == "a100"


def test_v1beta1_request_fields_move_under_exactly_and_input_is_untouched() -> None:
    tmpl = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t"},
        "spec": {"spec": {"devices": {"requests": [{"name": "g", "deviceClassName": "c"}]}}},
    }
    assert is_convertible_beta(tmpl)
    out = convert_to_v1(tmpl)
    assert out["apiVersion"] == "resource.k8s.io/v1"
    assert out["spec"]["spec"]["devices"]["requests"] == [
        {"name": "g", "exactly": {"deviceClassName": "c"}}
    ]
    assert tmpl["apiVersion"] == "resource.k8s.io/v1beta1"


def test_v1beta1_request_with_both_shapes_is_an_error() -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c"},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "g", "deviceClassName": "c", "firstAvailable": [{"name": "a"}]}
                ]
            }
        },
    }
    with pytest.raises(ValidationError) as info:
        convert_to_v1(claim)
    assert info.value.path == "spec.devices.requests[0].deviceClassName"
