"""Our CDI content for real GPUs against ``nvidia-ctk cdi generate``, entry by entry.

``nvidia-ctk`` (nvidia-container-toolkit, built from its Go module, ``dra_e2e.toolkit``)
generates a spec in ``nvml`` mode for a synthetic driver root (``cdi_support``), meeting
NVIDIA's go-nvml mock GPUs (dgxa100) through the mock ``libnvidia-ml``. Our
:class:`~dra_kubelet_plugin.container_edits.NvmlEdits` renders the same root; the claim-wide
edits must equal the toolkit's spec-wide ``containerEdits`` (env, device nodes, mounts,
hooks) and each GPU's edits the toolkit's device edits.

Deliberate differences, not compared: the toolkit also writes each node's ``major``,
``minor``, ``fileMode`` and ``permissions``, which the runtime reads from the host node when
absent (so a node the driver re-created is never stale in our spec); it also adds ``/dev/dri``
nodes, which this synthetic root (like a headless compute node) has none of.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from dra_e2e.toolkit import Toolkit, build_toolkit, generate_spec
from dra_kubelet_plugin.container_edits import NvmlEdits
from dra_kubelet_plugin.core.errors import ClaimRef
from dra_kubelet_plugin.inventory import NodeDevice, build_inventory
from dra_nvlib import DeviceLibConfig, open_device_lib
from dra_nvlib.mock_nvml_build import MockNvml, build_mock_nvml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cdi_support import LAYOUTS, DriverRoot, make_driver_root

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


def _gpus(tmp_path: Path, count: int) -> list[NodeDevice]:
    config = DeviceLibConfig(
        backend="fake",
        node_name="n1",
        fake_fleet=f"{count}xA100-40GB",
        fake_state_path=tmp_path / "fake.json",
    )
    with open_device_lib(config) as lib:
        return build_inventory(lib.gpus())


def _toolkit_spec(toolkit: Toolkit, mock_nvml: MockNvml, driver: DriverRoot) -> dict[str, Any]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LD_LIBRARY_PATH": str(driver.lib_path),
        **mock_nvml.env("dgxa100"),
    }
    return generate_spec(
        toolkit, driver_root=driver.root, dev_root=driver.root, hook_path=HOOK, env=env
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


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_claim_and_gpu_edits_equal_nvidia_ctk_cdi_generate(
    layout: str, tmp_path: Path, toolkit: Toolkit, mock_nvml: MockNvml
) -> None:
    driver = make_driver_root(tmp_path / "root", nvml_library=mock_nvml.library, layout=layout)
    theirs = _toolkit_spec(toolkit, mock_nvml, driver)
    assert _firmware_class_path() is None, "a custom firmware dir would need passing to ours"
    edits = NvmlEdits(
        driver_root=driver.root,
        dev_root=driver.root,
        host_dev_root=driver.root,
        proc_root=tmp_path / "proc",
        cdi_hook_path=HOOK,
    )
    gpus = _gpus(tmp_path, 8)
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
    by_name = {d["name"]: d["containerEdits"] for d in theirs["devices"]}
    for gpu in gpus:
        own: dict[str, Any] = edits.device_edits(REF, gpu).to_json()
        assert _nodes(own) == _nodes(by_name[str(gpu.gpu.minor)]), gpu.name
        assert set(own) == set(by_name[str(gpu.gpu.minor)]) == {"deviceNodes"}
