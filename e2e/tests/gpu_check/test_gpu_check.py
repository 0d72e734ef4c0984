"""``make gpu-check`` without a GPU: the skip line, and every step end to end on fake GPUs
(the same code paths, with ``--backend fake`` instead of this machine's NVML)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dra_e2e.gpu_check import claim_round_trip, container, steps
from dra_e2e.gpu_check.cli import BUDGETS_S, main
from dra_e2e.gpu_check.container import listed_uuids
from dra_e2e.gpu_check.detect import detect_gpu, skip_line
from dra_e2e.gpu_check.runner import StepFailed
from dra_e2e.gpu_check.target import CheckTarget, SliceDevice

REPO_ROOT = Path(__file__).resolve().parents[3]
STUB_SOURCE = REPO_ROOT / "packages" / "nvlib" / "tests" / "nvml_stub" / "nvml_stub.c"


@pytest.fixture(scope="module")
def nvml_stub_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``libnvidia-ml.so.1`` built from nvlib's C stand-in (tests/nvml_stub)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the NVML stub")
    library = tmp_path_factory.mktemp("nvml-stub") / "libnvidia-ml.so.1"
    command = [compiler, "-shared", "-fPIC", "-O1", "-o", str(library), str(STUB_SOURCE)]
    subprocess.run(command, check=True)
    return library


def test_budgets_keep_the_check_under_five_minutes() -> None:
    assert sum(BUDGETS_S.values()) < 300


def test_without_the_library_it_skips_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert detect_gpu("libnvidia-ml-absent.so.1") == "libnvidia-ml-absent.so.1 not found"
    assert main(["--nvml-library", "libnvidia-ml-absent.so.1"]) == 0
    assert capsys.readouterr().out == (
        "gpu-check: skipped: no NVIDIA GPU/driver on this machine "
        "(libnvidia-ml-absent.so.1 not found)\n"
    )


def test_make_gpu_check_skips_on_this_machine() -> None:
    """The module as make runs it; this machine (and CI) has no NVIDIA driver."""
    if detect_gpu() != "libnvidia-ml.so.1 not found":
        pytest.skip("an NVIDIA driver is installed here: make gpu-check runs for real")
    proc = subprocess.run(
        [sys.executable, "-m", "dra_e2e.gpu_check"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == skip_line("libnvidia-ml.so.1 not found") + "\n"


def test_nvml_answering_without_the_device_node_is_a_skip(
    tmp_path: Path, nvml_stub_library: Path
) -> None:
    """tests/nvml_stub answers nvmlInit and counts its GPUs, but there is no device node."""
    missing = tmp_path / "nvidia0"
    assert detect_gpu(str(nvml_stub_library), missing) == (
        f"NVML answers but {missing} does not exist"
    )
    found = detect_gpu(str(nvml_stub_library), tmp_path)
    assert not isinstance(found, str)
    assert found.count > 0


def test_every_step_passes_on_fake_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--backend", "fake", "--fake-gpus", "2xA100-40GB"]) == 0
    out = capsys.readouterr().out
    assert "kind: ResourceSlice" in out
    # The container step needs podman and runc; the toolkit comparison real GPUs: skips.
    podman = shutil.which("podman") is not None and shutil.which("runc") is not None
    summary = "4 passed, 0 failed, 1 skipped" if podman else "3 passed, 0 failed, 2 skipped"
    assert "SKIP    CDI spec = nvidia-ctk cdi generate" in out
    assert f"gpu-check: {summary}" in out
    for line in ("PASS    nvml contract suite", "PASS    resource slices", "PASS    claim"):
        assert line in out


def test_claim_step_reports_the_prepared_device(tmp_path: Path) -> None:
    target = CheckTarget("fake", tmp_path, fake_gpus="1xH100-80GB")
    steps.print_resource_slices(target, 30, show=lambda _: None)
    assert [d.name for d in target.devices] == ["gpu-0"]
    detail = claim_round_trip.prepare_unprepare(target, 60)
    assert "on gpu-0: prepared (k8s.gpu.nvidia.com/claim=" in detail
    assert "unprepared (spec and checkpoint entry gone)" in detail


def test_claim_on_a_device_the_node_lacks_fails_naming_it(tmp_path: Path) -> None:
    target = CheckTarget("fake", tmp_path, fake_gpus="1xH100-80GB")
    target.devices = [SliceDevice("gpu-7", "GPU-00000000-0000-0000-0000-000000000000")]
    with pytest.raises(StepFailed, match=r"NodePrepareResources of claim .*gpu-7"):
        claim_round_trip.prepare_unprepare(target, 60)


def test_claim_step_needs_the_slices_step() -> None:
    target = CheckTarget("fake", Path("/nonexistent"), fake_gpus="1xH100-80GB")
    with pytest.raises(StepFailed, match="the ResourceSlices step found none"):
        claim_round_trip.prepare_unprepare(target, 60)


def test_nvidia_smi_lines_give_the_uuids() -> None:
    output = (
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-c8524591-0000-1111-2222-333344445555)\n"
        "  MIG 1g.10gb Device 0: (UUID: MIG-c8524591-0000-1111-2222-333344445555)\n"
        "No devices found\n"
    )
    assert listed_uuids(output) == ["GPU-c8524591-0000-1111-2222-333344445555"]


@pytest.mark.podman
def test_container_step_lists_the_prepared_fake_gpu(tmp_path: Path) -> None:
    """podman runs the fake ``nvidia-smi -L`` through the claim's CDI spec; the spec copied to
    /var/run/cdi is gone afterwards."""
    if shutil.which("podman") is None or shutil.which("runc") is None:
        pytest.skip("podman/runc not installed (run make prepare)")
    target = CheckTarget("fake", tmp_path, fake_gpus="2xA100-40GB")
    steps.print_resource_slices(target, 30, show=lambda _: None)
    detail = container.nvidia_smi_in_container(target, 60)
    assert detail.endswith(f"nvidia-smi -L lists {target.devices[0].uuid}")
    uid = detail.split("claim=", 1)[1].split("-gpu-0", 1)[0]
    assert not [p for p in container.PODMAN_CDI_ROOT.iterdir() if uid in p.name]
