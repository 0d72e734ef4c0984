"""Passthrough devices without a cluster: ``gpu-vfio-M`` in the inventory and the slice, the
sibling exclusion, the VFIO CDI edits per backend policy, and the KEP-5304 metadata file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dra_api_types import ResourceSlice, VfioDeviceConfig
from dra_api_types.nvidia_v1beta1 import IommuConfig
from dra_kubelet_core.errors import ClaimRef, DeviceConfigError, DeviceInUseError
from dra_kubelet_core.host_devices import StandInDeviceNodes
from dra_kubelet_plugin.device_metadata import (
    MetadataDevice,
    MetadataFiles,
    render_metadata,
)
from dra_kubelet_plugin.inventory import (
    DeviceType,
    NodeDevice,
    build_inventory,
    build_vfio_devices,
    hidden_siblings,
    vfio_uuid,
)
from dra_kubelet_plugin.passthrough_devices import Passthrough, PassthroughFailedError
from dra_kubelet_plugin.slices import SliceSpec, build_resource_slices, device_json
from dra_kubelet_plugin.vfio_edits import vfio_container_edits, vfio_nodes
from dra_nvlib import DeviceLibConfig, FakeDeviceLib, FakePciBus, bind_vfio, open_device_lib
from dra_nvlib.pci_bus import PassthroughTarget

SPEC = SliceSpec(driver_name="gpu.nvidia.com", node_name="n1", node_uid="node-uid-1")


@pytest.fixture
def lib(tmp_path: Path) -> FakeDeviceLib:
    config = DeviceLibConfig(
        backend="fake",
        node_name="n1",
        fake_fleet="2xA100-40GB,1xA100-40GB:mig",
        fake_state_path=tmp_path / "f.json",
    )
    opened = open_device_lib(config)
    assert isinstance(opened, FakeDeviceLib)
    return opened


def test_vfio_twins_of_gpus_without_mig(lib: FakeDeviceLib) -> None:
    bus = lib.pci_bus()
    gpus = lib.gpus()
    vfio = build_vfio_devices(
        gpus, [bus.facts(b) for b in bus.gpu_bus_ids()], iommufd=bus.iommufd_available()
    )
    # The MIG-enabled third GPU is offered only as its MIG devices.
    assert [d.name for d in vfio] == ["gpu-vfio-0", "gpu-vfio-1"]
    assert all(d.type is DeviceType.VFIO for d in vfio)
    assert vfio[0].uuid == vfio_uuid(gpus[0].pci_bus_id) != gpus[0].uuid
    rendered = device_json(vfio[0])
    attrs = rendered["attributes"]
    assert isinstance(attrs, dict)
    assert attrs["type"] == {"string": "vfio"}
    assert attrs["vendorID"] == {"string": "0x10de"}
    assert attrs["deviceID"] == {"string": "0x20b0"}
    assert attrs["iommuFDEnabled"] == {"bool": True}
    assert attrs["resource.kubernetes.io/pciBusID"] == {"string": gpus[0].pci_bus_id}
    assert attrs["resource.kubernetes.io/pcieRoot"] == {"string": gpus[0].pcie_root}
    assert rendered["capacity"] == {"addressableMemory": {"value": "40Gi"}}
    devices = build_inventory(gpus) + vfio
    for doc in build_resource_slices(SPEC, devices, generation=3):
        ResourceSlice.from_dict(doc, validate=True)


def test_preparing_one_twin_hides_the_other(lib: FakeDeviceLib) -> None:
    bus = lib.pci_bus()
    gpus = lib.gpus()
    devices = build_inventory(gpus) + build_vfio_devices(
        gpus, [bus.facts(b) for b in bus.gpu_bus_ids()], iommufd=False
    )
    assert hidden_siblings(devices, set()) == set()
    assert hidden_siblings(devices, {"gpu-vfio-0"}) == {"gpu-0"}
    assert hidden_siblings(devices, {"gpu-1"}) == {"gpu-vfio-1"}
    assert hidden_siblings(devices, {"gpu-2-mig-3g20gb-9-0"}) == set()


def test_vfio_nodes_follow_backend_policy(lib: FakeDeviceLib) -> None:
    bus = lib.pci_bus()
    gpu = lib.gpus()[0]
    facts = bind_vfio(bus, PassthroughTarget(gpu.pci_bus_id, gpu.minor), ours=bus.gpu_bus_ids())
    # No config: NVIDIA's defaults, LegacyOnly without the API device node.
    default = vfio_nodes(facts, None, iommufd_available=True)
    assert (default.backend, default.device, default.api) == ("legacy", "/dev/vfio/7", None)
    with_api = VfioDeviceConfig(
        iommu=IommuConfig(backend_policy="LegacyOnly", enable_api_device=True)
    )
    legacy = vfio_nodes(facts, with_api, iommufd_available=True)
    assert (legacy.backend, legacy.device, legacy.api) == (
        "legacy",
        "/dev/vfio/7",
        "/dev/vfio/vfio",
    )
    prefer = VfioDeviceConfig(
        iommu=IommuConfig(backend_policy="PreferIommuFD", enable_api_device=True)
    )
    fd = vfio_nodes(facts, prefer, iommufd_available=True)
    assert (fd.backend, fd.device, fd.api) == ("iommufd", "/dev/vfio/devices/vfio7", "/dev/iommu")
    # Without /dev/iommu the preference falls back to the group node.
    assert vfio_nodes(facts, prefer, iommufd_available=False).device == "/dev/vfio/7"
    no_api = VfioDeviceConfig(
        iommu=IommuConfig(backend_policy="LegacyOnly", enable_api_device=False)
    )
    assert vfio_nodes(facts, no_api, iommufd_available=True).api is None
    edits = vfio_container_edits(legacy, StandInDeviceNodes()).to_json()
    assert edits == {
        "env": ["NVIDIA_VISIBLE_DEVICES=void"],
        "deviceNodes": [
            {"path": "/dev/vfio/7", "hostPath": "/dev/null"},
            {"path": "/dev/vfio/vfio", "hostPath": "/dev/null"},
        ],
    }
    bad = VfioDeviceConfig(iommu=IommuConfig(backend_policy="Sometimes"))
    with pytest.raises(ValueError, match=r"iommu\.backendPolicy 'Sometimes'"):
        vfio_nodes(facts, bad, iommufd_available=True)


def test_metadata_file_and_mount(tmp_path: Path) -> None:
    files = MetadataFiles(tmp_path / "gpu.nvidia.com", driver="gpu.nvidia.com")
    doc = render_metadata(
        driver="gpu.nvidia.com",
        claim_namespace="vm",
        claim_name="gpu-claim",
        claim_uid="uid-1",
        request="gpu",
        devices=[
            MetadataDevice(
                name="gpu-vfio-0",
                pool="n1",
                attributes={
                    "resource.kubernetes.io/pciBusID": {"string": "0000:07:00.0"},
                    "iommuGroup": {"int": 7},
                },
            )
        ],
    )
    mount = files.write(claim_uid="uid-1", claim_name="gpu-claim", request="gpu", doc=doc)
    host = Path(mount.host_path)
    assert host == (
        tmp_path / "gpu.nvidia.com" / "dra-device-metadata" / "uid-1" / "gpu" / "metadata.json"
    )
    assert mount.container_path == (
        "/var/run/dra-device-attributes/gpu-claim/gpu/gpu.nvidia.com-metadata.json"
    )
    assert "ro" in mount.options
    written = json.loads(host.read_text())
    assert written["apiVersion"] == "metadata.resource.k8s.io/v1alpha1"
    assert written["kind"] == "DeviceMetadata"
    assert written["metadata"] == {"name": "gpu-claim", "namespace": "vm", "uid": "uid-1"}
    device = written["requests"][0]["devices"][0]
    assert device["attributes"]["resource.kubernetes.io/pciBusID"] == {"string": "0000:07:00.0"}
    assert files.known_claims() == {"uid-1"}
    files.release("uid-1")
    assert files.known_claims() == set()
    with pytest.raises(ValueError, match=r"claim UID '\.\./x'"):
        files.write(claim_uid="../x", claim_name="gpu-claim", request="gpu", doc=doc)


REF = ClaimRef(namespace="vm", name="gpu-claim", uid="uid-1")


def _vfio_device(lib: FakeDeviceLib, passthrough: Passthrough, index: int = 0) -> NodeDevice:
    return passthrough.devices(lib.gpus())[index]


def test_bind_and_release_through_the_plugin(lib: FakeDeviceLib) -> None:
    passthrough = Passthrough(lib.pci_bus(), host=StandInDeviceNodes())
    device = _vfio_device(lib, passthrough)
    bound = passthrough.bind(REF, device, None, config_field=None)
    assert bound.facts.driver == "vfio-pci"
    assert [n.path for n in bound.edits.device_nodes] == ["/dev/vfio/7"]
    attrs = bound.metadata_attributes(device_json(device)["attributes"])  # type: ignore[arg-type]
    assert attrs["iommuGroup"] == {"int": 7}
    assert attrs["vfioDeviceNode"] == {"string": "/dev/vfio/7"}
    assert Passthrough.bus_id_of(passthrough.device_state(device)) == device.gpu.pci_bus_id
    passthrough.release(device.gpu.pci_bus_id)
    assert passthrough.bus.facts(device.gpu.pci_bus_id).driver == "nvidia"


def test_refusals_name_the_gpu_and_reason_and_leave_it_on_nvidia(lib: FakeDeviceLib) -> None:
    bus = lib.pci_bus()
    assert isinstance(bus, FakePciBus)
    passthrough = Passthrough(bus, host=StandInDeviceNodes(), wait_timeout_s=0)
    device = _vfio_device(lib, passthrough)
    bus_id = device.gpu.pci_bus_id
    bus.set_users(bus_id, [99])
    with pytest.raises(PassthroughFailedError, match=rf"gpu-vfio-0 \({bus_id}\).*in use") as info:
        passthrough.bind(REF, device, None, config_field=None)
    assert info.value.claim == REF
    bus.set_users(bus_id, [])
    bad = VfioDeviceConfig(iommu=IommuConfig(backend_policy="Maybe"))
    with pytest.raises(DeviceConfigError, match="backendPolicy 'Maybe'") as cfg:
        passthrough.bind(REF, device, bad, config_field="status.allocation.devices.config[0]")
    assert cfg.value.field == "status.allocation.devices.config[0]"
    assert bus.facts(bus_id).driver == "nvidia"


def test_twin_prepared_for_another_claim_is_refused(lib: FakeDeviceLib) -> None:
    passthrough = Passthrough(lib.pci_bus(), host=StandInDeviceNodes())
    devices = build_inventory(lib.gpus()) + passthrough.devices(lib.gpus())
    vfio = next(d for d in devices if d.name == "gpu-vfio-0")
    with pytest.raises(DeviceInUseError, match=r"same GPU .* as gpu-0, prepared for claim other"):
        Passthrough.check_sibling(REF, vfio, {"gpu-0": {"other"}}, devices)
    Passthrough.check_sibling(REF, vfio, {"gpu-0": {REF.uid}, "gpu-1": {"other"}}, devices)


def test_recover_gives_back_unheld_and_driverless_gpus(lib: FakeDeviceLib) -> None:
    bus = lib.pci_bus()
    passthrough = Passthrough(bus, host=StandInDeviceNodes())
    first, second = passthrough.devices(lib.gpus())
    passthrough.bind(REF, first, None, config_field=None)
    passthrough.bind(REF, second, None, config_field=None)
    bus.unbind(second.gpu.pci_bus_id)  # a crash mid-switch
    # The first one is still held by a checkpointed claim: it stays on vfio-pci.
    assert passthrough.recover({first.gpu.pci_bus_id}) == [second.gpu.pci_bus_id]
    assert bus.facts(first.gpu.pci_bus_id).driver == "vfio-pci"
    assert bus.facts(second.gpu.pci_bus_id).driver == "nvidia"
    assert passthrough.recover(set()) == [first.gpu.pci_bus_id]
    assert bus.facts(first.gpu.pci_bus_id).driver == "nvidia"


def test_a_gpu_nvml_no_longer_lists_keeps_its_vfio_device(lib: FakeDeviceLib) -> None:
    passthrough = Passthrough(lib.pci_bus(), host=StandInDeviceNodes())
    gpus = lib.gpus()
    first = [d.name for d in passthrough.devices(gpus)]
    # On vfio-pci a real GPU vanishes from NVML's enumeration.
    assert [d.name for d in passthrough.devices(gpus[1:])] == first == ["gpu-vfio-0", "gpu-vfio-1"]
