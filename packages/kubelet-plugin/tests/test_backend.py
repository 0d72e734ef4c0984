"""The device backend is chosen once: fake settings give the fake parts, nvml settings the real
ones (selected without touching hardware), and no source below the factories compares
``device_backend``, takes a ``fake`` flag or names ``/dev/null`` itself."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from dra_kube_client.testing import MemoryApi
from dra_kubelet_core.cdi import DeviceNode
from dra_kubelet_core.errors import ConfigurationError
from dra_kubelet_core.host_devices import HostDeviceNodes, StandInDeviceNodes
from dra_kubelet_plugin.backend import (
    GpuBackend,
    backend_parts,
    device_lib_config,
    open_backend,
)
from dra_kubelet_plugin.container_edits import FakeEdits, NvmlEdits
from dra_kubelet_plugin.mps_deployment import DeploymentMpsLauncher
from dra_kubelet_plugin.settings import Settings, build_parser, settings_from_args
from dra_kubelet_plugin.vfio_host_nodes import VfioHostNodes
from dra_nvlib import (
    DeviceLibConfig,
    FabricManagerUnavailableError,
    FakeDeviceLib,
    FakeFabricManager,
    open_device_lib,
)
from dra_sharing import FakeMpsLauncher, NvidiaMpsLauncher

REPO = Path(__file__).resolve().parents[3]

#: The factories (and the flag's own validation) may read ``device_backend``.
FACTORIES = {
    "dra_kubelet_plugin/backend.py",
    "dra_kubelet_plugin/settings.py",
    "dra_computedomain/plugin_backend.py",
}
#: The one module that names the stand-ins' backing file.
STAND_INS = "dra_kubelet_core/host_devices.py"


def _settings(tmp_path: Path, *args: str) -> Settings:
    parser = build_parser({"NODE_NAME": "node-a"})
    return settings_from_args(
        parser.parse_args(["--kubelet-plugins-directory-path", str(tmp_path), *args])
    )


@pytest.fixture
def fake_lib(tmp_path: Path) -> Iterator[FakeDeviceLib]:
    config = DeviceLibConfig(
        backend="fake", node_name="n1", fake_fleet="1xL4", fake_state_path=tmp_path / "g.json"
    )
    lib = open_device_lib(config)
    assert isinstance(lib, FakeDeviceLib)
    yield lib
    lib.close()


def test_fake_settings_open_the_fake_fleet_and_pick_every_fake_part(tmp_path: Path) -> None:
    settings = _settings(tmp_path, "--device-backend=fake", "--fake-gpus=2xH100-80GB")
    backend = open_backend(settings)
    try:
        assert isinstance(backend.lib, FakeDeviceLib)
        assert len(backend.lib.gpus()) == 2
        assert (settings.plugin_dir / "fake-gpus.json").exists()
        assert isinstance(backend.edits, FakeEdits)
        assert isinstance(backend.mps_launcher, FakeMpsLauncher)
        assert isinstance(backend.host, StandInDeviceNodes)
    finally:
        backend.lib.close()


def test_nvml_settings_pick_the_real_parts_without_touching_hardware(
    tmp_path: Path, fake_lib: FakeDeviceLib
) -> None:
    settings = _settings(
        tmp_path,
        "--nvidia-driver-root=/run/nvidia/driver",
        "--container-driver-root=/driver-root",
        f"--dev-root={tmp_path / 'dev'}",
        f"--vfio-dir={tmp_path / 'vfio'}",
        f"--sysfs-root={tmp_path / 'sys'}",
    )
    config = device_lib_config(settings)
    assert (config.backend, config.driver_root) == ("nvml", Path("/driver-root"))
    assert config.fake_state_path is None
    backend = backend_parts(settings, fake_lib)
    assert isinstance(backend, GpuBackend)
    assert backend.lib is fake_lib
    assert isinstance(backend.edits, NvmlEdits)
    assert isinstance(backend.mps_launcher, NvidiaMpsLauncher)
    # VFIO nodes are looked for in the host's /dev/vfio alone, not below --dev-root.
    assert isinstance(backend.host, VfioHostNodes)
    assert (backend.host.vfio_dir, backend.host.sysfs_root) == (tmp_path / "vfio", tmp_path / "sys")


def test_printing_slices_without_a_state_file_creates_no_kubelet_directory(
    tmp_path: Path,
) -> None:
    settings = _settings(
        tmp_path / "kubelet", "--device-backend=fake", "--fake-gpus=1xL4", "--print-resource-slices"
    )
    config = device_lib_config(settings)
    assert config.fake_state_path is None
    assert config.fake_state_store == "memory"


def test_host_device_access_real_nodes_and_stand_ins(tmp_path: Path) -> None:
    (tmp_path / "dev" / "vfio").mkdir(parents=True)
    (tmp_path / "dev" / "vfio" / "7").touch()
    real = HostDeviceNodes(tmp_path)
    assert real.node("/dev/vfio/7") == DeviceNode(path="/dev/vfio/7")
    assert real.exists("/dev/vfio/7")
    assert not real.exists("/dev/vfio/8")
    stand_in = StandInDeviceNodes()
    assert stand_in.node("/dev/nvidia0", permissions="rw") == DeviceNode(
        path="/dev/nvidia0", host_path="/dev/null", permissions="rw"
    )
    assert stand_in.exists("/dev/anything")
    assert not stand_in.ensure_char_node(
        "/dev/x", module="m", minor=0, proc_devices=tmp_path / "absent"
    )


def _sources() -> list[tuple[str, ast.Module]]:
    found = []
    for path in sorted(REPO.glob("packages/*/src/**/*.py")):
        rel = path.relative_to(_src_of(path)).as_posix()
        found.append((rel, ast.parse(path.read_text(), filename=str(path))))
    return found


def _src_of(path: Path) -> Path:
    for parent in path.parents:
        if parent.name == "src":
            return parent
    raise AssertionError(f"{path} is not below a src directory")


def _names_backend(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "device_backend") or (
        isinstance(node, ast.Name) and node.id == "device_backend"
    )


def _offences(rel: str, tree: ast.Module) -> list[str]:
    """A ``device_backend`` ==/!= outside the factories, a ``fake``-named bool parameter or
    field, a ``"/dev/null"`` literal outside :data:`STAND_INS`."""
    found: list[str] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Compare)
            and rel not in FACTORIES
            and any(isinstance(op, ast.Eq | ast.NotEq) for op in node.ops)
            and any(_names_backend(n) for n in (node.left, *node.comparators))
        ):
            found.append(f"{rel}:{node.lineno}: compares device_backend")
        if isinstance(node, ast.arg | ast.AnnAssign) and "fake" in _name_of(node).lower():
            annotation = node.annotation
            if isinstance(annotation, ast.Name) and annotation.id == "bool":
                found.append(f"{rel}:{node.lineno}: fake flag {_name_of(node)}")
        if isinstance(node, ast.Constant) and node.value == "/dev/null" and rel != STAND_INS:
            found.append(f"{rel}:{node.lineno}: names /dev/null")
    return found


def _name_of(node: ast.arg | ast.AnnAssign) -> str:
    if isinstance(node, ast.arg):
        return node.arg
    return node.target.id if isinstance(node.target, ast.Name) else ""


def test_the_source_check_finds_each_kind_of_offence() -> None:
    snippet = """
