"""Two plugin instances on one plugin directory, as a surge rollout (``maxSurge: 1``,
``maxUnavailable: 0``) runs them: each registers its own sockets, both answer the kubelet,
a claim prepared by one is unprepared by the other, only one publishes the slices, and the
old one's sockets go when it stops while the new one keeps serving and takes over the slices.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from dra_kube_client.testing import HttpFront
from dra_kubelet_core.checkpoint import decode_checkpoint
from dra_kubelet_core.node_lock import InstanceLease
from dra_kubelet_core.publisher import SlicePublisher
from dra_kubelet_core.sockets import remove_own_socket, socket_identity
from kubelet_core_support import PluginDirs, ReferenceProtos, plugin_api_server
from toy_plugin import (
    DRIVER,
    RunningPlugin,
    ToyDriver,
    add_claim,
    register,
    toy_paths,
    toy_settings,
    wait_for,
)

OLD_UID = "0a1b2c3d-1111-4000-8000-000000000001"
NEW_UID = "4e5f6a7b-2222-4000-8000-000000000002"


@pytest.fixture
def server() -> Iterator[HttpFront]:
    with plugin_api_server("u-n1") as front:
        yield front


def _slices(server: HttpFront) -> list[dict[str, Any]]:
    return [s for s in server.api.kind_items("resourceslices") if s["spec"]["driver"] == DRIVER]


def _published(server: HttpFront) -> tuple[int, list[str]] | None:
    """The one slice's pool generation and device names (``None`` without exactly one)."""
    slices = _slices(server)
    if len(slices) != 1:
        return None
    spec = slices[0]["spec"]
    return spec["pool"]["generation"], [d["name"] for d in spec["devices"]]


def _owns(publisher: SlicePublisher) -> bool:
    return publisher.publishing


def _held(lease: InstanceLease) -> bool:
    return lease.held


def test_both_instances_register_their_own_sockets_and_share_the_claims(
    server: HttpFront, plugin_dirs: PluginDirs, reference: ReferenceProtos
) -> None:
    old_paths, new_paths = toy_paths(plugin_dirs, OLD_UID), toy_paths(plugin_dirs, NEW_UID)
    assert old_paths.per_instance
    assert new_paths.per_instance
    assert old_paths.registration.name == f"{DRIVER}-0a1b2c3d-reg.sock"
    assert new_paths.dra.name == "dra-4e5f6a7b.sock"
    state_dir = plugin_dirs.root / "toy"
    state_dir.mkdir()
    claim = add_claim(server, "shared", "dev-0")
    old_driver, new_driver = ToyDriver(state_dir), ToyDriver(state_dir)
    old = RunningPlugin(
        toy_settings(plugin_dirs, server, OLD_UID), old_driver, handover_drain_s=0.2
    )
    new: RunningPlugin | None = None
    try:
        new = RunningPlugin(toy_settings(plugin_dirs, server, NEW_UID), new_driver)
        old_info, new_info = register(reference, old_paths), register(reference, new_paths)
        assert (old_info.name, new_info.name) == (DRIVER, DRIVER)
        assert old_info.endpoint == str(old_paths.dra.resolve())
        assert new_info.endpoint == str(new_paths.dra.resolve())
        assert old_paths.registration.exists()
        assert new_paths.registration.exists()

        with (
            grpc.insecure_channel(f"unix://{old_info.endpoint}") as ch_old,
            grpc.insecure_channel(f"unix://{new_info.endpoint}") as ch_new,
        ):
            first = reference.prepare(ch_old, [claim]).claims[claim[2]]
            again = reference.prepare(ch_new, [claim]).claims[claim[2]]
            assert first.error == ""
            assert again.error == ""
            assert first == again
            # The side effect ran once: the new instance found the claim in the checkpoint.
            assert old_driver.prepared == [claim[2]]
            assert new_driver.prepared == []
            assert reference.unprepare(ch_new, [claim]).claims[claim[2]].error == ""
        # The new instance undid what the old one did, from the old one's recorded state.
        (undone,) = new_driver.unprepared
        assert undone.uid == claim[2]
        assert undone.driver_state["marker"] == str(state_dir / claim[2])
        assert not (state_dir / claim[2]).exists()
        assert (
            decode_checkpoint(
                (plugin_dirs.plugins / DRIVER / "checkpoint.json").read_bytes()
            ).claims
            == {}
        )

        old.stop()
        # The old instance took its own sockets with it; the new one's are untouched.
        assert not old_paths.registration.exists()
        assert not old_paths.dra.exists()
        assert new_paths.registration.exists()
        assert new_paths.dra.exists()
        later = add_claim(server, "later", "dev-0")
        with grpc.insecure_channel(f"unix://{new_info.endpoint}") as ch_new:
            assert reference.prepare(ch_new, [later]).claims[later[2]].error == ""
        assert new_driver.prepared == [later[2]]
    finally:
        if new is not None:
            new.stop()
        old.stop_if_running()


