"""The compute-domain plugin's backend, chosen once: fake settings give channel stand-ins and
the fake host IMEX, nvml settings the host's own nodes and ``nvidia-imex-ctl``."""

from __future__ import annotations

from pathlib import Path

from dra_computedomain.channel_nodes import ChannelNodes
from dra_computedomain.channel_prepare import channel_edits
from dra_computedomain.host_imex import FakeHostImex, HostImex
from dra_computedomain.plugin_backend import open_backend
from dra_computedomain.plugin_cli import PluginSettings, build_parser, settings_from_args
from dra_kubelet_core.host_devices import HostDeviceNodes, StandInDeviceNodes

HOST_MANAGED = ("--imex-mode=hostManaged", "--feature-gates=HostManagedIMEXDaemon=true")


def _settings(tmp_path: Path, *args: str) -> PluginSettings:
    parser = build_parser({"NODE_NAME": "node-a"})
    return settings_from_args(
        parser.parse_args(["--kubelet-plugins-directory-path", str(tmp_path), *args])
    )


def test_fake_settings_give_stand_ins_and_the_fake_host_imex(tmp_path: Path) -> None:
    settings = _settings(tmp_path, "--device-backend=fake", "--fake-gpus=4xGB200", *HOST_MANAGED)
    backend = open_backend(settings, tmp_path / "plugin")
    assert isinstance(backend.host, StandInDeviceNodes)
    assert isinstance(backend.host_imex, FakeHostImex)
    assert backend.host_imex.query()[-1].startswith("--u=/")
    assert backend.devices.backend == "fake"
    assert backend.devices.fake_state_path == tmp_path / "plugin" / "fake-gpus.json"
    assert (tmp_path / "plugin").is_dir()
    # Stand-ins always exist: nothing to make, /proc/devices is never read.
    nodes = ChannelNodes(backend.host, tmp_path / "no-proc")
    assert nodes.ensure("team-a/c1", "All") == 0
    edits = channel_edits("Single", "cluster.1", host=backend.host)
    assert [n.host_path for n in edits.device_nodes] == ["/dev/null"]


def test_nvml_settings_give_the_hosts_nodes_and_nvidia_imex_ctl(tmp_path: Path) -> None:
    settings = _settings(
        tmp_path, f"--dev-root={tmp_path / 'dev'}", "--nvidia-driver-root=/drv", *HOST_MANAGED
    )
    backend = open_backend(settings, tmp_path / "plugin")
    assert isinstance(backend.host, HostDeviceNodes)
    assert backend.host.dev_root == tmp_path / "dev"
    assert type(backend.host_imex) is HostImex
    assert backend.host_imex.query()[:2] == ("chroot", "/drv")
    assert (backend.devices.backend, backend.devices.fake_state_path) == ("nvml", None)
    assert not (tmp_path / "plugin").exists()
    assert open_backend(_settings(tmp_path), tmp_path).host_imex is None
