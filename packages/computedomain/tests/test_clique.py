"""Clique registration (lowest free index), DNS names and /etc/hosts, the node clique ID."""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_api_types import ComputeDomainDaemonInfo
from dra_computedomain.clique import deregister, dns_mapping, register
from dra_computedomain.clique_id import node_clique_id
from dra_computedomain.errors import CliqueFullError, CliqueIdError
from dra_computedomain.hosts import parse_managed, render_hosts
from dra_computedomain.imex_config import ImexSettings, parse_config, render_config, render_nodes
from dra_computedomain.plugin_cli import read_clique_id
from dra_nvlib import DeviceLibConfig, FabricState, open_device_lib
from dra_nvlib.identity import cluster_uuid


def _join(
    daemons: list[ComputeDomainDaemonInfo],
    node: str,
    ip: str,
    *,
    ready: bool = False,
    max_nodes: int = 18,
) -> list[ComputeDomainDaemonInfo]:
    return register(
        daemons,
        clique="u.c",
        node_name=node,
        ip_address=ip,
        clique_id="c",
        ready=ready,
        max_nodes=max_nodes,
    )


def test_new_daemons_take_the_lowest_free_index_and_keep_it() -> None:
    daemons = _join([], "a", "10.0.0.1")
    daemons = _join(daemons, "b", "10.0.0.2")
    daemons = _join(daemons, "c", "10.0.0.3")
    assert [(d.node_name, d.index) for d in daemons] == [("a", 0), ("b", 1), ("c", 2)]
    daemons = deregister(daemons, "b")
    daemons = _join(daemons, "d", "10.0.0.4")
    assert [(d.node_name, d.index) for d in daemons] == [("a", 0), ("d", 1), ("c", 2)]
    # A refresh (new IP, now ready) keeps the index.
    daemons = _join(daemons, "c", "10.0.0.9", ready=True)
    c = next(d for d in daemons if d.node_name == "c")
    assert (c.index, c.ip_address, c.status) == (2, "10.0.0.9", "Ready")


def test_full_clique_is_an_error_naming_it() -> None:
    daemons = _join(_join([], "a", "1"), "b", "2", max_nodes=2)
    with pytest.raises(CliqueFullError) as err:
        _join(daemons, "c", "3", max_nodes=2)
    assert (err.value.clique, err.value.node, err.value.limit) == ("u.c", "c", 2)


def test_hosts_block_replaced_in_place_and_other_lines_kept() -> None:
    kubelet = "127.0.0.1\tlocalhost\n10.1.0.5\tmy-pod\n"
    daemons = _join(_join([], "a", "10.0.0.1"), "b", "10.0.0.2")
    first = render_hosts(kubelet, dns_mapping(daemons))
    assert first.startswith(kubelet)
    assert parse_managed(first) == {
        "compute-domain-daemon-0000": "10.0.0.1",
        "compute-domain-daemon-0001": "10.0.0.2",
    }
    second = render_hosts(first, {"compute-domain-daemon-0000": "10.0.0.7"})
    assert parse_managed(second) == {"compute-domain-daemon-0000": "10.0.0.7"}
    assert second.count("# BEGIN") == 1
    assert second.startswith(kubelet)


def test_imex_config_round_trips() -> None:
    text = render_config(
        ImexSettings(bind_address="10.0.0.1", nodes_config_path="/imexd/n.cfg", command_port=51000)
    )
    parsed = parse_config("imexd.cfg", text)
    assert parsed["IMEX_BIND_INTERFACE_IP"] == "10.0.0.1"
    assert parsed["IMEX_CMD_PORT"] == "51000"
    assert parsed["IMEX_WAIT_FOR_QUORUM"] == "RECOVERY"
    assert render_nodes(3).splitlines() == [
        "compute-domain-daemon-0000",
        "compute-domain-daemon-0001",
        "compute-domain-daemon-0002",
    ]


def test_fake_gb200_nodes_of_one_cluster_share_a_clique(tmp_path: Path) -> None:
    ids = []
    for node in ("node-a", "node-b"):
        config = DeviceLibConfig(
            backend="fake",
            node_name=node,
            fake_fleet="4xGB200",
            fake_state_path=tmp_path / f"{node}.json",
        )
        with open_device_lib(config) as lib:
            ids.append(node_clique_id(node, lib.gpus()))
    assert ids[0] == ids[1]
    assert ids[0] == f"{cluster_uuid('fake-nvlink-domain')}.1"
    config = DeviceLibConfig(
        backend="fake",
        node_name="node-c",
        fake_fleet="4xGB200:clique=2",
        fake_state_path=tmp_path / "node-c.json",
    )
    with open_device_lib(config) as lib:
        assert node_clique_id("node-c", lib.gpus()).endswith(".2")


def test_non_fabric_gpus_have_no_clique_and_unfinished_fabric_is_an_error(
    tmp_path: Path,
) -> None:
    config = DeviceLibConfig(
        backend="fake",
        node_name="h100",
        fake_fleet="2xH100-80GB",
        fake_state_path=tmp_path / "h100.json",
    )
    with open_device_lib(config) as lib:
        assert node_clique_id("h100", lib.gpus()) == ""
    config = DeviceLibConfig(
        backend="fake", node_name="gb", fake_fleet="2xGB200", fake_state_path=tmp_path / "gb.json"
    )
    with open_device_lib(config) as lib:
        gpu = lib.gpus()[1]
        lib.set_fabric_state(gpu.uuid, FabricState.IN_PROGRESS)  # type: ignore[attr-defined]
        with pytest.raises(CliqueIdError) as err:
            node_clique_id("gb", lib.gpus())
    assert gpu.uuid in str(err.value)
    assert err.value.node == "gb"


def test_a_gpu_lost_before_start_leaves_the_clique_of_the_others(tmp_path: Path) -> None:
    config = DeviceLibConfig(
        backend="fake", node_name="gb", fake_fleet="4xGB200", fake_state_path=tmp_path / "gb.json"
    )
    with open_device_lib(config) as lib:
        expected = node_clique_id("gb", lib.gpus())
        lost = lib.gpus()[0]
        lib.mark_gpu_lost(lost.uuid)  # type: ignore[attr-defined]
        # This process saw it: listed, flagged lost, and not counted.
        assert node_clique_id("gb", lib.gpus()) == expected
    # A fresh process (the plugin starting) cannot identify it, and starts on the others.
    assert read_clique_id(config, "gb") == expected
    with open_device_lib(config) as fresh:
        assert lost.uuid not in {g.uuid for g in fresh.gpus()}