def test_only_one_instance_publishes_and_the_new_one_takes_over_when_the_old_stops(
    server: HttpFront, plugin_dirs: PluginDirs
) -> None:
    state_dir = plugin_dirs.root / "toy"
    state_dir.mkdir()
    # The instances disagree on the devices (a new release may publish more): two publishers
    # would rewrite the slice, and bump its generation, on each other's every write.
    old = RunningPlugin(
        toy_settings(plugin_dirs, server, OLD_UID), ToyDriver(state_dir), devices=["dev-0"]
    )
    new: RunningPlugin | None = None
    try:
        wait_for(lambda: _published(server) == (1, ["dev-0"]), "the old instance's slice")
        old_pub = old.runner.publisher
        assert old_pub is not None
        assert _owns(old_pub)
        (before,) = _slices(server)
        new = RunningPlugin(
            toy_settings(plugin_dirs, server, NEW_UID),
            ToyDriver(state_dir),
            devices=["dev-0", "dev-1"],
        )
        new_pub = new.runner.publisher
        assert new_pub is not None
        assert not _owns(new_pub)
        # Wake both publishers: the owner checks and finds nothing to do, the other waits.
        reconciles = old_pub.reconciles
        new_pub.trigger()
        old_pub.trigger()
        wait_for(lambda: old_pub.reconciles > reconciles, "the owner's reconcile")
        assert new_pub.reconciles == 0
        assert _published(server) == (1, ["dev-0"])

        old.stop()
        wait_for(lambda: _published(server) == (2, ["dev-0", "dev-1"]), "the new slice")
        assert _owns(new_pub)
        # The new owner started from the slice on the server: updated, not recreated.
        (after,) = _slices(server)
        assert after["metadata"]["uid"] == before["metadata"]["uid"]
        reconciles = new_pub.reconciles
        new_pub.trigger()
        wait_for(lambda: new_pub.reconciles > reconciles, "a quiet reconcile")
        assert _published(server) == (2, ["dev-0", "dev-1"])
    finally:
        if new is not None:
            new.stop()
        old.stop_if_running()


def test_the_lease_passes_to_the_waiter_when_its_holder_releases_it(tmp_path: Path) -> None:
    first, second = InstanceLease(tmp_path / "lease"), InstanceLease(tmp_path / "lease")
    assert first.try_acquire()
    assert first.held
    assert not second.try_acquire()
    assert not second.held
    assert first.try_acquire(), "taking a lease we hold again is a no-op"
    first.release()
    assert not _held(first)
    assert second.try_acquire()
    second.release()
    second.release()


def test_a_socket_that_another_instance_took_over_is_not_removed(tmp_path: Path) -> None:
    """Classic names have no per-instance part: a stopping instance must not remove the
    socket a newer one bound at the same path (the kubelet would deregister the newer)."""
    path = tmp_path / "dra.sock"

    def bind() -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(os.fspath(path))
        return sock

    ours = bind()
    mine = socket_identity(path)
    path.unlink()
    theirs = bind()
    try:
        assert not remove_own_socket(path, mine)
        assert path.exists()
        assert remove_own_socket(path, socket_identity(path))
        assert not path.exists()
        assert not remove_own_socket(path, None)
    finally:
        ours.close()
        theirs.close()
