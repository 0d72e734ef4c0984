"""The contract every backend honours, run against the fake and against NVML over the mock
``libnvidia-ml.so`` built from NVIDIA's go-nvml mock systems (dgxa100, dgxh100, dgxh200,
dgxb200; see ``tests/nvml_gomock``).

NVML is loaded once per process and the mock reads its system (``DRA_NVML_MOCK_SYSTEM``) at
``nvmlInit``, so each mock system runs this module again in a child pytest process
(``test_contract_suite_over_mock_nvml``); in the child, ``DRA_NVLIB_CONTRACT_NVML`` selects
the NVML backend as the only backend under test, and the fake-versus-NVML shape comparison
runs there too. The same child run also goes over ``tests/nvml_stub`` (our own C stand-in
for libnvidia-ml), kept for what the go-nvml mock does not model: placement conflicts
(its ``CreateGpuInstanceWithPlacement`` accepts any placement).

``DRA_NVLIB_CONTRACT_NVML=real`` runs the child mode against the machine's own
libnvidia-ml (``make gpu-check``; ``DRA_NVLIB_CONTRACT_NVML_PATH`` names the library or is
empty for the default search): it asserts invariants every real GPU holds, not a mock's
values, and leaves the GPUs' compute and MIG modes alone (they may be in use).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from dra_nvlib import (
    Architecture,
    Brand,
    ComputeMode,
    CudaComputeCapability,
    DeviceLib,
    DeviceLibConfig,
    FabricState,
    GpuInfo,
    GpuNotFoundError,
    InsufficientResourcesError,
    InvalidArgumentError,
    MigModeState,
    NotSupportedError,
    open_device_lib,
)
from dra_nvlib.mock_nvml_build import MOCK_SYSTEMS, MockNvml

UUID_RE = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
MIG_UUID_RE = re.compile(r"^MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
BDF_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
CLUSTER_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
VERSION_RE = re.compile(r"^\d+\.\d+(\.\d+)?$")

# Set only in a child run: "<library>-<system>" (e.g. "mock-dgxa100", "stub-a100") and the
# NVML library file or driver root to load it from.
CHILD_NVML = os.environ.get("DRA_NVLIB_CONTRACT_NVML")
CHILD_NVML_PATH = os.environ.get("DRA_NVLIB_CONTRACT_NVML_PATH", "")
BACKENDS = [f"nvml-{CHILD_NVML}"] if CHILD_NVML else ["fake-a100", "fake-gb200"]
REPO_ROOT = Path(__file__).resolve().parents[3]
GO_MOCK = bool(CHILD_NVML and CHILD_NVML.startswith("mock-"))
REAL = CHILD_NVML == "real"
# go-nvml's dgxa100 names its part "Mock NVIDIA A100-SXM4-40GB"; real parts start NVIDIA/Tesla.
PRODUCT_RE = re.compile(r"^(Mock )?(NVIDIA|Tesla) ")
# The fake node each NVML library under test is compared with: same part where the fake has
# it (the fake has no B200; GB200 is the Blackwell part it has).
FAKE_TWIN = {
    "mock-dgxa100": "8xA100-40GB",
    "mock-dgxh100": "8xH100-80GB",
    "mock-dgxh200": "8xH200",
    "mock-dgxb200": "4xGB200",
    "stub-a100": "8xA100-40GB",
}
# Where the twin is the same part, its MIG profile names must cover NVML's.
SAME_PART = {"mock-dgxa100", "mock-dgxh100", "mock-dgxh200", "stub-a100"}


def leave_real_gpus_alone() -> None:
    """Skip a test that changes a GPU's mode when the GPUs are the machine's own."""
    if REAL:
        pytest.skip("real hardware: compute and MIG modes are left as they are (GPUs in use)")


@contextlib.contextmanager
def mock_gaps(lib: DeviceLib) -> Iterator[None]:
    """Skip, naming the NVML function, when the mock library does not implement a call that
    every real GPU of this model answers (NVML: NOT_SUPPORTED or FUNCTION_NOT_FOUND)."""
    try:
        yield
    except NotSupportedError as exc:
        if lib.backend != "nvml":
            raise
        function = exc.detail.split(":", 1)[0]
        pytest.skip(f"the mock libnvidia-ml.so does not implement {function}: {exc.detail}")


def _open(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> DeviceLib:
    kind, _, profile = name.partition("-")
    if kind == "fake":
        fleet = {"a100": "8xA100-40GB", "gb200": "4xGB200"}.get(profile, profile)
        return open_device_lib(
            DeviceLibConfig(
                backend="fake",
                node_name="contract",
                fake_fleet=fleet,
                fake_state_path=tmp_path / "state.json",
            )
        )
    # Child run: the library's configuration (MOCK_NVML_CONFIG) is already in the environment.
    path = Path(CHILD_NVML_PATH)
    if REAL and not CHILD_NVML_PATH:
        return open_device_lib(DeviceLibConfig(backend="nvml"))
    if REAL:
        return open_device_lib(DeviceLibConfig(backend="nvml", nvml_library=path))
    if path.is_dir():
        config = DeviceLibConfig(backend="nvml", driver_root=path, sysfs_root=tmp_path / "sys")
    else:
        config = DeviceLibConfig(backend="nvml", nvml_library=path, sysfs_root=tmp_path / "sys")
    return open_device_lib(config)


@pytest.fixture(params=BACKENDS)
def lib(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DeviceLib]:
    device_lib = _open(request.param, tmp_path, request)
    try:
        yield device_lib
    finally:
        device_lib.close()


def test_enumeration_reports_typed_well_formed_facts(lib: DeviceLib) -> None:
    gpus = lib.gpus()
    assert gpus, "a node under test has GPUs"
    driver = lib.driver_info()
    assert VERSION_RE.match(driver.driver_version)
    assert VERSION_RE.match(driver.cuda_driver_version)
    assert [g.index for g in gpus] == list(range(len(gpus)))
    assert len({g.uuid for g in gpus}) == len(gpus)
    assert len({g.pci_bus_id for g in gpus}) == len(gpus)
    for gpu in gpus:
        assert UUID_RE.match(gpu.uuid), gpu.uuid
        assert BDF_RE.match(gpu.pci_bus_id), gpu.pci_bus_id
        assert isinstance(gpu.brand, Brand)
        assert isinstance(gpu.architecture, Architecture)
        assert isinstance(gpu.cuda_compute_capability, CudaComputeCapability)
        assert PRODUCT_RE.match(gpu.product_name), gpu.product_name
        if REAL:
            # A unified-memory part reports none; any other part some.
            assert gpu.memory_bytes is None or gpu.memory_bytes > 0
        else:
            # The parts under test all report their memory (unified-memory GPUs would not).
            assert gpu.memory_bytes is not None
            assert gpu.memory_bytes > 8 * 1024**3
        assert gpu.minor >= 0
        assert gpu.driver_version == driver.driver_version
        assert gpu.cuda_driver_version == driver.cuda_driver_version
        assert isinstance(gpu.compute_mode, ComputeMode)
        assert isinstance(gpu.mig_mode, MigModeState)
        assert not gpu.lost


def test_lookup_by_uuid_and_unknown_uuid(lib: DeviceLib) -> None:
    first = lib.gpus()[0]
    assert lib.gpu(first.uuid) == first
    with pytest.raises(GpuNotFoundError) as err:
        lib.gpu("GPU-00000000-0000-0000-0000-000000000000")
    assert err.value.gpu == "GPU-00000000-0000-0000-0000-000000000000"


def test_operation_on_unknown_uuid_names_the_gpu(lib: DeviceLib) -> None:
    missing = "GPU-00000000-0000-0000-0000-000000000000"
    with pytest.raises(GpuNotFoundError) as err:
        lib.set_compute_mode(missing, ComputeMode.DEFAULT)
    assert err.value.gpu == missing
    assert err.value.operation == "set_compute_mode"


def test_compute_mode_round_trip(lib: DeviceLib) -> None:
    leave_real_gpus_alone()
    gpu = lib.gpus()[0].uuid
    with mock_gaps(lib):
        lib.set_compute_mode(gpu, ComputeMode.EXCLUSIVE_PROCESS)
    assert lib.gpu(gpu).compute_mode is ComputeMode.EXCLUSIVE_PROCESS
    lib.set_compute_mode(gpu, ComputeMode.DEFAULT)
    assert lib.gpu(gpu).compute_mode is ComputeMode.DEFAULT


def test_mig_profiles_are_consistent(lib: DeviceLib) -> None:
    if REAL:
        enabled = [g for g in lib.gpus() if g.mig_mode.current]
        if not enabled:
            pytest.skip("real hardware: no GPU has MIG mode enabled (it is not switched on)")
        gpu = enabled[0]
    else:
        with mock_gaps(lib):
            lib.set_mig_mode(lib.gpus()[0].uuid, enabled=True)
        gpu = lib.gpus()[0]
    assert gpu.mig_capable
    assert gpu.mig_profiles
    ids = [p.profile_id for p in gpu.mig_profiles]
    assert len(ids) == len(set(ids))
    for profile in gpu.mig_profiles:
        assert profile.placements, profile.name
        assert re.match(r"^\d+g\.\d+gb(\+\w+)?$", profile.name), profile.name
        assert all(p.size == profile.memory_slices for p in profile.placements)
        assert all(p.start + p.size <= 8 for p in profile.placements)
        assert profile.memory_bytes > 0
        assert profile.multiprocessor_count > 0


def test_mig_create_and_destroy(lib: DeviceLib) -> None:
    leave_real_gpus_alone()
    with mock_gaps(lib):
        lib.set_mig_mode(lib.gpus()[0].uuid, enabled=True)
    gpu = lib.gpus()[0]
    assert gpu.mig_mode.current
    small = min(gpu.mig_profiles, key=lambda p: (p.memory_slices, p.instance_count * -1))
    with mock_gaps(lib):
        device = lib.create_mig_device(gpu.uuid, profile_id=small.profile_id, placement_start=4)
    try:
        assert MIG_UUID_RE.match(device.uuid)
        assert device.parent_uuid == gpu.uuid
        assert device.placement.start == 4
        assert device.profile_name == small.name
        assert device.memory_bytes == small.memory_bytes
        assert device.multiprocessor_count == small.multiprocessor_count
        assert [m.uuid for m in lib.gpu(gpu.uuid).mig_devices] == [device.uuid]
    finally:
        lib.destroy_mig_device(device.uuid)
    assert lib.gpu(gpu.uuid).mig_devices == ()
    lib.set_mig_mode(gpu.uuid, enabled=False)


def test_mig_placement_conflicts_are_refused(lib: DeviceLib) -> None:
    if GO_MOCK:
        pytest.skip(
            "go-nvml's mock accepts any placement (CreateGpuInstanceWithPlacement does not "
            "check overlaps); the fake and tests/nvml_stub cover this"
        )
    leave_real_gpus_alone()
    lib.set_mig_mode(lib.gpus()[0].uuid, enabled=True)
    gpu = lib.gpus()[0]
    small = min(gpu.mig_profiles, key=lambda p: (p.memory_slices, p.instance_count * -1))
    half = next(p for p in gpu.mig_profiles if p.slice_count == 3)
    device = lib.create_mig_device(gpu.uuid, profile_id=small.profile_id, placement_start=4)
    try:
        with pytest.raises(InsufficientResourcesError) as err:
            lib.create_mig_device(gpu.uuid, profile_id=half.profile_id, placement_start=4)
        assert err.value.gpu == gpu.uuid
        assert err.value.operation == "create_mig_device"
        with pytest.raises(InvalidArgumentError):
            lib.create_mig_device(gpu.uuid, profile_id=half.profile_id, placement_start=1)
    finally:
        lib.destroy_mig_device(device.uuid)
    lib.set_mig_mode(gpu.uuid, enabled=False)


def test_fabric_on_gb200_only(lib: DeviceLib) -> None:
    for gpu in lib.gpus():
        if REAL:
            # A real part's fabric may still be training or absent; its facts stay typed.
            if gpu.fabric is not None:
                assert CLUSTER_RE.match(gpu.fabric.cluster_uuid)
                assert isinstance(gpu.fabric.state, FabricState)
        elif "GB200" in gpu.product_name:
            assert gpu.fabric is not None
            assert CLUSTER_RE.match(gpu.fabric.cluster_uuid)
            assert isinstance(gpu.fabric.clique_id, int)
            assert gpu.fabric.state is FabricState.COMPLETED
            assert gpu.fabric.status == 0
        else:
            assert gpu.fabric is None


def test_health_watch_times_out_quietly(lib: DeviceLib) -> None:
    with mock_gaps(lib):
        watch = lib.watch_health()
    with watch:
        assert watch.wait(0.05) is None


# -- same shape as NVML over the mock -------------------------------------------------------


def shape(gpu: GpuInfo) -> dict[str, str]:
    """Field name -> type and format class, the part that must agree across backends."""

    def kind(value: object) -> str:
        if isinstance(value, str):
            for name, rx in (("uuid", UUID_RE), ("bdf", BDF_RE), ("version", VERSION_RE)):
                if rx.match(value):
                    return f"str:{name}"
            return "str"
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {f.name: kind(getattr(value, f.name)) for f in dataclasses.fields(value)}
            return f"{type(value).__name__}{sorted(fields.items())}"
        if isinstance(value, tuple):
            return "tuple[" + ",".join(sorted({kind(v) for v in value})) + "]"
        return type(value).__name__

    return {f.name: kind(getattr(gpu, f.name)) for f in dataclasses.fields(gpu)}


# Fields a backend may leave None (sysfs unknown, query unsupported by the driver, fake-only).
OPTIONAL_FIELDS = {
    "pcie_root",
    "numa_node",
    "memory_bytes",
    "addressing_mode",
    "fabric",
    "time_slice",
    "module_id",
}


def assert_same_shape(fake: GpuInfo, real: GpuInfo) -> None:
    """Same fields, types and formats; an optional field may be None on either side."""
    a, b = shape(fake), shape(real)
    assert a.keys() == b.keys()
    for name in a:
        if name in OPTIONAL_FIELDS and "NoneType" in (a[name], b[name]):
            continue
        assert a[name] == b[name], name


if CHILD_NVML:
    # Child run only: the NVML library under test is loaded in this process.

    def test_nvml_serves_again_after_a_reload(
        tmp_path: Path, request: pytest.FixtureRequest
    ) -> None:
        """What the backend does after a driver reload: shut down, unload, load, init."""
        real = _open(f"nvml-{CHILD_NVML}", tmp_path, request)
        try:
            before = [g.uuid for g in real.gpus()]
            api = getattr(real, "_api")  # noqa: B009 -- the binding under the backend
            api.reload()
            assert [g.uuid for g in real.gpus()] == before
        finally:
            real.close()

    def test_fake_reports_the_same_shape_as_nvml(
        tmp_path: Path, request: pytest.FixtureRequest
    ) -> None:
        label = str(CHILD_NVML)
        # A real GPU has no fixed twin: only the shape is compared, against an A100 node.
        fake = _open(f"fake-{FAKE_TWIN.get(label, '8xA100-40GB')}", tmp_path, request)
        real = _open(f"nvml-{label}", tmp_path, request)
        try:
            fake_gpu, real_gpu = fake.gpus()[0], real.gpus()[0]
            assert_same_shape(fake_gpu, real_gpu)
            if REAL:
                return
            assert fake_gpu.architecture == real_gpu.architecture
            assert fake_gpu.brand == real_gpu.brand
            assert fake_gpu.cuda_compute_capability == real_gpu.cuda_compute_capability
            if label in SAME_PART:
                real_names = {p.name for p in real_gpu.mig_profiles}
                assert real_names <= {p.name for p in fake_gpu.mig_profiles}
        finally:
            fake.close()
            real.close()

else:
    # Parent run: one child run of this module per mock system and one over the stub.

    def _child_run(label: str, path: Path, extra_env: dict[str, str]) -> None:
        env = {
            **os.environ,
            **extra_env,
            "DRA_NVLIB_CONTRACT_NVML": label,
            "DRA_NVLIB_CONTRACT_NVML_PATH": str(path),
        }
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", __file__, "-q", "-rs", "-p", "no:cacheprovider"],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        sys.stdout.write(proc.stdout)
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]

    @pytest.mark.parametrize("system", MOCK_SYSTEMS)
    def test_contract_suite_over_mock_nvml(system: str, mock_nvml: MockNvml) -> None:
        """This module again, in a child process whose only backend is NVML over the
        go-nvml mock library serving one of NVIDIA's mock systems."""
        _child_run(f"mock-{system}", mock_nvml.library, mock_nvml.env(system))

    def test_contract_suite_over_nvml_stub(nvml_stub_driver_root: Path) -> None:
        """This module again over tests/nvml_stub (our C stand-in for an A100 node), loaded
        from under a driver root: the nvidia-ml-py/ctypes path end to end."""
        _child_run("stub-a100", nvml_stub_driver_root, {})

    def test_real_hardware_mode_over_nvml_stub(nvml_stub_driver_root: Path) -> None:
        """The real-hardware mode ``make gpu-check`` uses, proven without a GPU: its
        invariants hold over tests/nvml_stub named as the library file."""
        _child_run("real", nvml_stub_driver_root / "usr" / "lib64" / "libnvidia-ml.so.1", {})


