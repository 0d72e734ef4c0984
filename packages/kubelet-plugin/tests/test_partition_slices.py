"""What NVIDIA's ``FabricManagerPartitioning`` publishes (cmd/gpu-kubelet-plugin deviceinfo.go,
``addFabricManagerAttributes``): ``gpuModuleID`` and ``partition<N>`` (the id of the GPU's
partition of N GPUs) on full GPUs and passthrough GPUs, never on MIG devices; with the gate on
and no Fabric Manager only ``gpuModuleID``; nothing with the gate off."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from dra_api_types import ResourceSlice
from dra_kubelet_plugin.inventory import DeviceType, NodeDevice, build_inventory, build_vfio_devices
from dra_kubelet_plugin.partition_attributes import PartitionAttributes, partition_attributes
from dra_kubelet_plugin.plugin import publication_of
from dra_kubelet_plugin.settings import Settings, build_parser, settings_from_args
from dra_kubelet_plugin.slices import SlicePublication, SliceSpec, build_resource_slices
from dra_nvlib import DeviceLibConfig, hgx_partitions, open_device_lib

SPEC = SliceSpec(driver_name="gpu.nvidia.com", node_name="n1")
FABRIC = {"gpuModuleID", "partition1", "partition2"}


def _every_kind(tmp_path: Path) -> list[NodeDevice]:
    """GPU 0 with a MIG device, GPU 1 whole and as its passthrough twin."""
    config = DeviceLibConfig(
        backend="fake",
        node_name="n1",
        fake_fleet="1xA100-40GB:mig,1xA100-40GB",
        fake_state_path=tmp_path / "f.json",
    )
    with open_device_lib(config) as lib:
        lib.create_mig_device(lib.gpus()[0].uuid, profile_id=19, placement_start=0)
        gpus = lib.gpus()
        bus = lib.pci_bus()
        facts = [bus.facts(b) for b in bus.gpu_bus_ids()]
        vfio = build_vfio_devices(gpus, facts, iommufd=bus.iommufd_available())
    return build_inventory(gpus) + vfio


def _attributes(
    devices: list[NodeDevice], partitions: PartitionAttributes | None
) -> dict[str, dict[str, Any]]:
    slices = build_resource_slices(
        SPEC, devices, generation=1, publication=SlicePublication(partitions=partitions)
    )
    for data in slices:
        ResourceSlice.from_dict(data, validate=True)
    return {d["name"]: d["attributes"] for s in slices for d in s["spec"]["devices"]}


def test_full_and_passthrough_gpus_carry_module_and_partitions_mig_devices_do_not(
    tmp_path: Path,
) -> None:
    devices = _every_kind(tmp_path)
    attrs = _attributes(devices, partition_attributes(hgx_partitions(2)))
    by_type = {d.name: d.type for d in devices}
    for name, published in attrs.items():
        fabric = {k: v for k, v in published.items() if k in FABRIC}
        if by_type[name] is DeviceType.MIG:
            assert fabric == {}, name
            continue
        module = next(d.gpu.module_id for d in devices if d.name == name)
        # HGX layout of 2: partition 0 holds both; 1 and 2 one each.
        assert fabric == {
            "gpuModuleID": {"int": module},
            "partition2": {"int": 0},
            "partition1": {"int": module},
        }, name
    assert {by_type[n] for n in attrs if "gpuModuleID" in attrs[n]} == {
        DeviceType.GPU,
        DeviceType.VFIO,
    }


def test_without_fabric_manager_only_the_module_id_and_gate_off_nothing(tmp_path: Path) -> None:
    devices = _every_kind(tmp_path)
    no_fm = _attributes(devices, PartitionAttributes())
    assert {k for a in no_fm.values() for k in a if k in FABRIC} == {"gpuModuleID"}
    off = _attributes(devices, None)
    assert {k for a in off.values() for k in a if k in FABRIC} == set()


def _settings(*argv: str) -> Settings:
    return settings_from_args(build_parser({}).parse_args(["--node-name", "n", *argv]))


def test_the_gate_is_built_and_turns_the_attributes_on() -> None:
    on = _settings("--feature-gates", "FabricManagerPartitioning=true")
    assert publication_of(_settings()).partitions is None
    assert publication_of(on).partitions == PartitionAttributes()
    assert on.unimplemented_gates() == {}, "the gate is built: not named as unimplemented"


def test_print_resource_slices_shows_the_fake_fabric_managers_partitions(tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "dra_kubelet_plugin",
        "--node-name=n1",
        "--device-backend=fake",
        "--fake-gpus=4xA100-40GB",
        f"--fake-gpu-state-file={tmp_path / 'fake.json'}",
        "--feature-gates=FabricManagerPartitioning=true",
        "--print-resource-slices",
    ]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120).stdout
    (data,) = list(yaml.safe_load_all(out))
    pairs = {d["name"]: d["attributes"]["partition2"]["int"] for d in data["spec"]["devices"]}
    assert pairs == {"gpu-0": 1, "gpu-1": 1, "gpu-2": 2, "gpu-3": 2}
    assert (tmp_path / "fake-fabric-manager.json").exists()
