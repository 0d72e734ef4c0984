"""The plugin's API-server edge (kubernetes client transport, claim reads, slice publishing,
events) against the shared in-memory API server over real HTTP, with a kubeconfig."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from dra_api_types import ResourceSlice
from dra_kube_client.testing import HttpFront
from dra_kubelet_core.checkpoint import decode_checkpoint
from dra_nvlib import DeviceLibConfig, open_device_lib
from kubelet_plugin_support import (
    RESOURCE_SLICES,
    PluginDirs,
    PluginProcess,
    ReferenceProtos,
    claim_path,
    make_claim,
    plugin_api_server,
)


def wait_for(check: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def server() -> Iterator[HttpFront]:
    with plugin_api_server("node-uid-123") as front:
        yield front


def slices(server: HttpFront) -> list[dict[str, Any]]:
    """The stored ResourceSlices."""
    return server.api.kind_items("resourceslices")


def test_plugin_publishes_republishes_and_prepares_through_the_api_server(
    server: HttpFront, plugin_dirs: PluginDirs, reference: ReferenceProtos
) -> None:
    kubeconfig = server.write_kubeconfig(plugin_dirs.root / "kubeconfig")
    proc = PluginProcess(
        plugin_dirs, extra=["--kubeconfig", str(kubeconfig)], claims_directory=False
    )
    proc.start()
    try:
        wait_for(lambda: len(slices(server)) == 1, "the first ResourceSlice")
        (first,) = slices(server)
        parsed = ResourceSlice.from_dict(first, validate=True)
        assert parsed.spec.node_name == "n1"
        owner = first["metadata"]["ownerReferences"][0]
        assert owner["uid"] == "node-uid-123"
        generation = first["spec"]["pool"]["generation"]

        # The kubelet wipes the node's slices.
        server.api.request("DELETE", f"{RESOURCE_SLICES}/{first['metadata']['name']}")
        wait_for(lambda: len(slices(server)) == 1, "republication after deletion", timeout_s=10)
        (again,) = slices(server)
        assert again["spec"]["pool"]["generation"] > generation

        claim = make_claim(name="c1", devices=["gpu-6"])
        claim["metadata"]["managedFields"] = [{"manager": "kube-scheduler"}]
        claim["status"]["allocation"]["futureField"] = {"x": 1}  # newer server: kept, not fatal
        server.api.put_object(claim_path("default", "c1"), claim)
        uid = claim["metadata"]["uid"]
        with proc.channel() as ch:
            answer = reference.prepare(ch, [("default", "c1", uid)]).claims[uid]
            assert answer.error == ""
            assert [d.device_name for d in answer.devices] == ["gpu-6"]
            missing = reference.prepare(ch, [("default", "nope", "uid-nope")])
            assert "not found" in missing.claims["uid-nope"].error
    finally:
        proc.stop()
    assert server.authorizations == {"Bearer test-token"}


def test_corrupt_checkpoint_is_reported_as_a_node_event(
    server: HttpFront, plugin_dirs: PluginDirs
) -> None:
    plugin_dirs.plugin_dir.mkdir(parents=True, exist_ok=True)
    plugin_dirs.checkpoint.write_text('{"checksum": "sha256:' + "1" * 64 + '", "version": 1}')
    kubeconfig = server.write_kubeconfig(plugin_dirs.root / "kubeconfig")
    proc = PluginProcess(
        plugin_dirs, extra=["--kubeconfig", str(kubeconfig)], claims_directory=False
    )
    proc.start()
    try:
        wait_for(lambda: bool(server.api.kind_items("events")), "the node event")
    finally:
        proc.stop()
    (event,) = server.api.kind_items("events")
    assert event["reason"] == "CheckpointCorrupt"
    assert event["type"] == "Warning"
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "n1",
        "uid": "node-uid-123",
    }
    assert "checksum mismatch" in event["message"]
    decode_checkpoint(plugin_dirs.checkpoint.read_bytes())  # a fresh, valid checkpoint
    assert list(plugin_dirs.plugin_dir.glob("checkpoint.json.corrupt-*"))


def test_changed_devices_are_republished(server: HttpFront, plugin_dirs: PluginDirs) -> None:
    kubeconfig = server.write_kubeconfig(plugin_dirs.root / "kubeconfig")
    proc = PluginProcess(
        plugin_dirs,
        fake_gpus="1xA100-40GB:mig,1xA100-40GB",
        extra=["--kubeconfig", str(kubeconfig), "--device-refresh-interval", "0.3"],
        claims_directory=False,
    )
    proc.start()

    def names() -> list[str]:
        items = slices(server)
        if len(items) != 1:
            return []
        return [d["name"] for d in items[0]["spec"]["devices"]]

    try:
        wait_for(lambda: names() == ["gpu-1"], "the slice without the MIG-enabled parent")
        config = DeviceLibConfig(
            backend="fake",
            node_name="n1",
            fake_state_path=plugin_dirs.plugin_dir / "fake-gpus.json",
        )
        with open_device_lib(config) as lib:
            parent = lib.gpus()[0]
            lib.create_mig_device(parent.uuid, profile_id=19, placement_start=0)
        wait_for(lambda: names() == ["gpu-0-mig-1g5gb-19-0", "gpu-1"], "the new MIG device")
    finally:
        proc.stop()