if GO_MOCK:
    # Child run over the go-nvml mock only: tests/nvml_stub models one compute instance per
    # GPU instance, and the fake's API cannot split one.

    def test_gpu_instance_split_into_compute_instances(
        tmp_path: Path, request: pytest.FixtureRequest
    ) -> None:
        """A GPU instance carved into two 1-slice compute instances (as ``nvidia-smi mig
        -cci`` would) is two MIG devices: own UUIDs and CI ids, one GI, each with its
        compute instance's SMs; destroying one removes the whole GPU instance."""
        import ctypes

        import pynvml  # type: ignore[import-untyped]

        lib = _open(f"nvml-{CHILD_NVML}", tmp_path, request)
        try:
            uuid = lib.gpus()[0].uuid
            lib.set_mig_mode(uuid, enabled=True)
            gpu = lib.gpu(uuid)
            two = next(p for p in gpu.mig_profiles if p.slice_count == 2)
            handle = pynvml.nvmlDeviceGetHandleByUUID(uuid.encode())
            placement = pynvml.c_nvmlGpuInstancePlacement_t()
            placement.start = two.placements[0].start
            placement.size = two.placements[0].size
            gi = pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(
                handle, two.profile_id, ctypes.byref(placement)
            )
            one_slice = None
            for index in range(9):
                try:
                    info = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, index, 0)
                except pynvml.NVMLError:
                    continue
                if info.sliceCount == 1:
                    one_slice = info
                    break
            assert one_slice is not None, "a 2-slice GPU instance offers 1-slice CIs"
            pynvml.nvmlGpuInstanceCreateComputeInstance(gi, one_slice.id)
            pynvml.nvmlGpuInstanceCreateComputeInstance(gi, one_slice.id)
            devices = lib.gpu(uuid).mig_devices
            assert len(devices) == 2
            assert len({d.uuid for d in devices}) == 2
            assert all(MIG_UUID_RE.match(d.uuid) for d in devices)
            assert len({d.gi_id for d in devices}) == 1
            assert len({d.ci_id for d in devices}) == 2
            assert [d.index for d in devices] == [0, 1]
            for device in devices:
                assert device.profile_name == two.name
                assert device.placement == two.placements[0]
                assert device.memory_bytes == two.memory_bytes
                assert device.multiprocessor_count == one_slice.multiprocessorCount
                assert device.multiprocessor_count < two.multiprocessor_count
            lib.destroy_mig_device(devices[1].uuid)
            assert lib.gpu(uuid).mig_devices == ()
            lib.set_mig_mode(uuid, enabled=False)
        finally:
            lib.close()
