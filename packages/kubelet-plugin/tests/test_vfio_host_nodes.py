"""The host's VFIO nodes through the passthrough plugin's narrow views: ``/dev/vfio`` mounted
alone (``--vfio-dir``) and ``/dev/iommu`` known from sysfs; nothing else of the host."""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_kubelet_core.cdi import DeviceNode
from dra_kubelet_core.device_nodes import NodeUnavailableError
from dra_kubelet_plugin.vfio_edits import VfioNodes, vfio_container_edits
from dra_kubelet_plugin.vfio_host_nodes import VfioHostNodes


def _host(tmp_path: Path, *, iommufd: bool = False) -> VfioHostNodes:
    vfio, sys = tmp_path / "host-vfio", tmp_path / "sys"
    (vfio / "devices").mkdir(parents=True)
    (vfio / "vfio").touch()
    (vfio / "7").touch()
    (vfio / "devices" / "vfio0").touch()
    if iommufd:
        (sys / "class" / "misc" / "iommu").mkdir(parents=True)
    return VfioHostNodes(vfio_dir=vfio, sysfs_root=sys)


def test_group_and_iommufd_nodes_are_looked_for_in_the_mounted_vfio_dir(tmp_path: Path) -> None:
    host = _host(tmp_path)
    assert host.exists("/dev/vfio/7")
    assert host.exists("/dev/vfio/vfio")
    assert host.exists("/dev/vfio/devices/vfio0")
    assert not host.exists("/dev/vfio/8")
    assert not host.exists("/dev/vfio/devices/vfio1")


def test_a_node_bound_after_start_is_seen(tmp_path: Path) -> None:
    # The kernel makes a group node when vfio-pci binds a GPU: the mounted directory shows it.
    host = _host(tmp_path)
    assert not host.exists("/dev/vfio/9")
    (tmp_path / "host-vfio" / "9").touch()
    assert host.exists("/dev/vfio/9")


@pytest.mark.parametrize("iommufd", [True, False])
def test_dev_iommu_comes_from_sysfs(tmp_path: Path, iommufd: bool) -> None:
    assert _host(tmp_path, iommufd=iommufd).exists("/dev/iommu") is iommufd


@pytest.mark.parametrize("path", ["/dev/nvidia0", "/etc/shadow", "/dev/vfio/../nvidia0", "/dev"])
def test_nothing_else_of_the_host_is_shown(tmp_path: Path, path: str) -> None:
    with pytest.raises(ValueError, match="is no VFIO node"):
        _host(tmp_path).exists(path)


def test_nodes_are_the_hosts_own_at_the_same_path(tmp_path: Path) -> None:
    host = _host(tmp_path, iommufd=True)
    nodes = VfioNodes(backend="iommufd", device="/dev/vfio/devices/vfio0", api="/dev/iommu")
    edits = vfio_container_edits(nodes, host)
    assert edits.device_nodes == (
        DeviceNode(path="/dev/vfio/devices/vfio0"),
        DeviceNode(path="/dev/iommu"),
    )


def test_vfio_nodes_are_never_created(tmp_path: Path) -> None:
    with pytest.raises(NodeUnavailableError) as err:
        _host(tmp_path).ensure_char_node(
            "/dev/vfio/8", module="vfio", minor=8, proc_devices=tmp_path / "devices"
        )
    assert err.value.path == "/dev/vfio/8"
    assert not (tmp_path / "host-vfio" / "8").exists()
