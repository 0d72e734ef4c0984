# ruff: noqa: E501  (table rows are kept one per line)
"""NVIDIA's config surfaces, case by case: the same input decides the same here.

The facts come from NVIDIA's driver at ``main`` (``api/nvidia.com/resource/v1beta1``: the
strict, case-sensitive decoder of ``api.go``, ``Normalize`` and ``Validate`` of each config
kind, ``sharing_test.go``'s pinned-memory table; the webhook's and the compute-domain plugin's
decode cases). NVIDIA decides with its sharing gates on; a gate that is off is the webhook's
business (``test_webhook_feature_gates.py``). Where ours decides otherwise on purpose, the case
sits in the last table, with NVIDIA's outcome written beside ours, and in
``docs/nvidia-differences.md``.
"""

from __future__ import annotations

from typing import Any

import pytest
from dra_api_types import Quantity, ValidationError
from dra_api_types.nvidia_v1beta1 import MpsConfig, decode_opaque_config

AV = "resource.nvidia.com/v1beta1"


def _config(kind: str, **body: Any) -> dict[str, Any]:
    return {"apiVersion": AV, "kind": kind, **body}


def _gpu(sharing: dict[str, Any]) -> dict[str, Any]:
    return _config("GpuConfig", sharing=sharing)


def _mig(sharing: dict[str, Any]) -> dict[str, Any]:
    return _config("MigDeviceConfig", sharing=sharing)


def _mps(**mps: Any) -> dict[str, Any]:
    return _gpu({"strategy": "MPS", "mpsConfig": mps})


# ---------------------------------------------------------------------------- decode
# NVIDIA's StrictDecoder is apimachinery's JSON serializer with Strict: true, which decodes
# case-sensitively: a key differing from the JSON name only in case is an unknown field.
CASE_VARIANTS = [
    pytest.param(_config("GpuConfig", Sharing={"strategy": "MPS"}), "GpuConfig", "Sharing", id="gpu-Sharing"),
    pytest.param(_gpu({"Strategy": "MPS"}), "GpuConfig", "sharing.Strategy", id="gpu-Strategy"),
    pytest.param(_gpu({"strategy": "MPS", "mps_config": {}}), "GpuConfig", "sharing.mps_config", id="gpu-mps_config"),
    pytest.param(_gpu({"strategy": "MPS", "MpsConfig": {}}), "GpuConfig", "sharing.MpsConfig", id="gpu-MpsConfig"),
    pytest.param(_gpu({"strategy": "TimeSlicing", "time_slicing_config": {}}), "GpuConfig", "sharing.time_slicing_config", id="gpu-time_slicing_config"),
    pytest.param(_gpu({"strategy": "TimeSlicing", "timeSlicingConfig": {"Interval": "Long"}}), "GpuConfig", "sharing.timeSlicingConfig.Interval", id="gpu-Interval"),
    pytest.param(_mps(default_active_thread_percentage=10), "GpuConfig", "sharing.mpsConfig.default_active_thread_percentage", id="mps-snake-percentage"),
    pytest.param(_mps(DefaultPinnedDeviceMemoryLimit="1Gi"), "GpuConfig", "sharing.mpsConfig.DefaultPinnedDeviceMemoryLimit", id="mps-Pinned"),
    pytest.param(_mps(multiuser=True), "GpuConfig", "sharing.mpsConfig.multiuser", id="mps-multiuser"),
    pytest.param(_mig({"strategy": "MPS", "mps_config": {}}), "MigDeviceConfig", "sharing.mps_config", id="mig-mps_config"),
    pytest.param(_config("MigDeviceConfig", SHARING={"strategy": "MPS"}), "MigDeviceConfig", "SHARING", id="mig-SHARING"),
    pytest.param(_config("VfioDeviceConfig", IOMMU={}), "VfioDeviceConfig", "IOMMU", id="vfio-IOMMU"),
    pytest.param(_config("VfioDeviceConfig", iommu={"backend_policy": "LegacyOnly"}), "VfioDeviceConfig", "iommu.backend_policy", id="vfio-backend_policy"),
    pytest.param(_config("VfioDeviceConfig", iommu={"enableApiDevice": True}), "VfioDeviceConfig", "iommu.enableApiDevice", id="vfio-enableApiDevice"),
    pytest.param(_config("ComputeDomainChannelConfig", domainId="d"), "ComputeDomainChannelConfig", "domainId", id="channel-domainId"),
    pytest.param(_config("ComputeDomainChannelConfig", domainID="d", allocation_mode="All"), "ComputeDomainChannelConfig", "allocation_mode", id="channel-allocation_mode"),
    pytest.param(_config("ComputeDomainDaemonConfig", domain_id="d"), "ComputeDomainDaemonConfig", "domain_id", id="daemon-domain_id"),
    pytest.param(_config("GpuConfig", Kind="GpuConfig"), "GpuConfig", "Kind", id="top-Kind"),
    pytest.param(_config("GpuConfig", api_version=AV), "GpuConfig", "api_version", id="top-api_version"),
]  # fmt: skip


