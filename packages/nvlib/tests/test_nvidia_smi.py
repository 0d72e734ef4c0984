"""The fake ``nvidia-smi -L``: lines as the real tool prints them, and the POSIX sh form."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from dra_nvlib import (
    ComputeMode,
    DeviceLib,
    DeviceLibConfig,
    FakeDeviceLib,
    TimeSliceLevel,
    open_device_lib,
)
from dra_nvlib.nvidia_smi import (
    SMI_ENV_PREFIX,
    mig_line,
    nvidia_smi_env,
    nvidia_smi_policy_env,
    render_env_nvidia_smi_script,
    render_nvidia_smi_list,
    render_nvidia_smi_script,
)

# Lines copied from NVIDIA's MIG user guide examples (`nvidia-smi -L` on A100/H100); the
# padding of the MIG profile column and the right-aligned device number are the tool's own.
DOC_LINES = [
    "GPU 0: A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)",
    "  MIG 1g.5gb      Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)",
    "  MIG 1g.5gb      Device  1: (UUID: MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb)",
    "  MIG 3g.20gb     Device  2: (UUID: MIG-8243111b-d4c4-587a-a96d-da04583b36e2)",
]
H100_DOC_LINES = [
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4)",
    "  MIG 3g.40gb     Device  0: (UUID: MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde)",
    "  MIG 2g.20gb     Device  1: (UUID: MIG-56c30729-347f-5dd6-8da0-c3cc59e969e0)",
    "  MIG 1g.10gb     Device  2: (UUID: MIG-9d14fb21-4ae1-546f-a636-011582899c39)",
]


@pytest.mark.parametrize(
    ("line", "profile", "index", "uuid"),
    [
        (DOC_LINES[1], "1g.5gb", 0, "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f"),
        (DOC_LINES[3], "3g.20gb", 2, "MIG-8243111b-d4c4-587a-a96d-da04583b36e2"),
        (H100_DOC_LINES[1], "3g.40gb", 0, "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde"),
        (H100_DOC_LINES[3], "1g.10gb", 2, "MIG-9d14fb21-4ae1-546f-a636-011582899c39"),
    ],
)
def test_mig_line_matches_documented_output(line: str, profile: str, index: int, uuid: str) -> None:
    assert mig_line(index, profile_name=profile, uuid=uuid) == line


@pytest.fixture
def h100_node(tmp_path: Path) -> DeviceLib:
    return open_device_lib(
        DeviceLibConfig(
            backend="fake",
            node_name="smi-node",
            fake_fleet="2xH100-80GB:mig,1xL4",
            fake_state_path=tmp_path / "state.json",
        )
    )


def _expected(lib: DeviceLib) -> list[str]:
    gpus = lib.gpus()
    migs = gpus[0].mig_devices
    return [
        f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {gpus[0].uuid})",
        f"  MIG 3g.40gb     Device  0: (UUID: {migs[0].uuid})",
        f"  MIG 2g.20gb     Device  1: (UUID: {migs[1].uuid})",
        f"  MIG 1g.10gb     Device  2: (UUID: {migs[2].uuid})",
        f"GPU 1: NVIDIA H100 80GB HBM3 (UUID: {gpus[1].uuid})",
        f"GPU 2: NVIDIA L4 (UUID: {gpus[2].uuid})",
    ]


def _carve(lib: DeviceLib) -> None:
    gpu = lib.gpus()[0].uuid
    lib.create_mig_device(gpu, profile_id=9, placement_start=0)  # 3g.40gb
    lib.create_mig_device(gpu, profile_id=14, placement_start=4)  # 2g.20gb
    lib.create_mig_device(gpu, profile_id=19, placement_start=6)  # 1g.10gb


def test_full_node_listing_has_the_documented_shape(h100_node: DeviceLib) -> None:
    _carve(h100_node)
    assert render_nvidia_smi_list(h100_node.gpus()) == _expected(h100_node)


def test_visible_subset_is_renumbered_from_zero(h100_node: DeviceLib) -> None:
    _carve(h100_node)
    gpus = h100_node.gpus()
    one_mig = gpus[0].mig_devices[1]
    lines = render_nvidia_smi_list(gpus, {one_mig.uuid, gpus[2].uuid})
    assert lines == [
        f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {gpus[0].uuid})",
        f"  MIG 2g.20gb     Device  0: (UUID: {one_mig.uuid})",
        f"GPU 1: NVIDIA L4 (UUID: {gpus[2].uuid})",
    ]


def test_nothing_visible_prints_nothing(h100_node: DeviceLib) -> None:
    assert render_nvidia_smi_list(h100_node.gpus(), set()) == []


def _shells() -> list[str]:
    found = ["/bin/sh"]
    if Path("/bin/busybox").exists():
        found.append("/bin/busybox sh")
    return found


@pytest.mark.parametrize("shell", _shells())
def test_shell_script_prints_exact_lines(h100_node: DeviceLib, tmp_path: Path, shell: str) -> None:
    _carve(h100_node)
    lines = render_nvidia_smi_list(h100_node.gpus())
    script = tmp_path / "nvidia-smi"
    script.write_text(render_nvidia_smi_script(lines))
    # The seed article's pod command, with no PATH: only the shell and its builtins run.
    cmd = f"{shell} {script} -L && echo 'GPU allocation successful.'"
    argv = [*shell.split(), "-c", cmd]
    out = subprocess.run(
        argv, capture_output=True, text=True, check=True, env={"PATH": "/nonexistent"}
    )
    assert out.stdout.splitlines() == [*lines, "GPU allocation successful."]


@pytest.mark.parametrize("shell", _shells())
def test_shell_script_refuses_other_arguments(tmp_path: Path, shell: str) -> None:
    script = tmp_path / "nvidia-smi"
    script.write_text(render_nvidia_smi_script(["GPU 0: x (UUID: GPU-1)"]))
    proc = subprocess.run([*shell.split(), str(script), "-q"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "only -L/--list-gpus" in proc.stderr


def test_shell_script_survives_quotes_in_names(tmp_path: Path) -> None:
    lines = ["GPU 0: it's $HOME `x` (UUID: GPU-1)"]
    script = tmp_path / "nvidia-smi"
    script.write_text(render_nvidia_smi_script(lines))
    out = subprocess.run(["sh", str(script), "--list-gpus"], capture_output=True, text=True)
    assert out.stdout.splitlines() == lines


def test_fake_lib_type(h100_node: DeviceLib) -> None:
    assert isinstance(h100_node, FakeDeviceLib)


def _env_shells() -> list[str]:
    # bash as sh prints `export -p` in its POSIX form, as bash it uses `declare -x`: both.
    found = _shells()
    if Path("/bin/bash").exists():
        found += ["/bin/bash", "/bin/bash --posix"]
    return found


def _run_env_script(tmp_path: Path, shell: str, entries: list[str], *args: str) -> str:
    script = tmp_path / "nvidia-smi"
    script.write_text(render_env_nvidia_smi_script())
    env = {"PATH": "/nonexistent", "OTHER": "x'y\"z"}
    for entry in entries:
        name, _, value = entry.partition("=")
        env[name] = value
    out = subprocess.run(
        [*shell.split(), str(script), *args], capture_output=True, text=True, env=env, check=True
    )
    return out.stdout


@pytest.mark.parametrize("shell", _env_shells())
def test_env_script_lists_devices_of_every_entry(
    h100_node: DeviceLib, tmp_path: Path, shell: str
) -> None:
    # Entries as two claims add them (one MIG device each of GPU 0, plus the L4): the
    # listing is the one the real tool prints for the union of the devices.
    _carve(h100_node)
    gpus = h100_node.gpus()
    first, third = gpus[0].mig_devices[0], gpus[0].mig_devices[2]
    entries = [
        nvidia_smi_env(gpus[2]),
        nvidia_smi_env(gpus[0], third),
        nvidia_smi_env(gpus[0], first),
    ]
    out = _run_env_script(tmp_path, shell, entries, "-L")
    assert out.splitlines() == render_nvidia_smi_list(gpus, {first.uuid, third.uuid, gpus[2].uuid})


@pytest.mark.parametrize("shell", _env_shells())
def test_env_script_lists_whole_gpus_in_enumeration_order(
    h100_node: DeviceLib, tmp_path: Path, shell: str
) -> None:
    gpus = h100_node.gpus()
    entries = [nvidia_smi_env(g) for g in reversed(gpus)]
    out = _run_env_script(tmp_path, shell, entries, "--list-gpus")
    assert out.splitlines() == render_nvidia_smi_list(gpus)


def test_env_script_without_entries_prints_nothing(tmp_path: Path) -> None:
    assert _run_env_script(tmp_path, "/bin/sh", [], "-L") == ""


def test_env_script_refuses_other_arguments(tmp_path: Path) -> None:
    script = tmp_path / "nvidia-smi"
    script.write_text(render_env_nvidia_smi_script())
    proc = subprocess.run(["sh", str(script), "--version"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "only -L/--list-gpus, -q and compute-policy -l" in proc.stderr


def test_env_entry_names_are_unique_per_device(h100_node: DeviceLib) -> None:
    _carve(h100_node)
    gpus = h100_node.gpus()
    names = [nvidia_smi_env(g).split("=", 1)[0] for g in gpus]
    names += [nvidia_smi_env(gpus[0], m).split("=", 1)[0] for m in gpus[0].mig_devices]
    assert len(set(names)) == len(names) == 6
    assert all(n.startswith(SMI_ENV_PREFIX) for n in names)


@pytest.mark.parametrize("shell", _env_shells())
def test_env_script_query_shows_compute_mode_and_time_slice(
    h100_node: DeviceLib, tmp_path: Path, shell: str
) -> None:
    # What a user types in the pod to check the sharing: `nvidia-smi -q` (compute mode)
    # and `nvidia-smi compute-policy -l` (time-slice), for the GPUs the container got.
    gpus = h100_node.gpus()
    l4 = gpus[2]
    h100_node.set_compute_mode(gpus[1].uuid, ComputeMode.EXCLUSIVE_PROCESS)
    h100_node.set_time_slice(l4.uuid, TimeSliceLevel.LONG)
    gpus = h100_node.gpus()
    entries = [nvidia_smi_env(gpus[1]), nvidia_smi_env(gpus[2])]
    entries += [nvidia_smi_policy_env(gpus[1]), nvidia_smi_policy_env(gpus[2])]
    query = _run_env_script(tmp_path, shell, entries, "-q")
    lines = [line.rstrip() for line in query.splitlines()]
    assert "Attached GPUs                             : 2" in lines
    assert "GPU 0" in lines
    assert "GPU 1" in lines
    assert f"    GPU UUID                              : {gpus[1].uuid}" in lines
    modes = [line.split(":", 1)[1].strip() for line in lines if "Compute Mode" in line]
    assert modes == ["Exclusive_Process", "Default"]
    policy = _run_env_script(tmp_path, shell, entries, "compute-policy", "-l")
    rows = [line for line in policy.splitlines() if "Timeslice" in line]
    assert [row.split()[1:4] for row in rows] == [
        ["0", "Timeslice", "Default"],
        ["1", "Timeslice", "Long"],
    ]


def test_policy_env_names_the_gpu_and_its_settings(h100_node: DeviceLib) -> None:
    gpu = h100_node.gpus()[2]
    h100_node.set_time_slice(gpu.uuid, TimeSliceLevel.MEDIUM)
    entry = nvidia_smi_policy_env(h100_node.gpu(gpu.uuid))
    assert entry == f"NVIDIA_FAKE_SMI_POLICY_{gpu.index}=Default|Medium"
