"""IMEX channel device nodes on real nodes: which are missing, mknod with the major of
``nvidia-caps-imex-channels`` from ``/proc/devices``, and the error naming the node without
it. Runs on a temp dev root with a fake ``/proc/devices``; mknod needs CAP_MKNOD."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from dra_computedomain.channel_nodes import (
    ChannelNodes,
    channel_minors,
    channel_path,
    missing_channels,
)
from dra_computedomain.errors import ChannelDeviceError
from dra_computedomain.names import MAX_CHANNELS
from dra_kubelet_core.host_devices import HostDeviceNodes

PROC_DEVICES = """Character devices:
  1 mem
195 nvidia
234 nvidia-caps-imex-channels
235 nvidia-caps

Block devices:
  7 loop
234 not-a-char-device
"""


def _roots(tmp_path: Path, proc_devices: str = PROC_DEVICES) -> tuple[Path, Path]:
    dev_root, proc_root = tmp_path / "host", tmp_path / "proc"
    dev_root.mkdir()
    proc_root.mkdir()
    (proc_root / "devices").write_text(proc_devices)
    return dev_root, proc_root


def _mknod_permitted(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    try:
        os.mknod(probe, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        return False
    probe.unlink()
    return True


@pytest.fixture
def mknod_ok(tmp_path: Path) -> None:
    if not _mknod_permitted(tmp_path):
        pytest.skip("mknod of a character device is not permitted here (needs CAP_MKNOD)")


def test_minors_and_paths_follow_the_allocation_mode() -> None:
    assert channel_minors("Single") == range(1)
    assert channel_minors("All") == range(MAX_CHANNELS)
    assert channel_path(7) == "/dev/nvidia-caps-imex-channels/channel7"


def test_missing_channels_lists_only_absent_nodes() -> None:
    present = {channel_path(0), channel_path(2)}
    assert missing_channels(range(4), present.__contains__) == (1, 3)
    assert missing_channels(range(1), present.__contains__) == ()


@pytest.mark.usefixtures("mknod_ok")
def test_missing_channel_is_made_with_the_imex_channels_major(tmp_path: Path) -> None:
    dev_root, proc_root = _roots(tmp_path)
    nodes = ChannelNodes(HostDeviceNodes(dev_root), proc_root)
    assert nodes.ensure("team-a/c1", "Single") == 1
    node = dev_root / "dev/nvidia-caps-imex-channels/channel0"
    info = node.stat()
    assert stat.S_ISCHR(info.st_mode)
    assert (os.major(info.st_rdev), os.minor(info.st_rdev)) == (234, 0)
    assert stat.S_IMODE(info.st_mode) == 0o666
    # Present now: nothing more to make, and /proc/devices is not needed any more.
    (proc_root / "devices").unlink()
    assert nodes.ensure("team-a/c1", "Single") == 0


@pytest.mark.usefixtures("mknod_ok")
def test_all_mode_makes_every_missing_channel_with_its_minor(tmp_path: Path) -> None:
    dev_root, proc_root = _roots(tmp_path)
    channels = dev_root / "dev/nvidia-caps-imex-channels"
    channels.mkdir(parents=True)
    (channels / "channel5").touch()  # already there (the host made it): left alone
    assert (
        ChannelNodes(HostDeviceNodes(dev_root), proc_root).ensure("team-a/c1", "All")
        == MAX_CHANNELS - 1
    )
    assert (channels / "channel5").stat().st_size == 0
    assert not stat.S_ISCHR((channels / "channel5").stat().st_mode)
    last = (channels / f"channel{MAX_CHANNELS - 1}").stat()
    assert os.minor(last.st_rdev) == MAX_CHANNELS - 1


def test_no_imex_channels_major_fails_naming_claim_and_node(tmp_path: Path) -> None:
    dev_root, proc_root = _roots(tmp_path, "Character devices:\n195 nvidia\n")
    with pytest.raises(ChannelDeviceError) as err:
        ChannelNodes(HostDeviceNodes(dev_root), proc_root).ensure("team-a/c1", "Single")
    assert err.value.permanent
    assert err.value.node == "/dev/nvidia-caps-imex-channels/channel0"
    message = str(err.value)
    assert "claim team-a/c1" in message
    assert "/dev/nvidia-caps-imex-channels/channel0" in message
    assert "nvidia-caps-imex-channels" in message
    assert not (dev_root / "dev").exists()  # nothing half-made


def test_unreadable_proc_devices_fails_naming_the_node(tmp_path: Path) -> None:
    dev_root = tmp_path / "host"
    dev_root.mkdir()
    with pytest.raises(ChannelDeviceError, match="channel0: cannot read"):
        ChannelNodes(HostDeviceNodes(dev_root), tmp_path / "no-proc").ensure("team-a/c1", "Single")


@pytest.mark.usefixtures("mknod_ok")
def test_alt_proc_devices_is_read_in_place_of_proc_devices(tmp_path: Path) -> None:
    # NVIDIA's ALT_PROC_DEVICES_PATH (chart altProcDevices): the node's kernel lists no IMEX
    # channels (mock NVML), a substitute file does.
    dev_root, proc_root = _roots(tmp_path, "Character devices:\n  1 mem\n\nBlock devices:\n")
    alt = tmp_path / "alt-proc-devices"
    alt.write_text("Character devices:\n235 nvidia-caps-imex-channels\n\nBlock devices:\n")
    assert (
        ChannelNodes(HostDeviceNodes(dev_root), proc_root, proc_devices=alt).ensure(
            "team-a/c1", "Single"
        )
        == 1
    )
    info = (dev_root / "dev/nvidia-caps-imex-channels/channel0").stat()
    assert (os.major(info.st_rdev), os.minor(info.st_rdev)) == (235, 0)
    with pytest.raises(ChannelDeviceError, match="proc/devices lists no"):
        ChannelNodes(HostDeviceNodes(tmp_path / "other"), proc_root).ensure("team-a/c2", "Single")
