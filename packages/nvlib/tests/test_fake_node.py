"""Fake-node behaviour beyond the contract: determinism, shared state, faults, health."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from dra_nvlib import (
    DeviceLibConfig,
    FabricState,
    FakeDeviceLib,
    FakeStateError,
    FaultKind,
    GpuLostError,
    HealthEventKind,
    InsufficientResourcesError,
    InvalidStateError,
    NotSupportedError,
    NvmlCallError,
    TimeSliceLevel,
    open_device_lib,
)


def _open(
    path: Path, fleet: str | None = "4xA100-40GB,4xL4", node: str = "node-a"
) -> FakeDeviceLib:
    lib = open_device_lib(
        DeviceLibConfig(backend="fake", node_name=node, fake_fleet=fleet, fake_state_path=path)
    )
    assert isinstance(lib, FakeDeviceLib)
    return lib


def test_identities_are_deterministic_per_node(tmp_path: Path) -> None:
    a = _open(tmp_path / "a.json").gpus()
    a_again = _open(tmp_path / "a2.json").gpus()
    b = _open(tmp_path / "b.json", node="node-b").gpus()
    assert [g.uuid for g in a] == [g.uuid for g in a_again]
    assert [g.pci_bus_id for g in a] == [g.pci_bus_id for g in a_again]
    assert not {g.uuid for g in a} & {g.uuid for g in b}
    assert a[0].pci_bus_id == "0000:07:00.0"
    assert a[0].pcie_root == "pci0000:00"


def test_real_part_strings(tmp_path: Path) -> None:
    fleet = "1xA100-40GB,1xA100-80GB,1xH100-80GB,1xH200,1xGB200,1xL4,1xT4,1xV100-16GB"
    gpus = _open(tmp_path / "s.json", fleet=fleet).gpus()
    assert [g.product_name for g in gpus] == [
        "NVIDIA A100-SXM4-40GB",
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA H100 80GB HBM3",
        "NVIDIA H200",
        "NVIDIA GB200",
        "NVIDIA L4",
        "Tesla T4",
        "Tesla V100-SXM2-16GB",
    ]
    assert [str(g.cuda_compute_capability) for g in gpus] == [
        "8.0", "8.0", "9.0", "9.0", "10.0", "8.9", "7.5", "7.0",
    ]  # fmt: skip
    assert gpus[0].memory_bytes == 40960 * 1024 * 1024
    assert gpus[2].memory_bytes == 81559 * 1024 * 1024
    assert [g.architecture.display_name for g in gpus][-3:] == ["Ada Lovelace", "Turing", "Volta"]


def test_state_is_shared_between_processes(tmp_path: Path) -> None:
    path = tmp_path / "shared.json"
    lib = _open(path, fleet="2xA100-40GB:mig")
    gpu = lib.gpus()[0].uuid
    code = (
        "from pathlib import Path\n"
        "from dra_nvlib import DeviceLibConfig, open_device_lib\n"
        f"lib = open_device_lib(DeviceLibConfig(backend='fake', node_name='node-a', "
        f"fake_state_path=Path({str(path)!r})))\n"
        f"print(lib.create_mig_device({gpu!r}, profile_id=19, placement_start=3).uuid)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    created = out.stdout.strip()
    assert [m.uuid for m in lib.gpu(gpu).mig_devices] == [created]
    with pytest.raises(InsufficientResourcesError):
        lib.create_mig_device(gpu, profile_id=0, placement_start=0)


def test_concurrent_creators_never_double_allocate(tmp_path: Path) -> None:
    path = tmp_path / "race.json"
    lib = _open(path, fleet="1xH100-80GB:mig")
    gpu = lib.gpus()[0].uuid
    code = (
        "import sys\nfrom pathlib import Path\n"
        "from dra_nvlib import DeviceLibConfig, open_device_lib, InsufficientResourcesError\n"
        f"lib = open_device_lib(DeviceLibConfig(backend='fake', node_name='node-a', "
        f"fake_state_path=Path({str(path)!r})))\n"
        "ok = 0\n"
        "for _ in range(3):\n"
        "    try:\n"
        f"        lib.create_mig_device({gpu!r}, profile_id=9, placement_start=int(sys.argv[1]))\n"
        "        ok += 1\n"
        "    except InsufficientResourcesError:\n"
        "        pass\n"
        "print(ok)\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(start)], stdout=subprocess.PIPE, text=True
        )
        for start in (0, 0, 4, 4)
    ]
    wins = sum(int(p.communicate()[0]) for p in procs)
    assert wins == 2
    assert sorted(m.placement.start for m in lib.gpu(gpu).mig_devices) == [0, 4]


def test_other_nodes_state_is_refused_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    _open(path)
    before = path.read_text()
    with pytest.raises(FakeStateError, match="belongs to node 'node-a'"):
        _open(path, node="node-b")
    with pytest.raises(FakeStateError, match="holds fleet"):
        _open(path, fleet="8xH100-80GB")
    assert path.read_text() == before


def test_corrupt_state_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text("{not json")
    with pytest.raises(FakeStateError, match="not valid JSON"):
        _open(path)


def test_operation_fails_once_then_works(tmp_path: Path) -> None:
    lib = _open(tmp_path / "s.json", fleet="1xA100-40GB:mig")
    gpu = lib.gpus()[0].uuid
    lib.fail_next("create_mig_device", error=FaultKind.INSUFFICIENT_RESOURCES)
    with pytest.raises(InsufficientResourcesError, match="injected fault") as err:
        lib.create_mig_device(gpu, profile_id=19, placement_start=0)
    assert (err.value.gpu, err.value.operation) == (gpu, "create_mig_device")
    assert lib.gpu(gpu).mig_devices == ()
    lib.create_mig_device(gpu, profile_id=19, placement_start=0)


def test_unknown_fault_is_an_nvml_call_error(tmp_path: Path) -> None:
    lib = _open(tmp_path / "s.json")
    lib.fail_next("gpus", error=FaultKind.UNKNOWN)
    with pytest.raises(NvmlCallError) as err:
        lib.gpus()
    assert err.value.code == 999
    assert len(lib.gpus()) == 8


def test_gpu_lost(tmp_path: Path) -> None:
    lib = _open(tmp_path / "s.json")
    gpu = lib.gpus()[1].uuid
    with lib.watch_health([gpu]) as watch:
        lib.mark_gpu_lost(gpu)
        event = watch.wait(2.0)
    assert event is not None
    assert event.kind is HealthEventKind.GPU_LOST
    assert event.gpu_uuid == gpu
    assert lib.gpu(gpu).lost
    with pytest.raises(GpuLostError) as err:
        lib.set_time_slice(gpu, TimeSliceLevel.LONG)
    assert err.value.gpu == gpu


def test_xid_and_ecc_events_reach_watchers_of_that_gpu(tmp_path: Path) -> None:
    lib = _open(tmp_path / "s.json")
    gpus = [g.uuid for g in lib.gpus()]
    with lib.watch_health([gpus[0]]) as mine, lib.watch_health() as everything:
        lib.inject_xid(gpus[1], 79)
        lib.inject_xid(gpus[0], 48)
        lib.inject_ecc_error(gpus[0], double_bit=True)
        first, second = mine.wait(2.0), mine.wait(2.0)
        assert first is not None
        assert first.xid == 48
        assert first.kind is HealthEventKind.XID
        assert second is not None
        assert second.kind is HealthEventKind.ECC_DOUBLE_BIT
        assert mine.wait(0.05) is None
        seen = [everything.wait(2.0) for _ in range(3)]
    assert [e.gpu_uuid for e in seen if e] == [gpus[1], gpus[0], gpus[0]]


def test_xid_on_a_mig_device_names_it(tmp_path: Path) -> None:
    lib = _open(tmp_path / "s.json", fleet="1xA100-40GB:mig")
    gpu = lib.gpus()[0].uuid
    dev = lib.create_mig_device(gpu, profile_id=9, placement_start=0)
    with lib.watch_health() as watch:
        lib.inject_xid(gpu, 94, gi_id=dev.gi_id, ci_id=dev.ci_id)
        event = watch.wait(2.0)
    assert event is not None
    assert event.mig_uuid == dev.uuid


def test_time_slice_and_its_refusal_under_mig(tmp_path: Path) -> None:
    lib = _open(tmp_path / "s.json", fleet="1xA100-40GB,1xA100-40GB:mig")
    plain, mig = (g.uuid for g in lib.gpus())
    lib.set_time_slice(plain, TimeSliceLevel.LONG)
    assert lib.gpu(plain).time_slice is TimeSliceLevel.LONG
    with pytest.raises(InvalidStateError):
        lib.set_time_slice(mig, TimeSliceLevel.SHORT)


def test_gb200_fabric_clique_and_state(tmp_path: Path) -> None:
    lib = _open(tmp_path / "s.json", fleet="4xGB200:clique=5:cluster=rack-a")
    other = _open(tmp_path / "o.json", fleet="4xGB200:clique=5:cluster=rack-a", node="node-b")
    gpus = lib.gpus()
    fabrics = {g.fabric for g in gpus}
    assert len(fabrics) == 1
    fabric = fabrics.pop()
    assert fabric is not None
    assert fabric.clique_id == 5
    # the same NVL domain on another node shares the cluster UUID
    assert other.gpus()[0].fabric == fabric
    lib.set_fabric_state(gpus[0].uuid, FabricState.IN_PROGRESS)
    state = lib.gpu(gpus[0].uuid).fabric
    assert state is not None
    assert state.state is FabricState.IN_PROGRESS
    l4 = _open(tmp_path / "l4.json", fleet="1xL4")
    with pytest.raises(NotSupportedError):
        l4.set_fabric_state(l4.gpus()[0].uuid, FabricState.COMPLETED)


def test_hold_after_blocks_after_the_operation_until_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from dra_nvlib.fake_backend import ENV_HOLD_AFTER

    lib = _open(tmp_path / "state.json")
    gpu = lib.gpus()[0].uuid
    hold = tmp_path / "hold"
    hold.mkdir()
    monkeypatch.setenv(ENV_HOLD_AFTER, f"set_time_slice:{hold}")
    lib.set_persistence_mode(gpu, enabled=True)  # another operation is not held
    done = threading.Event()

    def set_long() -> None:
        lib.set_time_slice(gpu, TimeSliceLevel.LONG)
        done.set()

    worker = threading.Thread(target=set_long)
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while not (hold / "set_time_slice.held").exists():
            assert time.monotonic() < deadline, "never held"
            time.sleep(0.01)
        # Held after the change took effect: another process already sees it.
        assert _open(tmp_path / "state.json").gpus()[0].time_slice is TimeSliceLevel.LONG
        assert not done.wait(0.1)
    finally:
        (hold / "set_time_slice.release").touch()
        worker.join(timeout=10)
    assert done.is_set()
