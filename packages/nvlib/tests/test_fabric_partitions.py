"""Fabric Manager partitions as NVIDIA's ``pkg/fabricmanager`` Manager reads and drives them,
on the fake Fabric Manager (state shared across processes through its file)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_nvlib.errors import FabricManagerError, FabricManagerUnavailableError, FakeStateError
from dra_nvlib.fabric_partitions import FabricPartition, PartitionTable, hgx_partitions
from dra_nvlib.fake_fabric_manager import FakeFabricManager, fake_fabric_manager_path
from dra_nvlib.nvfm import FmConnection, fm_connection, open_nvfm


def test_the_hgx_layout_has_one_partition_of_each_size_per_gpu() -> None:
    table = PartitionTable(hgx_partitions(8))
    assert len(hgx_partitions(8)) == 15
    assert table.by_size(3) == {8: 0, 4: 1, 2: 4, 1: 9}
    assert table.find([3, 4]) == 4
    assert table.find([4, 3]) == 4
    # Not an exact member set: no partition (NVIDIA fails the prepare).
    assert table.find([2, 3]) is None
    assert table.find([]) is None
    with pytest.raises(ValueError, match="power-of-two"):
        hgx_partitions(6)


@pytest.mark.parametrize(
    ("partitions", "message"),
    [
        ((FabricPartition(1, False, (1,)), FabricPartition(1, False, (2,))), "listed twice"),
        ((FabricPartition(1, False, ()),), "has no GPUs"),
        ((FabricPartition(1, False, (2, 2)),), "module ID twice"),
    ],
)
def test_a_malformed_partition_list_is_refused_as_nvidia_refuses_it(
    partitions: tuple[FabricPartition, ...], message: str
) -> None:
    with pytest.raises(FabricManagerError, match=message) as err:
        PartitionTable(partitions)
    assert err.value.partition == 1


def test_a_gpu_in_two_partitions_of_one_size_is_an_error() -> None:
    table = PartitionTable([FabricPartition(1, False, (1, 2)), FabricPartition(2, False, (1, 3))])
    with pytest.raises(FabricManagerError, match="also in partition 1"):
        table.by_size(1)


def test_activation_is_idempotent_and_seen_by_another_process(tmp_path: Path) -> None:
    fm = FakeFabricManager(tmp_path / "fm.json", gpu_count=8)
    assert fm.activate(4) is True
    assert fm.activate(4) is False  # a retried prepare
    other = FakeFabricManager(tmp_path / "fm.json", gpu_count=8)  # a restarted plugin
    assert {p.id for p in other.partitions() if p.active} == {4}
    assert other.deactivate(4) is True
    assert other.deactivate(4) is False
    assert not any(p.active for p in fm.partitions())


def test_a_partition_sharing_gpus_with_an_active_one_is_in_use(tmp_path: Path) -> None:
    fm = FakeFabricManager(tmp_path / "fm.json", gpu_count=8)
    fm.activate(1)  # GPUs 1-4
    with pytest.raises(FabricManagerError, match=r"in use: shares GPUs with active \[1\]"):
        fm.activate(3)  # GPUs 1-2
    fm.activate(2)  # GPUs 5-8: disjoint
    with pytest.raises(FabricManagerError, match="unknown partition"):
        fm.activate(99)


def test_a_corrupt_state_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "fm.json"
    path.write_text('{"version": 7}')
    with pytest.raises(FakeStateError, match=r"fm\.json"):
        FakeFabricManager(path, gpu_count=8)


def test_a_stopped_fabric_manager_refuses_every_call_and_keeps_its_activations(
    tmp_path: Path,
) -> None:
    fm = FakeFabricManager(tmp_path / "fm.json", gpu_count=2)
    fm.activate(0)
    fm.set_running(False)
    for call in (fm.partitions, lambda: fm.activate(1), lambda: fm.deactivate(0)):
        with pytest.raises(FabricManagerError, match="cannot connect") as err:
            call()
        assert err.value.partition is None
    fm.set_running(True)
    assert [p.id for p in fm.partitions() if p.active] == [0]


def test_an_existing_state_is_required_without_a_gpu_count(tmp_path: Path) -> None:
    with pytest.raises(FakeStateError, match="no fake Fabric Manager state"):
        FakeFabricManager(tmp_path / "fm.json", gpu_count=None)
    FakeFabricManager(tmp_path / "fm.json", gpu_count=4)
    assert len(FakeFabricManager(tmp_path / "fm.json", gpu_count=None).partitions()) == 7


def test_a_fake_node_keeps_its_fabric_manager_next_to_its_gpus(tmp_path: Path) -> None:
    assert fake_fabric_manager_path(tmp_path / "fake-gpus.json") == (
        tmp_path / "fake-fabric-manager.json"
    )


def test_the_real_edge_names_libnvfm_and_nvidias_connection() -> None:
    # NVIDIA: NVIDIA_FABRICMANAGER_ADDRESS selects TCP (empty: 127.0.0.1), else the socket.
    assert fm_connection({}) == FmConnection(
        "/driver-root/run/nvidia-fabricmanager/socket", unix_socket=True
    )
    assert fm_connection({"NVIDIA_FABRICMANAGER_UNIX_SOCKET": "/s"}) == FmConnection(
        "/s", unix_socket=True
    )
    assert fm_connection({"NVIDIA_FABRICMANAGER_ADDRESS": ""}) == FmConnection(
        "127.0.0.1", unix_socket=False
    )
    with pytest.raises(FabricManagerUnavailableError, match="libnvfm") as err:
        open_nvfm(fm_connection({"NVIDIA_FABRICMANAGER_ADDRESS": "10.0.0.1"}))
    assert "TCP 10.0.0.1" in str(err.value)
    assert err.value.operation == "connect"
