"""The webhook follows the driver's feature gates as NVIDIA's does (cmd/webhook/main_test.go):
a sharing strategy whose gate is off is refused at admission, naming the strategy and the
gate, so the claim never reaches a plugin that would refuse it at prepare time."""

from __future__ import annotations

from typing import Any

import pytest
from dra_api_types.nvidia_gates import parse_feature_gates
from dra_controller.webhook import judge_object, review
from dra_controller.webhook.admission import DEFAULT_GATES

NV = "resource.nvidia.com/v1beta1"
GPU = "gpu.nvidia.com"
CD = "compute-domain.nvidia.com"

TS_MESSAGE = (
    '"TimeSlicing" is selected as the GPU sharing strategy, '
    'but the "TimeSlicingSettings" feature gate is not enabled'
)
MPS_MESSAGE = (
    '"MPS" is selected as the GPU sharing strategy, '
    'but the "MPSSupport" feature gate is not enabled'
)


def _gates(text: str) -> dict[str, bool]:
    return parse_feature_gates(text)[0]


def _claim(*parameters: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
                "config": [
                    {"requests": ["gpu"], "opaque": {"driver": GPU, "parameters": p}}
                    for p in parameters
                ],
            }
        },
    }


def _template(*parameters: Any) -> dict[str, Any]:
    claim = _claim(*parameters)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {"spec": claim["spec"]},
    }


def _gpu(sharing: dict[str, Any] | None = None, kind: str = "GpuConfig") -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": NV, "kind": kind}
    if sharing is not None:
        body["sharing"] = sharing
    return body


TIME_SLICING = {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}
MPS = {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50}}


def test_nvidias_defaults_have_both_sharing_gates_off() -> None:
    assert DEFAULT_GATES["TimeSlicingSettings"] is False
    assert DEFAULT_GATES["MPSSupport"] is False


@pytest.mark.parametrize(
    ("resource", "obj", "prefix", "who"),
    [
        ("resourceclaims", _claim(_gpu(TIME_SLICING)), "spec", "ResourceClaim 'ns/c'"),
        (
            "resourceclaimtemplates",
            _template(_gpu(TIME_SLICING)),
            "spec.spec",
            "ResourceClaimTemplate 'ns/t'",
        ),
    ],
)
def test_time_slicing_is_refused_naming_the_gate_when_time_slicing_settings_is_off_as_nvidia(
    resource: str, obj: dict[str, Any], prefix: str, who: str
) -> None:
    verdict = judge_object(obj, resource, gates=_gates("TimeSlicingSettings=false"))
    assert not verdict.allowed
    assert verdict.message == (
        f"{who}: 1 config failed to validate: "
        f"{prefix}.devices.config[0].opaque.parameters.sharing.strategy: {TS_MESSAGE}"
    )


def test_mps_is_refused_naming_the_gate_when_mps_support_is_off_as_nvidia() -> None:
    verdict = judge_object(_template(_gpu(MPS)), "resourceclaimtemplates", gates=DEFAULT_GATES)
    assert [(p.path, p.message) for p in verdict.problems] == [
        ("spec.spec.devices.config[0].opaque.parameters.sharing.strategy", MPS_MESSAGE)
    ]


@pytest.mark.parametrize(
    ("sharing", "message"),
    [({"strategy": "TimeSlicing"}, TS_MESSAGE), ({"strategy": "MPS"}, MPS_MESSAGE)],
)
def test_mig_device_sharing_is_gated_as_nvidia_gates_full_gpus(
    sharing: dict[str, Any], message: str
) -> None:
    verdict = judge_object(_claim(_gpu(sharing, kind="MigDeviceConfig")), "resourceclaims")
    assert [p.message for p in verdict.problems] == [message]


def test_each_strategy_needs_only_its_own_gate_as_nvidia() -> None:
    gates = _gates("TimeSlicingSettings=true")
    assert judge_object(_claim(_gpu(TIME_SLICING)), "resourceclaims", gates=gates).allowed
    verdict = judge_object(_claim(_gpu(TIME_SLICING), _gpu(MPS)), "resourceclaims", gates=gates)
    assert [p.path for p in verdict.problems] == [
        "spec.devices.config[1].opaque.parameters.sharing.strategy"
    ]
    assert judge_object(
        _claim(_gpu(MPS)), "resourceclaims", gates=_gates("MPSSupport=true")
    ).allowed


def test_the_gate_is_judged_before_the_strategy_settings_as_nvidia() -> None:
    # NVIDIA validates the strategy (and its gate) before the settings of that strategy.
    bad_mps = _gpu({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": -1}})
    bad_ts = _gpu({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Soon"}})
    verdict = judge_object(_claim(bad_mps, bad_ts), "resourceclaims")
    assert [p.message for p in verdict.problems] == [MPS_MESSAGE, TS_MESSAGE]
    # With the gates on, the settings are judged.
    on = _gates("TimeSlicingSettings=true,MPSSupport=true")
    verdict = judge_object(_claim(bad_mps, bad_ts), "resourceclaims", gates=on)
    assert [p.path.rsplit(".", 1)[1] for p in verdict.problems] == [
        "defaultActiveThreadPercentage",
        "interval",
    ]


def test_configs_without_sharing_are_admitted_with_every_gate_off_as_nvidia() -> None:
    # NVIDIA's Normalize leaves a config without sharing alone: no gate is involved.
    configs = (_gpu(), _gpu(kind="MigDeviceConfig"))
    assert judge_object(_claim(*configs), "resourceclaims", gates=DEFAULT_GATES).allowed


def test_an_unknown_strategy_is_refused_as_unknown_not_as_gated() -> None:
    verdict = judge_object(_claim(_gpu({"strategy": "Foo"})), "resourceclaims")
    (problem,) = verdict.problems
    assert problem.path.endswith("sharing.strategy")
    assert "Unsupported value: 'Foo'" in problem.message


def test_compute_domain_configs_need_no_gate() -> None:
    obj = _claim()
    obj["spec"]["devices"]["config"] = [
        {
            "requests": ["gpu"],
            "opaque": {
                "driver": CD,
                "parameters": {
                    "apiVersion": NV,
                    "kind": "ComputeDomainChannelConfig",
                    "domainID": "d",
                },
            },
        }
    ]
    assert judge_object(obj, "resourceclaims", gates=DEFAULT_GATES).allowed


def test_review_denies_with_nvidias_gate_message_and_admits_with_the_gate_on() -> None:
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "resource": {
                "group": "resource.k8s.io",
                "version": "v1beta1",
                "resource": "resourceclaims",
            },
            "operation": "CREATE",
            "object": _claim(_gpu(TIME_SLICING)),
        },
    }
    status = review(body)["response"]["status"]
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert status["message"].endswith(TS_MESSAGE)
    allowed = review(body, gates=_gates("TimeSlicingSettings=true"))["response"]
    assert allowed == {"uid": "u-1", "allowed": True}
