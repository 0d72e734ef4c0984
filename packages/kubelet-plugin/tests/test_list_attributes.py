"""NVIDIA's ``DRAListTypeAttributes`` gate (cmd/gpu-kubelet-plugin deviceinfo.go): the
standard ``resource.kubernetes.io/numaNode`` is published as a one-element list (``ints``)
on full GPUs, MIG devices and passthrough GPUs, and as a single ``int`` with the gate off."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from dra_api_types import ResourceSlice
from dra_kubelet_plugin.inventory import DeviceType, NodeDevice, build_inventory, build_vfio_devices
from dra_kubelet_plugin.plugin import publication_of
from dra_kubelet_plugin.settings import Settings, build_parser, settings_from_args
from dra_kubelet_plugin.slices import (
    MAX_DEVICES_PER_SLICE,
    MAX_DEVICES_PER_SLICE_WITH_TAINTS,
    NUMA_NODE_ATTRIBUTE,
    SlicePublication,
    SliceSpec,
    build_resource_slices,
)
from dra_nvlib import DeviceLibConfig, open_device_lib

SPEC = SliceSpec(driver_name="gpu.nvidia.com", node_name="n1", node_uid="node-uid-1")
LISTS = SlicePublication(list_attributes=True)


def _every_kind(tmp_path: Path) -> list[NodeDevice]:
    """A MIG device, a full GPU and a passthrough GPU, each with a NUMA node."""
    config = DeviceLibConfig(
        backend="fake",
        node_name="n1",
        fake_fleet="1xA100-40GB:mig,1xA100-40GB",
        fake_state_path=tmp_path / "f.json",
    )
    with open_device_lib(config) as lib:
        parent = lib.gpus()[0]
        lib.create_mig_device(parent.uuid, profile_id=19, placement_start=0)
        gpus = lib.gpus()
        bus = lib.pci_bus()
        facts = [bus.facts(b) for b in bus.gpu_bus_ids()]
        vfio = build_vfio_devices(gpus, facts, iommufd=bus.iommufd_available())
    devices = build_inventory(gpus) + vfio
    assert {d.type for d in devices} == {DeviceType.MIG, DeviceType.GPU, DeviceType.VFIO}
    assert all(d.gpu.numa_node is not None for d in devices)
    return devices


def _numa_of(slices: list[dict[str, Any]]) -> dict[str, object]:
    return {
        d["name"]: d["attributes"][NUMA_NODE_ATTRIBUTE]
        for s in slices
        for d in s["spec"]["devices"]
    }


def test_numa_node_is_a_one_element_int_list_on_every_device_kind_with_the_gate_as_nvidia(
    tmp_path: Path,
) -> None:
    devices = _every_kind(tmp_path)
    slices = build_resource_slices(SPEC, devices, generation=1, publication=LISTS)
    for data in slices:
        ResourceSlice.from_dict(data, validate=True)
    expected = {d.name: {"ints": [d.gpu.numa_node]} for d in devices}
    assert _numa_of(slices) == expected


def test_numa_node_stays_a_single_int_with_the_gate_off_as_nvidia(tmp_path: Path) -> None:
    devices = _every_kind(tmp_path)
    slices = build_resource_slices(SPEC, devices, generation=1)
    assert _numa_of(slices) == {d.name: {"int": d.gpu.numa_node} for d in devices}


def test_no_numa_node_no_attribute_in_either_form(tmp_path: Path) -> None:
    # NVIDIA skips a negative (unknown) node; sysfs -1 reaches us as None.
    device = _every_kind(tmp_path)[1]
    lost = dataclasses.replace(device, gpu=dataclasses.replace(device.gpu, numa_node=None))
    (data,) = build_resource_slices(SPEC, [lost], generation=1, publication=LISTS)
    (published,) = data["spec"]["devices"]
    assert NUMA_NODE_ATTRIBUTE not in published["attributes"]


@pytest.mark.parametrize(
    ("publication", "per_slice"),
    [(SlicePublication(), MAX_DEVICES_PER_SLICE), (LISTS, MAX_DEVICES_PER_SLICE_WITH_TAINTS)],
)
def test_slices_with_list_attributes_hold_at_most_64_devices_as_the_api_allows(
    tmp_path: Path, publication: SlicePublication, per_slice: int
) -> None:
    gpu = _every_kind(tmp_path)[1]
    many = [dataclasses.replace(gpu, name=f"gpu-{i}") for i in range(130)]
    slices = build_resource_slices(SPEC, many, generation=1, publication=publication)
    sizes = [len(s["spec"]["devices"]) for s in slices]
    assert sizes == [per_slice] * (130 // per_slice) + [130 % per_slice]
    for data in slices:
        ResourceSlice.from_dict(data, validate=True)


def _settings(*argv: str) -> Settings:
    return settings_from_args(build_parser({}).parse_args(["--node-name", "n", *argv]))


def test_the_gate_turns_list_attributes_on_in_the_plugins_publication() -> None:
    off = _settings()
    on = _settings("--feature-gates", "DRAListTypeAttributes=true")
    assert publication_of(off).list_attributes is False
    assert publication_of(on).list_attributes is True
    assert on.unimplemented_gates() == {}, "the gate is built: not named as unimplemented"


def test_print_resource_slices_publishes_the_list_form_with_the_gate(tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "dra_kubelet_plugin",
        "--node-name=n1",
        "--device-backend=fake",
        "--fake-gpus=2xH100-80GB",
        f"--fake-gpu-state-file={tmp_path / 'fake.json'}",
        "--feature-gates=DRAListTypeAttributes=true",
        "--print-resource-slices",
    ]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120).stdout
    (data,) = list(yaml.safe_load_all(out))
    numa = [d["attributes"][NUMA_NODE_ATTRIBUTE] for d in data["spec"]["devices"]]
    assert len(numa) == 2
    assert all(list(n) == ["ints"] and len(n["ints"]) == 1 for n in numa)
