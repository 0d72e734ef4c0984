"""NVML backend logic over an in-memory NvmlApi double: error translation, enumeration,
MIG create rollback, health events. (The real library path is covered by the contract suite
over the mock libnvidia-ml.so.)"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from dra_nvlib import (
    AddressingMode,
    Architecture,
    Brand,
    ComputeMode,
    DeviceLibConfig,
    FabricState,
    GpuLostError,
    GpuNotFoundError,
    HealthEventKind,
    InsufficientResourcesError,
    LibraryLoadError,
    NoPermissionError,
    NotSupportedError,
    NvmlCallError,
    open_device_lib,
)
from dra_nvlib.nvml_api import (
    CiHandle,
    EventSetHandle,
    GiHandle,
    NvmlFailure,
    NvmlHandle,
    RawEvent,
    RawFabric,
    RawGiInfo,
    RawGiProfile,
    RawMigAttributes,
)
from dra_nvlib.nvml_backend import NvmlDeviceLib, format_cuda_version
from dra_nvlib.nvml_binding import find_library
from dra_nvlib.nvml_errors import translate
from dra_nvlib.sysfs import normalize_bus_id, pcie_root

INVALID_ARGUMENT = 2
NOT_SUPPORTED = 3
NOT_FOUND = 6
GPU_IS_LOST = 15
INSUFFICIENT = 23


@dataclass
class FakeGpu:
    uuid: str
    bus: str
    fabric: RawFabric | None = None
    mig: tuple[int, int] = (0, 0)
    compute_mode: int = 0
    persistence: int = 1
    lost: bool = False
    gis: dict[int, RawGiInfo] = field(default_factory=dict)
    cis: dict[int, list[int]] = field(default_factory=dict)


PROFILE_1G = RawGiProfile(19, "MIG 1g.5gb", 1, 7, 14, 1, 0, 0, 0, 0, 4864)
PROFILE_3G = RawGiProfile(9, "MIG 3g.20gb", 3, 2, 42, 3, 2, 0, 0, 0, 19968)


class FakeNvml:
    """Just enough NVML to drive NvmlDeviceLib; fails the way NVML fails."""

    def __init__(self, gpus: list[FakeGpu]) -> None:
        self.gpus = gpus
        self.fail_ci = False
        # NVML v1 records and go-nvml's mock systems carry no profile names.
        self.unnamed_profiles = False
        # go-nvml's mock answers an unknown UUID with INVALID_ARGUMENT, NVML with NOT_FOUND.
        self.unknown_uuid_code = NOT_FOUND
        # SMs nvmlDeviceGetAttributes_v2 reports per MIG device; None: the call is missing.
        self.mig_sms: int | None = None
        self.events: list[RawEvent] = []
        self.shutdowns = 0
        # Unified-memory parts answer nvmlDeviceGetMemoryInfo with NOT_SUPPORTED.
        self.memory_supported = True
        # A code nvmlDeviceGetGpuInstancePossiblePlacements fails with; None: it answers.
        self.placements_code: int | None = None
        # How many calls answer UNINITIALIZED (as after a driver reload) before a reload.
        self.uninitialized = 0
        self.reloads = 0

    def _gpu(self, dev: NvmlHandle) -> FakeGpu:
        gpu = self.gpus[int(str(dev))] if not isinstance(dev, tuple) else self.gpus[dev[0]]
        if gpu.lost:
            raise NvmlFailure("nvmlDeviceGet*", GPU_IS_LOST, "GPU is lost")
        return gpu

    def init(self) -> None:
        pass

    def shutdown(self) -> None:
        self.shutdowns += 1

    def reload(self) -> None:
        self.reloads += 1
        self.uninitialized = 0

    def driver_version(self) -> str:
        return "550.54.15"

    def cuda_driver_version(self) -> int:
        return 12040

    def nvml_version(self) -> str:
        return "12.550.54.15"

    def device_count(self) -> int:
        if self.uninitialized:
            raise NvmlFailure("nvmlDeviceGetCount", 1, "Uninitialized")
        return len(self.gpus)

    def device_by_index(self, index: int) -> NvmlHandle:
        return NvmlHandle(index)

    def device_by_uuid(self, uuid: str) -> NvmlHandle:
        for i, gpu in enumerate(self.gpus):
            if gpu.uuid == uuid:
                return NvmlHandle(i)
        raise NvmlFailure("nvmlDeviceGetHandleByUUID", self.unknown_uuid_code, "unknown UUID")

    def uuid(self, dev: NvmlHandle) -> str:
        if isinstance(dev, tuple):
            return f"MIG-{dev[1]:08x}-0000-0000-0000-000000000000"
        return self._gpu(dev).uuid

    def name(self, dev: NvmlHandle) -> str:
        return "NVIDIA A100-SXM4-40GB"

    def brand(self, dev: NvmlHandle) -> int:
        return 14

    def architecture(self, dev: NvmlHandle) -> int:
        return 7

    def cuda_compute_capability(self, dev: NvmlHandle) -> tuple[int, int]:
        return (8, 0)

    def minor_number(self, dev: NvmlHandle) -> int:
        return int(str(dev))

    def memory_total(self, dev: NvmlHandle) -> int:
        if not self.memory_supported:
            raise NvmlFailure("nvmlDeviceGetMemoryInfo", NOT_SUPPORTED, "Not Supported")
        return 4864 * 2**20 if isinstance(dev, tuple) else 40960 * 2**20

    def pci_bus_id(self, dev: NvmlHandle) -> str:
        return self._gpu(dev).bus

    def addressing_mode(self, dev: NvmlHandle) -> int:
        raise NvmlFailure("nvmlDeviceGetAddressingMode", 13, "Function Not Found")

    def module_id(self, dev: NvmlHandle) -> int:
        self._gpu(dev)
        return int(str(dev)) + 1

    def mig_mode(self, dev: NvmlHandle) -> tuple[int, int]:
        return self._gpu(dev).mig

    def compute_mode(self, dev: NvmlHandle) -> int:
        return self._gpu(dev).compute_mode

    def fabric_info(self, dev: NvmlHandle) -> RawFabric:
        fabric = self._gpu(dev).fabric
        if fabric is None:
            raise NvmlFailure("nvmlDeviceGetGpuFabricInfoV", NOT_SUPPORTED, "Not Supported")
        return fabric

    def gi_profile_info(self, dev: NvmlHandle, profile_index: int) -> RawGiProfile:
        table = {0: PROFILE_1G, 2: PROFILE_3G}
        if profile_index not in table:
            raise NvmlFailure(
                "nvmlDeviceGetGpuInstanceProfileInfoV", NOT_SUPPORTED, "Not Supported"
            )
        if self.unnamed_profiles:
            return dataclasses.replace(table[profile_index], name="")
        return table[profile_index]

    def gi_placements(self, dev: NvmlHandle, profile_id: int) -> list[tuple[int, int]]:
        if self.placements_code is not None and profile_id == 9:
            raise NvmlFailure(
                "nvmlDeviceGetGpuInstancePossiblePlacements_v2", self.placements_code, "x"
            )
        return [(s, 1) for s in range(7)] if profile_id == 19 else [(0, 4), (4, 4)]

    def max_mig_device_count(self, dev: NvmlHandle) -> int:
        return 7

    def mig_device_by_index(self, dev: NvmlHandle, index: int) -> NvmlHandle:
        gis = sorted(self._gpu(dev).gis)
        if index >= len(gis):
            raise NvmlFailure("nvmlDeviceGetMigDeviceHandleByIndex", NOT_FOUND, "Not Found")
        return NvmlHandle((int(str(dev)), gis[index]))

    def gi_id(self, mig: NvmlHandle) -> int:
        assert isinstance(mig, tuple)
        return int(mig[1])

    def ci_id(self, mig: NvmlHandle) -> int:
        return 0

    def mig_attributes(self, mig: NvmlHandle) -> RawMigAttributes:
        if self.mig_sms is None:
            raise NvmlFailure("nvmlDeviceGetAttributes_v2", 13, "Function Not Found")
        return RawMigAttributes(self.mig_sms, 3, 1, 19968)

    def gpu_instance_by_id(self, dev: NvmlHandle, gi_id: int) -> GiHandle:
        if gi_id not in self._gpu(dev).gis:
            raise NvmlFailure("nvmlDeviceGetGpuInstanceById", NOT_FOUND, "Not Found")
        return GiHandle((int(str(dev)), gi_id))

    def gpu_instance_info(self, gi: GiHandle) -> RawGiInfo:
        assert isinstance(gi, tuple)
        return self.gpus[gi[0]].gis[gi[1]]

    def persistence_mode(self, dev: NvmlHandle) -> int:
        return self._gpu(dev).persistence

    def set_persistence_mode(self, dev: NvmlHandle, mode: int) -> None:
        self._gpu(dev).persistence = mode

    def set_compute_mode(self, dev: NvmlHandle, mode: int) -> None:
        if mode == 1:
            raise NvmlFailure("nvmlDeviceSetComputeMode", 4, "Insufficient Permissions")
        self._gpu(dev).compute_mode = mode

    def set_mig_mode(self, dev: NvmlHandle, mode: int) -> int:
        self._gpu(dev).mig = (mode, mode)
        return 0

    def create_gpu_instance(
        self, dev: NvmlHandle, *, profile_id: int, start: int, size: int
    ) -> GiHandle:
        gpu = self._gpu(dev)
        for gi in gpu.gis.values():
            if gi.start < start + size and start < gi.start + gi.size:
                raise NvmlFailure("nvmlDeviceCreateGpuInstanceWithPlacement", INSUFFICIENT, "x")
        gi_id = max(gpu.gis, default=0) + 1
        gpu.gis[gi_id] = RawGiInfo(gi_id, profile_id, start, size)
        return GiHandle((int(str(dev)), gi_id))

    def full_ci_profile_id(self, gi: GiHandle, slice_count: int) -> int:
        return slice_count - 1

    def create_compute_instance(self, gi: GiHandle, ci_profile_id: int) -> CiHandle:
        if self.fail_ci:
            raise NvmlFailure("nvmlGpuInstanceCreateComputeInstance", INSUFFICIENT, "no CI")
        assert isinstance(gi, tuple)
        self.gpus[gi[0]].cis.setdefault(gi[1], []).append(0)
        return CiHandle(gi)

    def compute_instances(self, gi: GiHandle) -> list[CiHandle]:
        assert isinstance(gi, tuple)
        return [CiHandle(gi) for _ in self.gpus[gi[0]].cis.get(gi[1], [])]

    def destroy_compute_instance(self, ci: CiHandle) -> None:
        assert isinstance(ci, tuple)
        self.gpus[ci[0]].cis[ci[1]].pop()

    def destroy_gpu_instance(self, gi: GiHandle) -> None:
        assert isinstance(gi, tuple)
        if self.gpus[gi[0]].cis.get(gi[1]):
            raise NvmlFailure("nvmlGpuInstanceDestroy", 19, "In use")
        del self.gpus[gi[0]].gis[gi[1]]

    def event_set_create(self) -> EventSetHandle:
        return EventSetHandle(object())

    def supported_events(self, dev: NvmlHandle) -> int:
        return 0xB

    def register_events(self, dev: NvmlHandle, *, mask: int, event_set: EventSetHandle) -> None:
        self._gpu(dev)

    def event_wait(self, event_set: EventSetHandle, timeout_ms: int) -> RawEvent | None:
        if any(g.lost for g in self.gpus):
            raise NvmlFailure("nvmlEventSetWait_v2", GPU_IS_LOST, "GPU is lost")
        return self.events.pop(0) if self.events else None

    def event_set_free(self, event_set: EventSetHandle) -> None:
        pass


@pytest.fixture
def nvml(tmp_path: Path) -> FakeNvml:
    cluster = bytes(range(16))
    return FakeNvml(
        [
            FakeGpu("GPU-11111111-1111-1111-1111-111111111111", "00000000:07:00.0"),
            FakeGpu(
                "GPU-22222222-2222-2222-2222-222222222222",
                "00000000:0F:00.0",
                fabric=RawFabric(cluster, 3, 3, 0, 0),
                mig=(1, 1),
            ),
        ]
    )


@pytest.fixture
def lib(nvml: FakeNvml, tmp_path: Path) -> NvmlDeviceLib:
    devices = tmp_path / "sys" / "devices" / "pci0000:00" / "0000:00:01.0" / "0000:07:00.0"
    devices.mkdir(parents=True)
    links = tmp_path / "sys" / "bus" / "pci" / "devices"
    links.mkdir(parents=True)
    (links / "0000:07:00.0").symlink_to(devices)
    return NvmlDeviceLib(nvml, sysfs_root=tmp_path / "sys", nvidia_smi=tmp_path / "nvidia-smi")


def test_enumeration_converts_nvml_values(lib: NvmlDeviceLib) -> None:
    first, second = lib.gpus()
    assert first.pci_bus_id == "0000:07:00.0"
    assert first.pcie_root == "pci0000:00"
    assert second.pci_bus_id == "0000:0f:00.0"
    assert second.pcie_root is None
    assert first.brand is Brand.NVIDIA
    assert first.architecture is Architecture.AMPERE
    assert first.cuda_driver_version == "12.4"
    assert first.addressing_mode is None  # function missing in this driver
    assert first.fabric is None
    assert second.fabric is not None
    assert second.fabric.cluster_uuid == "00010203-0405-0607-0809-0a0b0c0d0e0f"
    assert second.fabric.clique_id == 3
    assert second.fabric.state is FabricState.COMPLETED
    assert [p.name for p in first.mig_profiles] == ["1g.5gb", "3g.20gb"]
    assert first.mig_profile("3g.20gb").memory_slices == 4


def test_numa_node_from_sysfs(lib: NvmlDeviceLib, tmp_path: Path) -> None:
    node = tmp_path / "sys" / "bus" / "pci" / "devices" / "0000:07:00.0" / "numa_node"
    assert lib.gpus()[0].numa_node is None
    node.write_text("1\n")
    assert lib.gpus()[0].numa_node == 1
    node.write_text("-1\n")  # no NUMA affinity
    assert lib.gpus()[0].numa_node is None


def test_memory_not_supported_leaves_memory_unknown(lib: NvmlDeviceLib, nvml: FakeNvml) -> None:
    # Before: NOT_SUPPORTED from nvmlDeviceGetMemoryInfo failed the whole enumeration.
    dev = lib.create_mig_device(nvml.gpus[1].uuid, profile_id=19, placement_start=0)
    nvml.memory_supported = False
    first, second = lib.gpus()
    assert first.memory_bytes is None
    assert [p.name for p in first.mig_profiles] == ["1g.5gb", "3g.20gb"]
    (mig,) = second.mig_devices
    assert mig.uuid == dev.uuid
    assert mig.memory_bytes == second.mig_profile(19).memory_bytes


@pytest.mark.parametrize("code", [NOT_SUPPORTED, INVALID_ARGUMENT, INSUFFICIENT, 999])
def test_placement_query_errors_do_not_stop_enumeration(
    lib: NvmlDeviceLib, nvml: FakeNvml, code: int
) -> None:
    nvml.placements_code = code
    profiles = {p.name: p for p in lib.gpus()[0].mig_profiles}
    assert profiles["3g.20gb"].placements == ()
    assert len(profiles["1g.5gb"].placements) == 7


def test_driver_reload_reinitialises_nvml_and_enumerates_again(
    lib: NvmlDeviceLib, nvml: FakeNvml
) -> None:
    nvml.uninitialized = 1
    assert len(lib.gpus()) == 2
    assert nvml.reloads == 1
    assert len(lib.gpus()) == 2
    assert nvml.reloads == 1


def test_nvml_is_initialised_with_no_gpus_flag(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import pynvml  # type: ignore[import-untyped]
    from dra_nvlib.nvml_api import NVML_INIT_FLAG_NO_GPUS
    from dra_nvlib.nvml_binding import PynvmlApi

    library = tmp_path / "libnvidia-ml.so.1"
    flags: list[int] = []

    class Loaded:
        _name = str(library)

    monkeypatch.setattr(pynvml, "nvmlLib", Loaded())
    monkeypatch.setattr(pynvml, "nvmlInitWithFlags", flags.append)
    PynvmlApi(library).init()
    assert flags == [NVML_INIT_FLAG_NO_GPUS]


def test_unnamed_profiles_get_nvidia_names(lib: NvmlDeviceLib, nvml: FakeNvml) -> None:
    nvml.unnamed_profiles = True
    assert [p.name for p in lib.gpus()[0].mig_profiles] == ["1g.5gb", "3g.20gb"]


@pytest.mark.parametrize("code", [NOT_FOUND, INVALID_ARGUMENT])
def test_unknown_uuid_is_gpu_not_found(lib: NvmlDeviceLib, nvml: FakeNvml, code: int) -> None:
    nvml.unknown_uuid_code = code
    missing = "GPU-00000000-0000-0000-0000-000000000000"
    with pytest.raises(GpuNotFoundError) as err:
        lib.set_mig_mode(missing, enabled=True)
    assert (err.value.gpu, err.value.operation) == (missing, "set_mig_mode")
    with pytest.raises(GpuNotFoundError):
        lib.watch_health([missing])


def test_mig_create_list_destroy(lib: NvmlDeviceLib, nvml: FakeNvml) -> None:
    gpu = nvml.gpus[1].uuid
    dev = lib.create_mig_device(gpu, profile_id=9, placement_start=4)
    assert dev.profile_name == "3g.20gb"
    assert dev.placement.start == 4
    with pytest.raises(InsufficientResourcesError) as err:
        lib.create_mig_device(gpu, profile_id=19, placement_start=5)
    assert (err.value.gpu, err.value.operation) == (gpu, "create_mig_device")
    lib.destroy_mig_device(dev.uuid)
    assert lib.gpu(gpu).mig_devices == ()


def test_mig_device_sms_are_its_compute_instance_share(lib: NvmlDeviceLib, nvml: FakeNvml) -> None:
    gpu = nvml.gpus[1].uuid
    whole = lib.create_mig_device(gpu, profile_id=9, placement_start=0)
    assert whole.multiprocessor_count == 42  # no per-device call: the GI profile's count
    nvml.mig_sms = 14  # one 1-slice compute instance of the 3g GPU instance
    assert lib.gpu(gpu).mig_devices[0].multiprocessor_count == 14


def test_failed_compute_instance_rolls_back_the_gpu_instance(
    lib: NvmlDeviceLib, nvml: FakeNvml
) -> None:
    nvml.fail_ci = True
    with pytest.raises(InsufficientResourcesError, match="no CI"):
        lib.create_mig_device(nvml.gpus[1].uuid, profile_id=19, placement_start=0)
    assert nvml.gpus[1].gis == {}


def test_permission_errors_are_typed(lib: NvmlDeviceLib, nvml: FakeNvml) -> None:
    with pytest.raises(NoPermissionError) as err:
        lib.set_compute_mode(nvml.gpus[0].uuid, ComputeMode.EXCLUSIVE_THREAD)
    assert err.value.gpu == nvml.gpus[0].uuid


def test_lost_gpu_keeps_its_last_facts_flagged(lib: NvmlDeviceLib, nvml: FakeNvml) -> None:
    before = lib.gpus()
    nvml.gpus[0].lost = True
    after = lib.gpus()
    assert after[0].lost
    assert after[0].uuid == before[0].uuid
    with pytest.raises(GpuLostError):
        lib.set_compute_mode(nvml.gpus[0].uuid, ComputeMode.DEFAULT)


def test_health_events(lib: NvmlDeviceLib, nvml: FakeNvml) -> None:
    uuid = nvml.gpus[0].uuid
    nvml.events.append(RawEvent(uuid, 0x8, 79, 0xFFFFFFFF, 0xFFFFFFFF))
    nvml.events.append(RawEvent(uuid, 0x2, 0, 1, 0))
    with lib.watch_health() as watch:
        xid = watch.wait(0.01)
        ecc = watch.wait(0.01)
        assert watch.wait(0.01) is None
        nvml.gpus[0].lost = True
        lost = watch.wait(0.01)
    assert xid is not None
    assert (xid.kind, xid.xid, xid.gi_id) == (HealthEventKind.XID, 79, None)
    assert ecc is not None
    assert (ecc.kind, ecc.gi_id) == (HealthEventKind.ECC_DOUBLE_BIT, 1)
    assert lost is not None
    assert (lost.kind, lost.gpu_uuid) == (HealthEventKind.GPU_LOST, uuid)


def test_health_event_of_a_mig_device_names_the_mig_device(
    lib: NvmlDeviceLib, nvml: FakeNvml
) -> None:
    uuid = nvml.gpus[0].uuid
    nvml.gpus[0].mig = (1, 1)
    nvml.gpus[0].gis[1] = RawGiInfo(1, 19, 0, 1)
    nvml.gpus[0].gis[2] = RawGiInfo(2, 19, 1, 1)
    migs = {m.gi_id: m.uuid for m in lib.gpus()[0].mig_devices}
    nvml.events.append(RawEvent(uuid, 0x8, 94, 2, 0))
    nvml.events.append(RawEvent(uuid, 0x8, 94, 5, 0))  # a GI NVML no longer lists
    nvml.events.append(RawEvent(uuid, 0x8, 79, 0xFFFFFFFF, 0xFFFFFFFF))
    with lib.watch_health() as watch:
        on_mig = watch.wait(0.01)
        unknown = watch.wait(0.01)
        whole = watch.wait(0.01)
    assert on_mig is not None
    assert unknown is not None
    assert whole is not None
    assert (on_mig.gi_id, on_mig.ci_id, on_mig.mig_uuid) == (2, 0, migs[2])
    assert migs[2] != migs[1]
    assert unknown.mig_uuid is None
    assert whole.mig_uuid is None


def test_close_shuts_nvml_down_once(lib: NvmlDeviceLib, nvml: FakeNvml) -> None:
    lib.close()
    lib.close()
    assert nvml.shutdowns == 1


def test_translate_maps_codes() -> None:
    err = translate(NvmlFailure("f", 3, "Not Supported"), gpu="GPU-x", operation="op")
    assert isinstance(err, NotSupportedError)
    other = translate(NvmlFailure("f", 999, "Unknown"), gpu="GPU-x", operation="op")
    assert isinstance(other, NvmlCallError)
    assert other.code == 999


def test_version_and_bus_formats() -> None:
    assert format_cuda_version(12040) == "12.4"
    assert format_cuda_version(13000) == "13.0"
    assert normalize_bus_id("00000000:4E:00.0") == "0000:4e:00.0"


def test_missing_driver_root_names_the_paths(tmp_path: Path) -> None:
    with pytest.raises(LibraryLoadError, match=r"usr/lib64/libnvidia-ml\.so\.1"):
        find_library(tmp_path)
    with pytest.raises(LibraryLoadError):
        open_device_lib(DeviceLibConfig(backend="nvml", driver_root=tmp_path))


def test_library_found_under_driver_root(tmp_path: Path) -> None:
    lib_dir = tmp_path / "usr" / "lib" / "x86_64-linux-gnu"
    lib_dir.mkdir(parents=True)
    (lib_dir / "libnvidia-ml.so.1").write_bytes(b"")
    assert find_library(tmp_path) == lib_dir / "libnvidia-ml.so.1"


def test_pcie_root_absent_without_sysfs(tmp_path: Path) -> None:
    assert pcie_root(tmp_path, "0000:07:00.0") is None


def test_addressing_mode_values() -> None:
    assert AddressingMode(2) is AddressingMode.ATS


def test_every_nvml_binding_used_exists_in_nvidia_ml_py() -> None:
    from dra_nvlib import nvml_binding

    source = Path(nvml_binding.__file__).read_text()
    names = set(re.findall(r'"(nvml[A-Za-z0-9_]+)"', source))
    names.discard("nvmlLib")  # the loaded-library global, None until NVML is loaded
    names |= set(re.findall(r"pynvml\.(c_nvml[A-Za-z0-9_]+)", source))
    assert len(names) > 30
    missing = sorted(n for n in names if not nvml_binding.has_binding(n))
    assert missing == []


def test_persistence_mode_and_the_pci_bus_of_the_sysfs_root(
    lib: NvmlDeviceLib, nvml: FakeNvml, tmp_path: Path
) -> None:
    uuid = nvml.gpus[0].uuid
    assert lib.persistence_mode(uuid) is True
    lib.set_persistence_mode(uuid, enabled=False)
    assert nvml.gpus[0].persistence == 0
    assert lib.persistence_mode(uuid) is False
    bus = lib.pci_bus()
    assert bus.sysfs_root == tmp_path / "sys"
