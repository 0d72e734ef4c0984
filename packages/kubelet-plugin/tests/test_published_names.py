"""Every attribute and capacity the plugin publishes in the ``gpu.nvidia.com`` domain is
listed in ``dra_api_types.gpu_attributes``, which the webhook's selector warnings read."""

from __future__ import annotations

from pathlib import Path

from dra_api_types.gpu_attributes import is_published_attribute, is_published_capacity
from dra_kubelet_plugin.inventory import build_inventory
from dra_kubelet_plugin.slices import SliceSpec, build_resource_slices
from dra_nvlib import DeviceLibConfig, open_device_lib

SPEC = SliceSpec(driver_name="gpu.nvidia.com", node_name="n1", node_uid="node-uid-1")


def test_published_names_are_listed_for_the_webhook(tmp_path: Path) -> None:
    config = DeviceLibConfig(
        backend="fake",
        node_name="n1",
        fake_fleet="1xA100-40GB:mig,1xH100-80GB,1xL4",
        fake_state_path=tmp_path / "f.json",
    )
    with open_device_lib(config) as lib:
        parent = lib.gpus()[0]
        lib.create_mig_device(parent.uuid, profile_id=19, placement_start=0)
        devices = build_inventory(lib.gpus())
    slices = build_resource_slices(SPEC, devices, generation=1)
    attributes: set[str] = set()
    capacities: set[str] = set()
    for data in slices:
        for device in data["spec"]["devices"]:
            attributes |= {k for k in device.get("attributes", {}) if "/" not in k}
            capacities |= {k for k in device.get("capacity", {}) if "/" not in k}
    assert {"productName", "parentUUID", "profile"} <= attributes
    assert {"memory", "multiprocessors"} <= capacities
    assert [a for a in sorted(attributes) if not is_published_attribute(a)] == []
    assert [c for c in sorted(capacities) if not is_published_capacity(c)] == []
