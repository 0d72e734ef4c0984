"""Device names of the node inventory: MIG devices with several compute instances."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dra_api_types import ResourceSlice
from dra_kubelet_plugin.inventory import build_inventory, mig_device_name
from dra_kubelet_plugin.slices import SliceSpec, build_resource_slices
from dra_nvlib import DeviceLibConfig, GpuInfo, open_device_lib

SPEC = SliceSpec(driver_name="gpu.nvidia.com", node_name="n1", node_uid="node-uid-1")


def _mig_gpu(tmp_path: Path) -> GpuInfo:
    config = DeviceLibConfig(
        backend="fake",
        node_name="n1",
        fake_fleet="1xA100-40GB:mig",
        fake_state_path=tmp_path / "f.json",
    )
    with open_device_lib(config) as lib:
        parent = lib.gpus()[0]
        lib.create_mig_device(parent.uuid, profile_id=9, placement_start=0)  # 3g.20gb
        lib.create_mig_device(parent.uuid, profile_id=19, placement_start=4)  # 1g.5gb
        return lib.gpus()[0]


def _split_first_gi(gpu: GpuInfo) -> GpuInfo:
    """The GPU as NVML reports it after the first GI got a second compute instance."""
    first, other = gpu.mig_devices
    second_ci = replace(first, ci_id=1, uuid="MIG-00000000-0000-0000-0000-00000000c101")
    return replace(gpu, mig_devices=(first, second_ci, other))


def test_single_compute_instance_keeps_the_plain_name(tmp_path: Path) -> None:
    gpu = _mig_gpu(tmp_path)
    assert [mig_device_name(gpu, m) for m in gpu.mig_devices] == [
        "gpu-0-mig-3g20gb-9-0",
        "gpu-0-mig-1g5gb-19-4",
    ]


def test_compute_instances_of_one_gpu_instance_get_distinct_stable_names(
    tmp_path: Path,
) -> None:
    gpu = _split_first_gi(_mig_gpu(tmp_path))
    devices = build_inventory([gpu])
    assert [d.name for d in devices] == [
        "gpu-0-mig-3g20gb-9-0-ci0",
        "gpu-0-mig-3g20gb-9-0-ci1",
        "gpu-0-mig-1g5gb-19-4",
    ]
    assert [d.uuid for d in devices[:2]] == [gpu.mig_devices[0].uuid, gpu.mig_devices[1].uuid]
    # Enumeration order does not change the names.
    shuffled = replace(gpu, mig_devices=tuple(reversed(gpu.mig_devices)))
    assert [d.name for d in build_inventory([shuffled])] == [d.name for d in devices]
    (data,) = build_resource_slices(SPEC, devices, generation=1)
    ResourceSlice.from_dict(data, validate=True)  # unique, valid DNS-label names