class Part:
    fake: bool = False

def make(*, fake: bool) -> None:
    if settings.device_backend == "fake":
        node = "/dev/null"
"""
    assert len(_offences("pkg/part.py", ast.parse(snippet))) == 4
    assert len(_offences("dra_kubelet_plugin/backend.py", ast.parse(snippet))) == 3


def test_no_source_below_the_factories_compares_device_backend_or_takes_a_fake_flag() -> None:
    sources = _sources()
    assert len(sources) > 100
    offending = [o for rel, tree in sources for o in _offences(rel, tree)]
    assert offending == []


def test_the_fake_fabric_manager_sits_next_to_the_fleet_on_an_hgx_sized_node(
    tmp_path: Path,
) -> None:
    settings = _settings(tmp_path, "--device-backend=fake", "--fake-gpus=2xH100-80GB")
    backend = open_backend(settings)
    try:
        fm = backend.fabric_manager()
        assert isinstance(fm, FakeFabricManager)
        assert fm.path == settings.plugin_dir / "fake-fabric-manager.json"
        assert [p.module_ids for p in fm.partitions()] == [(1, 2), (1,), (2,)]
    finally:
        backend.lib.close()
    odd = _settings(tmp_path / "odd", "--device-backend=fake", "--fake-gpus=3xL4")
    backend = open_backend(odd)
    try:
        # NVIDIA skips Fabric Manager on a node without an NVSwitch fabric; three GPUs are
        # no HGX baseboard.
        assert backend.fabric_manager() is None
    finally:
        backend.lib.close()


def test_a_real_node_skips_fabric_manager_without_nvswitch_and_names_libnvfm_with_it(
    tmp_path: Path, fake_lib: FakeDeviceLib
) -> None:
    proc, sysfs = tmp_path / "proc", tmp_path / "sys"
    settings = _settings(tmp_path, f"--proc-root={proc}", f"--sysfs-root={sysfs}")
    backend = backend_parts(settings, fake_lib)
    assert backend.fabric_manager() is None
    (proc / "driver" / "nvidia-nvswitch" / "devices" / "0000:05:00.0").mkdir(parents=True)
    with pytest.raises(FabricManagerUnavailableError, match="no binding to libnvfm"):
        backend.fabric_manager()


def test_deployment_launcher_is_chosen_once_with_the_backend(
    tmp_path: Path, fake_lib: FakeDeviceLib
) -> None:
    process = backend_parts(
        _settings(tmp_path, "--device-backend=fake", "--fake-gpus=1xA100"), fake_lib
    )
    assert process.mps_deployment is None  # local runs: daemons are this process's children
    for backend_flags, client in (
        (["--device-backend=fake", "--fake-gpus=1xA100"], True),
        (
            ["--nvidia-driver-root=/run/nvidia/driver", "--container-driver-root=/driver-root"],
            False,
        ),
    ):
        settings = _settings(
            tmp_path,
            *backend_flags,
            "--mps-daemon-launcher=deployment",
            "--mps-daemon-image=registry.example/driver:1",
            "--namespace=dra",
        )
        opener = backend_parts(settings, fake_lib).mps_deployment
        assert opener is not None
        launcher = opener(MemoryApi())
        assert isinstance(launcher, DeploymentMpsLauncher)
        assert launcher.provides_client is client


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--mps-daemon-launcher=sidecar"], "--mps-daemon-launcher"),
        (["--mps-daemon-launcher=deployment", "--namespace=dra"], "--mps-daemon-image"),
        (["--mps-daemon-launcher=deployment", "--mps-daemon-image=i"], "--namespace"),
    ],
)
def test_deployment_launcher_settings_are_named(
    tmp_path: Path, flags: list[str], named: str
) -> None:
    with pytest.raises(ConfigurationError, match=f"^{named}"):
        _settings(tmp_path, *flags)
