"""Our CDI content for real GPUs against ``nvidia-ctk cdi generate``, entry by entry.

``nvidia-ctk`` (nvidia-container-toolkit, built from its Go module, ``dra_e2e.toolkit``)
generates a spec in ``nvml`` mode for a synthetic driver root (``cdi_support``), meeting
NVIDIA's go-nvml mock GPUs (dgxa100) through the mock ``libnvidia-ml``. Our
:class:`~dra_kubelet_plugin.container_edits.NvmlEdits` renders the same root; the claim-wide
edits must equal the toolkit's spec-wide ``containerEdits`` (env, device nodes, mounts,
hooks) and each GPU's edits the toolkit's device edits.

Both render the mock's GPUs (our NVML backend loads the same mock library). The MIG case
gives the mock MIG devices from its first ``nvmlInit`` on (``DRA_NVML_MOCK_MIG``), so
``nvidia-ctk`` enumerates them through NVML like on a node; ours are rendered in a process of
their own with the same environment (``our_edits.py``), and ``nvidia-ctk`` reads the
synthetic ``mig-minors`` through a private bind mount over ``/proc/driver``. The graphics
case adds what a desktop-capable node has (``cdi_support.add_graphics``): the Xorg modules,
each GPU's ``/dev/dri`` nodes tied to its PCI function through sysfs, and udev's
``/dev/dri/by-path`` links, which both recreate with a per-device ``create-symlinks`` hook.

Deliberate differences, not compared: the toolkit also writes each node's ``major``,
``minor``, ``fileMode`` and ``permissions``, which the runtime reads from the host node when
absent (so a node the driver re-created is never stale in our spec). With a ``--dev-root``
other than ``/`` the toolkit names the by-path link at its host path (``<dev root>/dev/dri/
by-path/...``), which would put it in the wrong place in the container; ours names the
container path, and on a node (dev root ``/``) the two are the same, so the test strips the
dev root from the toolkit's link names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cdi_support import (
    LAYOUTS,
    DriverRoot,
    add_graphics,
    add_mig_capabilities,
    make_driver_root,
)
from dra_e2e.toolkit import Toolkit, build_toolkit, generate_spec
from dra_kubelet_core.errors import ClaimRef
from dra_kubelet_plugin.container_edits import NvmlEdits
from dra_kubelet_plugin.inventory import NodeDevice, build_inventory
from dra_nvlib import DeviceLibConfig, open_device_lib
from dra_nvlib.mock_nvml_build import MockNvml, build_mock_nvml

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="mknod of the synthetic /dev needs root"),
]

HOOK = "/usr/local/nvidia/toolkit/nvidia-cdi-hook"
REF = ClaimRef(namespace="default", name="parity", uid="0b7c-parity")


@pytest.fixture(scope="module")
def toolkit() -> Toolkit:
    return build_toolkit(progress=lambda msg: print(msg, file=sys.stderr, flush=True))


@pytest.fixture(scope="module")
def mock_nvml() -> MockNvml:
    return build_mock_nvml()


@pytest.fixture(scope="module")
def gpus(mock_nvml: MockNvml) -> list[NodeDevice]:
    """The mock system's GPUs as our NVML backend sees them (dgxa100: the library's default,
    the system ``nvidia-ctk`` is given too)."""
    with open_device_lib(DeviceLibConfig(backend="nvml", nvml_library=mock_nvml.library)) as lib:
        return build_inventory(lib.gpus())


def _toolkit_spec(
    toolkit: Toolkit,
    mock_nvml: MockNvml,
    driver: DriverRoot,
    binds: dict[str, Path] | None = None,
    mig_layout: str | None = None,
) -> dict[str, Any]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LD_LIBRARY_PATH": str(driver.lib_path),
        **mock_nvml.env("dgxa100", mig_layout=mig_layout),
    }
    return generate_spec(
        toolkit,
        driver_root=driver.root,
        dev_root=driver.root,
        hook_path=HOOK,
        env=env,
        binds=binds,
    )


def _nodes(edits: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(n["path"], n.get("hostPath")) for n in edits.get("deviceNodes", [])]


def _paths(mounts: list[dict[str, Any]]) -> list[str]:
    """The container paths, sorted: a missing or extra mount shows by name."""
    return sorted(m["containerPath"] for m in mounts)


def _firmware_class_path() -> str | None:
    try:
        return Path("/sys/module/firmware_class/parameters/path").read_text().strip() or None
    except OSError:
        return None


def _hooks(edits: dict[str, Any], dev_root: Path) -> list[dict[str, Any]]:
    """The hooks, with the toolkit's host-path by-path link names made container paths."""
    prefix = f"::{dev_root}/dev/"
    return [
        {**hook, "args": [a.replace(prefix, "::/dev/") for a in hook.get("args", [])]}
        for hook in edits.get("hooks", [])
    ]


