# ruff: noqa: E501  (table rows are kept one per line)
"""resource.nvidia.com/v1beta1 opaque configs: strict decoding, normalize, validate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dra_api_types import (
    ComputeDomain,
    ComputeDomainChannelConfig,
    ComputeDomainClique,
    ComputeDomainDaemonConfig,
    GpuConfig,
    MigDeviceConfig,
    Quantity,
    ResourceClaimTemplate,
    UnknownKindError,
    ValidationError,
    VfioDeviceConfig,
    load_all,
    parse_object,
)
from dra_api_types.nvidia_v1beta1 import decode_opaque_config

DEMO = Path(__file__).parent / "fixtures" / "nvidia-demo-specs"
AV = "resource.nvidia.com/v1beta1"


def _opaque_parameters() -> list[dict[str, Any]]:
    found = []
    for path in sorted(DEMO.glob("*.yaml")):
        for obj in load_all(path):
            if isinstance(obj, ResourceClaimTemplate):
                for config in obj.spec.spec.devices.config or []:
                    if config.opaque is not None:
                        found.append(config.opaque.parameters)
    return found


def test_every_demo_config_decodes_and_roundtrips() -> None:
    params = _opaque_parameters()
    assert len(params) == 5
    for p in params:
        config = decode_opaque_config(p)
        assert config.to_dict() == p
        config.normalize().validate()


def test_mps_demo_config() -> None:
    config = decode_opaque_config(
        {
            "apiVersion": AV,
            "kind": "GpuConfig",
            "sharing": {
                "strategy": "MPS",
                "mpsConfig": {
                    "defaultActiveThreadPercentage": 50,
                    "defaultPinnedDeviceMemoryLimit": "10Gi",
                },
            },
        }
    )
    assert isinstance(config, GpuConfig)
    assert config.sharing is not None
    assert config.sharing.is_mps()
    mps = config.sharing.mps_config
    assert mps is not None
    assert mps.default_pinned_device_memory_limit == Quantity.parse("10Gi")


def test_gpu_config_defaults_like_the_driver() -> None:
    # NVIDIA's Normalize at main: a GpuConfig without sharing stays without sharing.
    normalized = GpuConfig().normalize()
    assert normalized.to_dict() == {"apiVersion": AV, "kind": "GpuConfig"}
    time_sliced = decode_opaque_config(
        {"apiVersion": AV, "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}}
    )
    assert time_sliced.normalize().to_dict()["sharing"] == {
        "strategy": "TimeSlicing",
        "timeSlicingConfig": {"interval": "Default"},
    }
    mps = decode_opaque_config(
        {"apiVersion": AV, "kind": "GpuConfig", "sharing": {"strategy": "MPS"}}
    )
    assert mps.normalize().to_dict()["sharing"] == {"strategy": "MPS", "mpsConfig": {}}
    # normalize returns a copy
    original = GpuConfig()
    original.normalize()
    assert original.sharing is None


def test_time_slice_interval_values() -> None:
    config = decode_opaque_config(
        {
            "apiVersion": AV,
            "kind": "GpuConfig",
            "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
        }
    )
    assert isinstance(config, GpuConfig)
    assert config.sharing is not None
    assert config.sharing.time_slicing_config is not None
    assert config.sharing.time_slicing_config.interval_value() == 3


def test_mig_and_vfio_and_compute_domain_configs() -> None:
    mig = decode_opaque_config({"apiVersion": AV, "kind": "MigDeviceConfig"})
    assert isinstance(mig, MigDeviceConfig)
    assert "sharing" not in mig.normalize().to_dict()
    with pytest.raises(ValidationError) as raised:
        decode_opaque_config(
            {
                "apiVersion": AV,
                "kind": "MigDeviceConfig",
                "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {}},
            }
        )
    assert raised.value.path == "sharing.timeSlicingConfig"
    vfio = decode_opaque_config({"apiVersion": AV, "kind": "VfioDeviceConfig"})
    assert isinstance(vfio, VfioDeviceConfig)
    assert vfio.normalize().to_dict()["iommu"] == {
        "backendPolicy": "LegacyOnly",
        "enableAPIDevice": False,
    }
    with pytest.raises(ValidationError) as raised:
        decode_opaque_config(
            {"apiVersion": AV, "kind": "VfioDeviceConfig", "iommu": {"backendPolicy": "Auto"}}
        )
    assert raised.value.path == "iommu.backendPolicy"
    channel = decode_opaque_config(
        {"apiVersion": AV, "kind": "ComputeDomainChannelConfig", "domainID": "d1"}
    )
    assert isinstance(channel, ComputeDomainChannelConfig)
    assert channel.normalize().allocation_mode == "Single"
    daemon = decode_opaque_config(
        {"apiVersion": AV, "kind": "ComputeDomainDaemonConfig", "domainID": "d1"}
    )
    assert isinstance(daemon, ComputeDomainDaemonConfig)
    with pytest.raises(ValidationError) as raised:
        decode_opaque_config({"apiVersion": AV, "kind": "ComputeDomainDaemonConfig"})
    assert raised.value.path == "domainID"


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"apiVersion": "resource.nvidia.com/v1", "kind": "GpuConfig"}, "apiVersion"),
        ({"apiVersion": AV, "kind": "TpuConfig"}, "kind"),
        ({"apiVersion": AV}, "kind"),
        ({"apiVersion": AV, "kind": "GpuConfig", "shareing": {}}, "shareing"),
        ({"apiVersion": AV, "kind": "GpuConfig", "sharing": {"strategy": "MPS", "mps": {}}}, "sharing.mps"),
        ({"apiVersion": AV, "kind": "GpuConfig", "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": -1}}}, "sharing.mpsConfig.defaultActiveThreadPercentage"),
        ({"apiVersion": AV, "kind": "GpuConfig", "sharing": {"strategy": "MPS", "mpsConfig": {"defaultPinnedDeviceMemoryLimit": "-1Gi"}}}, "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit"),
        ({"apiVersion": AV, "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": 3}}}, "sharing.timeSlicingConfig.interval"),
        ({"apiVersion": AV, "kind": "GpuConfig", "sharing": {"strategy": "MPS", "timeSlicingConfig": {}}}, "sharing.timeSlicingConfig"),
        ({"apiVersion": AV, "kind": "VfioDeviceConfig", "iommu": {"backendPolicy": "LegacyOnly", "enableApiDevice": True}}, "iommu.enableApiDevice"),
    ],
)  # fmt: skip
def test_invalid_configs_name_the_field(params: dict[str, Any], path: str) -> None:
    with pytest.raises(ValidationError) as raised:
        decode_opaque_config(params)
    assert raised.value.path == path
    assert path.rsplit(".", 1)[-1] in str(raised.value)


def test_unknown_kind_is_an_unknown_kind_error() -> None:
    with pytest.raises(UnknownKindError, match="TpuConfig"):
        decode_opaque_config({"apiVersion": AV, "kind": "TpuConfig"})


def test_pinned_memory_limits_by_uuid_and_index() -> None:
    config = decode_opaque_config(
        {
            "apiVersion": AV,
            "kind": "GpuConfig",
            "sharing": {
                "strategy": "MPS",
                "mpsConfig": {
                    "defaultPinnedDeviceMemoryLimit": "10Gi",
                    "defaultPerDevicePinnedMemoryLimit": {"GPU-b": "2Gi", "0": "1536Mi"},
                },
            },
        }
    )
    assert isinstance(config, GpuConfig)
    assert config.sharing is not None
    mps = config.sharing.mps_config
    assert mps is not None
    assert mps.pinned_memory_limits(["GPU-a", "GPU-b", "GPU-c"]) == {
        "GPU-a": "1536M",
        "GPU-b": "2048M",
        "GPU-c": "10240M",
    }
    with pytest.raises(ValidationError, match="invalid device"):
        mps.pinned_memory_limits(["GPU-z"])


def test_compute_domain_normalize_and_clique() -> None:
    (cd, _pod) = load_all(DEMO / "imex_channel-injection.yaml")
    assert isinstance(cd, ComputeDomain)
    assert cd.spec.channel is not None
    assert cd.spec.channel.allocation_mode is None
    normalized = cd.normalize()
    assert normalized.spec.channel is not None
    assert normalized.spec.channel.allocation_mode == "Single"
    normalized.validate()
    clique = parse_object(
        {
            "apiVersion": AV,
            "kind": "ComputeDomainClique",
            "metadata": {"name": "uid.clique-1", "namespace": "nvidia-dra-driver-gpu"},
            "daemons": [{"nodeName": "n1", "ipAddress": "10.0.0.1", "cliqueID": "c", "index": 0}],
        },
        validate=True,
    )
    assert isinstance(clique, ComputeDomainClique)
    assert clique.normalize().to_dict()["daemons"][0]["status"] == "NotReady"


def test_compute_domain_from_a_newer_server_keeps_unknown_spec_fields() -> None:
    doc = {
        "apiVersion": AV,
        "kind": "ComputeDomain",
        "metadata": {"name": "cd", "namespace": "default"},
        "spec": {
            "numNodes": 0,
            "channel": {"resourceClaimTemplate": {"name": "t"}},
            "mode": "Delayed",
        },
        "status": {"status": "Ready", "nodes": []},
    }
    cd = parse_object(doc)
    assert isinstance(cd, ComputeDomain)
    assert cd.to_dict() == doc
    with pytest.raises(ValidationError) as raised:
        cd.validate()
    assert raised.value.path == "spec.mode"