@pytest.mark.parametrize(("params", "kind", "path"), CASE_VARIANTS)
def test_a_key_whose_case_differs_from_nvidias_json_name_is_refused_naming_kind_and_path(
    params: dict[str, Any], kind: str, path: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        decode_opaque_config(params)
    assert raised.value.path == path
    assert raised.value.object_ref.kind == kind
    assert str(raised.value).startswith(f"{kind}: {path}: unknown field")


def test_the_case_hint_names_the_json_name_to_write() -> None:
    with pytest.raises(ValidationError, match=r"'mps_config' \(did you mean 'mpsConfig'\?\)"):
        decode_opaque_config(_gpu({"strategy": "MPS", "mps_config": {}}))
    with pytest.raises(ValidationError, match=r"did you mean 'enableAPIDevice'"):
        decode_opaque_config(_config("VfioDeviceConfig", iommu={"enable_api_device": True}))


# Every field by NVIDIA's exact JSON name decodes (its Go struct tags).
EXACT_NAMES = [
    pytest.param(_gpu({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Short"}}), id="gpu-time-slicing"),
    pytest.param(_mps(defaultActiveThreadPercentage=20, defaultPinnedDeviceMemoryLimit="1Gi", defaultPerDevicePinnedMemoryLimit={"0": "2Gi"}, multiUser=True), id="gpu-mps-all-fields"),
    pytest.param(_mig({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50}}), id="mig-mps"),
    pytest.param(_mig({"strategy": "TimeSlicing"}), id="mig-time-slicing"),
    pytest.param(_config("VfioDeviceConfig", iommu={"backendPolicy": "PreferIommuFD", "enableAPIDevice": True}), id="vfio"),
    pytest.param(_config("ComputeDomainChannelConfig", domainID="d", allocationMode="All"), id="channel"),
    pytest.param(_config("ComputeDomainDaemonConfig", domainID="d"), id="daemon"),
]  # fmt: skip


@pytest.mark.parametrize("params", EXACT_NAMES)
def test_nvidias_json_names_decode_and_write_back_unchanged(params: dict[str, Any]) -> None:
    assert decode_opaque_config(params).to_dict() == params


@pytest.mark.parametrize(
    ("params", "path"),
    [
        # compute-domain plugin's device_state_test: an unknown field is a decode error.
        (_config("ComputeDomainChannelConfig", domainID="domain", unknown="field"), "unknown"),
        # MigDeviceSharing has no timeSlicingConfig field at all.
        (_mig({"strategy": "TimeSlicing", "timeSlicingConfig": {}}), "sharing.timeSlicingConfig"),
    ],
)
def test_fields_nvidias_types_do_not_have_are_refused(params: dict[str, Any], path: str) -> None:
    with pytest.raises(ValidationError) as raised:
        decode_opaque_config(params)
    assert raised.value.path == path


# ---------------------------------------------------------------------------- normalize
# NVIDIA's Normalize with TimeSlicingSettings and MPSSupport on (input -> normalized body).
NORMALIZE = [
    pytest.param(_config("GpuConfig"), {}, id="gpu-no-sharing-stays-unshared"),
    pytest.param(_gpu({"strategy": "TimeSlicing"}), {"sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}}, id="gpu-time-slicing-default-interval"),
    pytest.param(_gpu({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}), {"sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}}, id="gpu-time-slicing-kept"),
    pytest.param(_gpu({"strategy": "MPS"}), {"sharing": {"strategy": "MPS", "mpsConfig": {}}}, id="gpu-mps-empty-config"),
    pytest.param(_config("MigDeviceConfig"), {}, id="mig-no-sharing-stays-unshared"),
    pytest.param(_mig({"strategy": "MPS"}), {"sharing": {"strategy": "MPS", "mpsConfig": {}}}, id="mig-mps-empty-config"),
    pytest.param(_mig({"strategy": "TimeSlicing"}), {"sharing": {"strategy": "TimeSlicing"}}, id="mig-time-slicing"),
    pytest.param(_config("VfioDeviceConfig"), {"iommu": {"backendPolicy": "LegacyOnly", "enableAPIDevice": False}}, id="vfio-no-iommu"),
    pytest.param(_config("VfioDeviceConfig", iommu={}), {"iommu": {"backendPolicy": "LegacyOnly", "enableAPIDevice": False}}, id="vfio-empty-iommu"),
    pytest.param(_config("VfioDeviceConfig", iommu={"backendPolicy": "PreferIommuFD"}), {"iommu": {"backendPolicy": "PreferIommuFD", "enableAPIDevice": False}}, id="vfio-policy-kept"),
    pytest.param(_config("VfioDeviceConfig", iommu={"enableAPIDevice": True}), {"iommu": {"backendPolicy": "LegacyOnly", "enableAPIDevice": True}}, id="vfio-api-device-kept"),
    pytest.param(_config("ComputeDomainDaemonConfig", domainID="d"), {"domainID": "d"}, id="daemon-unchanged"),
]  # fmt: skip


@pytest.mark.parametrize(("params", "body"), NORMALIZE)
def test_normalize_fills_the_defaults_nvidia_fills(
    params: dict[str, Any], body: dict[str, Any]
) -> None:
    normalized = decode_opaque_config(params).normalize().to_dict()
    assert normalized == {"apiVersion": AV, "kind": params["kind"], **body}


# ---------------------------------------------------------------------------- validate
# NVIDIA's Validate after Normalize (gates on): accepted (None) or refused at the path.
VALIDATE = [
    pytest.param(_config("GpuConfig"), None, id="gpu-empty"),
    *(pytest.param(_gpu({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": i}}), None, id=f"interval-{i}") for i in ("Default", "Short", "Medium", "Long")),
    pytest.param(_gpu({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Invalid Interval"}}), "sharing.timeSlicingConfig.interval", id="interval-invalid"),
    pytest.param(_gpu({"strategy": ""}), "sharing.strategy", id="strategy-empty"),
    pytest.param(_gpu({"strategy": "Exclusive"}), "sharing.strategy", id="strategy-unknown"),
    pytest.param(_gpu({}), "sharing.strategy", id="sharing-without-strategy"),
    pytest.param(_mig({"strategy": "Bogus"}), "sharing.strategy", id="mig-strategy-unknown"),
    *(pytest.param(_mps(defaultActiveThreadPercentage=p), None, id=f"percentage-{p}") for p in (0, 50, 100)),
    pytest.param(_mps(defaultActiveThreadPercentage=-1), "sharing.mpsConfig.defaultActiveThreadPercentage", id="percentage-negative"),
    pytest.param(_mps(defaultActiveThreadPercentage=101), "sharing.mpsConfig.defaultActiveThreadPercentage", id="percentage-over-100"),
    pytest.param(_mig({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 101}}), "sharing.mpsConfig.defaultActiveThreadPercentage", id="mig-percentage-over-100"),
    pytest.param(_mps(multiUser=True), None, id="mps-multi-user"),
    pytest.param(_config("VfioDeviceConfig", iommu={}), None, id="vfio-empty-iommu-defaulted"),
    pytest.param(_config("VfioDeviceConfig", iommu={"backendPolicy": "Auto"}), "iommu.backendPolicy", id="vfio-policy-unknown"),
    pytest.param(_config("ComputeDomainChannelConfig"), "domainID", id="channel-no-domain"),
    pytest.param(_config("ComputeDomainChannelConfig", domainID=""), "domainID", id="channel-empty-domain"),
    pytest.param(_config("ComputeDomainDaemonConfig"), "domainID", id="daemon-no-domain"),
    pytest.param(_config("ComputeDomainChannelConfig", domainID="d", allocationMode="Single"), None, id="channel-single"),
]  # fmt: skip


@pytest.mark.parametrize(("params", "refused_at"), VALIDATE)
def test_validate_accepts_and_refuses_what_nvidia_does(
    params: dict[str, Any], refused_at: str | None
) -> None:
    if refused_at is None:
        decode_opaque_config(params)
        return
    with pytest.raises(ValidationError) as raised:
        decode_opaque_config(params)
    assert raised.value.path == refused_at
    assert raised.value.object_ref.kind == params["kind"]


# ---------------------------------------------------------------------------- MPS limits
# sharing_test.go's TestMpsPerDevicePinnedMemoryLimitNormalize: (uuids, default limit,
# per-device limits) -> the limits the MPS daemon gets, or the error kind.
PINNED_LIMITS = [
    pytest.param([], None, {}, {}, id="empty input"),
    pytest.param([], None, {"0": "1Gi"}, "invalid device", id="no uuids, invalid device index"),
    pytest.param([], "2Gi", {"0": "1Gi"}, "invalid device", id="no uuids, default is overridden"),
    pytest.param(["UUID0"], "2Gi", {}, {"UUID0": "2048M"}, id="uuids, default is set"),
    pytest.param(["UUID0"], "1M", {}, "too low", id="uuids, default is too low"),
    pytest.param(["UUID0"], None, {"UUID0": "1M"}, "too low", id="uuids, override is too low"),
    pytest.param(["UUID0"], "2Gi", {"0": "1Gi"}, {"UUID0": "1024M"}, id="uuids, default is overridden"),
    pytest.param(["UUID0"], "2Gi", {"UUID0": "1Gi"}, {"UUID0": "1024M"}, id="uuids, default is overridden by uuid"),
    pytest.param(["UUID0"], "2Gi", {"UUID1": "1Gi"}, "invalid device", id="uuids, default is overridden, invalid UUID"),
    pytest.param(["UUID0"], "2Gi", {"1": "1Gi"}, "invalid device", id="uuids, default is overridden, invalid index"),
    pytest.param(["UUID0"], "10Mi", {}, {"UUID0": "10M"}, id="unit conversion Mi to M"),
    pytest.param(["UUID0"], "1Gi", {}, {"UUID0": "1024M"}, id="unit conversion Gi to M"),
    pytest.param(["UUID0"], "10M", {}, {"UUID0": "9M"}, id="unit conversion M to M"),
    pytest.param(["UUID0"], "1G", {}, {"UUID0": "953M"}, id="unit conversion G to M"),
]  # fmt: skip


@pytest.mark.parametrize(("uuids", "default", "per_device", "expected"), PINNED_LIMITS)
def test_pinned_memory_limits_as_nvidias_table(
    uuids: list[str],
    default: str | None,
    per_device: dict[str, str],
    expected: dict[str, str] | str,
) -> None:
    mps = MpsConfig(
        default_pinned_device_memory_limit=Quantity.parse(default) if default else None,
        default_per_device_pinned_memory_limit={
            k: Quantity.parse(v) for k, v in per_device.items()
        },
    )
    if isinstance(expected, str):
        with pytest.raises(ValidationError, match=expected):
            mps.pinned_memory_limits(uuids)
    else:
        assert mps.pinned_memory_limits(uuids) == expected


# ---------------------------------------------------------------------------- differences
# Ours refuses at decode (so at admission too) what NVIDIA's Validate lets through; each row
# says what NVIDIA does instead. docs/nvidia-differences.md lists them with the reason.
STRICTER_THAN_NVIDIA = [
    # NVIDIA: Validate passes; prepare fails in GetTimeSlicingConfig ("cannot use MpsConfig
    # with the 'TimeSlicing' strategy"); its webhook admits the claim.
    pytest.param(_gpu({"strategy": "TimeSlicing", "mpsConfig": {}}), "sharing.mpsConfig", id="gpu-time-slicing-with-mpsConfig"),
    # NVIDIA: Validate passes; prepare fails in GetMpsConfig; its webhook admits the claim.
    pytest.param(_gpu({"strategy": "MPS", "timeSlicingConfig": {}}), "sharing.timeSlicingConfig", id="gpu-mps-with-timeSlicingConfig"),
    # NVIDIA: accepted; the MIG device is time-sliced and mpsConfig silently ignored.
    pytest.param(_mig({"strategy": "TimeSlicing", "mpsConfig": {}}), "sharing.mpsConfig", id="mig-time-slicing-with-mpsConfig"),
    # NVIDIA: Validate passes; prepare fails ("invalid device: unable to parse key").
    pytest.param(_mps(defaultPerDevicePinnedMemoryLimit={"first": "1Gi"}), 'sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit["first"]', id="per-device-key-not-index-or-uuid"),
    # NVIDIA: Validate passes; prepare fails ("invalid limit: value set too low").
    pytest.param(_mps(defaultPinnedDeviceMemoryLimit="-1Gi"), "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit", id="negative-default-limit"),
    pytest.param(_mps(defaultPerDevicePinnedMemoryLimit={"0": "-1Gi"}), 'sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit["0"]', id="negative-per-device-limit"),
    # NVIDIA: Validate never looks at allocationMode; anything but "All" prepares Single.
    pytest.param(_config("ComputeDomainChannelConfig", domainID="d", allocationMode="Many"), "allocationMode", id="channel-unknown-allocation-mode"),
]  # fmt: skip


@pytest.mark.parametrize(("params", "path"), STRICTER_THAN_NVIDIA)
def test_ours_refuses_early_what_nvidia_admits_and_fails_or_ignores_later(
    params: dict[str, Any], path: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        decode_opaque_config(params)
    assert raised.value.path == path


def test_an_empty_time_slicing_config_gets_the_default_interval_where_nvidias_validate_panics() -> (
    None
):
    # NVIDIA's Normalize fills timeSlicingConfig only when it is absent; its Validate then
    # dereferences the nil interval of `timeSlicingConfig: {}` (a panic in the plugin and a
    # failed webhook call). Ours gives it the Default interval.
    params = _gpu({"strategy": "TimeSlicing", "timeSlicingConfig": {}})
    normalized = decode_opaque_config(params).normalize().to_dict()
    assert normalized["sharing"]["timeSlicingConfig"] == {"interval": "Default"}


def test_a_channel_config_without_mode_prepares_single_as_nvidias_empty_mode_does() -> None:
    # NVIDIA leaves allocationMode empty and prepares one channel unless it is "All"; ours
    # writes the mode it prepares.
    channel = decode_opaque_config(_config("ComputeDomainChannelConfig", domainID="d"))
    assert channel.normalize().to_dict()["allocationMode"] == "Single"