# Every layout with graphics (where the Xorg module dirs differ), one headless: the graphics
# root only adds files, so the layouts' library lookup is checked either way.
@pytest.mark.parametrize(
    ("layout", "graphics"), [("debian", False), *((layout, True) for layout in sorted(LAYOUTS))]
)
def test_claim_and_gpu_edits_equal_nvidia_ctk_cdi_generate(
    layout: str,
    graphics: bool,
    tmp_path: Path,
    toolkit: Toolkit,
    mock_nvml: MockNvml,
    gpus: list[NodeDevice],
) -> None:
    driver = make_driver_root(tmp_path / "root", nvml_library=mock_nvml.library, layout=layout)
    # Without graphics, an empty sysfs: the host's /sys must not leak into either spec.
    sys_root = tmp_path / "sys"
    (sys_root / "bus" / "pci" / "devices").mkdir(parents=True)
    if graphics:
        sys_root = add_graphics(driver, layout=layout, pci_bus_ids=[g.gpu.pci_bus_id for g in gpus])
    binds = {"/sys/bus/pci/devices": sys_root / "bus" / "pci" / "devices"}
    theirs = _toolkit_spec(toolkit, mock_nvml, driver, binds)
    assert _firmware_class_path() is None, "a custom firmware dir would need passing to ours"
    edits = NvmlEdits(
        driver_root=driver.root,
        dev_root=driver.root,
        host_dev_root=driver.root,
        proc_root=tmp_path / "proc",
        sys_root=sys_root,
        cdi_hook_path=HOOK,
    )
    ours: dict[str, Any] = edits.claim_edits(REF, gpus).to_json()
    common = theirs["containerEdits"]
    assert ours["env"] == common["env"]
    assert _nodes(ours) == _nodes(common)
    assert _paths(ours["mounts"]) == _paths(common["mounts"])
    assert ours["mounts"] == common["mounts"]
    assert ours["hooks"] == common["hooks"]
    assert set(ours) == set(common)
    # Every library of the layout's driver dir is there; no 32-bit one, nothing elsewhere.
    lib_mounts = [m["containerPath"] for m in ours["mounts"] if ".so" in m["containerPath"]]
    assert f"/{driver.lib_dir}/libcuda.so.{driver.version}" in lib_mounts
    assert all("i386" not in path for path in lib_mounts)
    xorg = [p for p in _paths(ours["mounts"]) if "/xorg/modules/" in p]
    assert len(xorg) == (2 if graphics else 0), xorg
    if graphics:
        links = [a for h in ours["hooks"] for a in h["args"] if "::" in a]
        lib = f"/{driver.lib_dir}"
        assert (
            f"libnvidia-vulkan-producer.so.{driver.version}::{lib}/libnvidia-vulkan-producer.so"
            in links
        )
        assert "/etc/X11/xorg.conf.d/nvidia-drm-outputclass.conf" in _paths(ours["mounts"])
    by_name = {d["name"]: d["containerEdits"] for d in theirs["devices"]}
    drm_gpus = 0
    for gpu in gpus:
        own: dict[str, Any] = edits.device_edits(REF, gpu).to_json()
        expected = by_name[str(gpu.gpu.minor)]
        assert _nodes(own) == _nodes(expected), gpu.name
        assert _hooks(own, driver.root) == _hooks(expected, driver.root), gpu.name
        assert set(own) == set(expected), gpu.name
        drm_gpus += any("/dev/dri/" in path for path, _ in _nodes(own))
    assert drm_gpus == (len(gpus) - 1 if graphics else 0)


#: MIG devices of the mock from its first init on (mock profile ids are NVML's profile
#: indexes): GPU 0 split 1g, 1g, 2g, 3g; GPU 1 one 7g; the other six stay full GPUs.
MIG_LAYOUT = "0:0@0,0:0@1,0:1@2,0:2@4,1:4@0"


def test_mig_and_full_gpu_edits_equal_nvidia_ctk_cdi_generate(
    tmp_path: Path, toolkit: Toolkit, mock_nvml: MockNvml, gpus: list[NodeDevice]
) -> None:
    """Both enumerate the mock's MIG devices through NVML: each MIG device gets its parent's
    node and its GPU and compute instance access nodes, and no DRM nodes (no ``+gfx``
    profile) although its parent has them; the full GPUs get theirs."""
    driver = make_driver_root(tmp_path / "root", nvml_library=mock_nvml.library)
    sys_root = add_graphics(driver, layout="debian", pci_bus_ids=[g.gpu.pci_bus_id for g in gpus])
    proc = tmp_path / "proc"
    add_mig_capabilities(driver, proc / "driver")
    theirs = _toolkit_spec(
        toolkit,
        mock_nvml,
        driver,
        {"/sys/bus/pci/devices": sys_root / "bus/pci/devices", "/proc/driver": proc / "driver"},
        MIG_LAYOUT,
    )
    script = Path(__file__).resolve().parent / "our_edits.py"
    args = [str(mock_nvml.library), str(driver.root), str(proc), str(sys_root), HOOK]
    run = subprocess.run(
        [sys.executable, str(script), *args],
        env={**os.environ, **mock_nvml.env("dgxa100", mig_layout=MIG_LAYOUT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    ours = json.loads(run.stdout)
    by_name = {d["name"]: d["containerEdits"] for d in theirs["devices"]}
    # MIG-enabled GPUs are no full-GPU devices for either; the index names cover the rest.
    toolkit_names = {name for name in by_name if name[0].isdigit()}
    assert set(ours["devices"]) == toolkit_names
    assert sorted(n for n in toolkit_names if ":" in n) == ["0:0", "0:1", "0:2", "0:3", "1:0"]
    for name, own in ours["devices"].items():
        expected = by_name[name]
        assert _nodes(own) == _nodes(expected), name
        assert _hooks(own, driver.root) == _hooks(expected, driver.root), name
        assert set(own) == set(expected), name
        paths = [path for path, _ in _nodes(own)]
        if ":" in name:
            assert len([p for p in paths if p.startswith("/dev/nvidia-caps/")]) == 2, name
            assert not any(p.startswith("/dev/dri/") for p in paths), name
    common = theirs["containerEdits"]
    assert _nodes(ours["claim"]) == _nodes(common)
    assert ours["claim"]["mounts"] == common["mounts"]
    assert ours["claim"]["hooks"] == common["hooks"]
