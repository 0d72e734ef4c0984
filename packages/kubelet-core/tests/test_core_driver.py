"""The driver-agnostic core with a tiny driver of its own (nothing of the GPU plugin, nothing
of dra_nvlib): registration with a fake kubelet registrar, prepare and unprepare over the DRA
gRPC service, the driver's state handed back at unprepare and, after a crash between
``PrepareStarted`` and ``PrepareCompleted``, at restart; its CDI spec; its slice published
through the core's publisher to the test double of the API server."""

from __future__ import annotations

import json
from collections.abc import Iterator

import grpc
import pytest
from dra_kube_client.testing import HttpFront
from dra_kubelet_core.cdi import ContainerEdits
from dra_kubelet_core.checkpoint import PreparedDevice, decode_checkpoint
from dra_kubelet_core.driver import ClaimEdits
from dra_kubelet_core.errors import ClaimRef, EmptyDeviceEditsError
from kubelet_core_support import PluginDirs, ReferenceProtos, plugin_api_server
from toy_plugin import (
    DRIVER,
    IDENTITY,
    RunningPlugin,
    ToyDriver,
    add_claim,
    register,
    toy_paths,
    toy_settings,
    wait_for,
)


@pytest.fixture
def server() -> Iterator[HttpFront]:
    with plugin_api_server("u-n1") as front:
        yield front


def test_a_driver_on_the_core_registers_prepares_unprepares_recovers_and_publishes(
    server: HttpFront, plugin_dirs: PluginDirs, reference: ReferenceProtos
) -> None:
    settings = toy_settings(plugin_dirs, server)
    paths = toy_paths(plugin_dirs)
    checkpoint = plugin_dirs.plugins / DRIVER / "checkpoint.json"
    state_dir = plugin_dirs.root / "toy"
    state_dir.mkdir()
    good = add_claim(server, "good", "dev-0")
    crashed = add_claim(server, "crashed", "dev-1")
    waiting = add_claim(server, "waiting", "dev-2")
    driver = ToyDriver(state_dir, crash_claims={"crashed"}, not_ready={"waiting"})
    plugin = RunningPlugin(settings, driver)
    try:
        # The fake kubelet registrar: GetInfo on the registration socket, then the status.
        info = register(reference, paths)
        assert (info.type, info.name) == ("DRAPlugin", DRIVER)
        assert info.endpoint == str(paths.dra.resolve())
        assert "v1alpha1.DRAResourceHealth" in info.supported_versions

        with grpc.insecure_channel(f"unix://{info.endpoint}") as ch:
            response = reference.prepare(ch, [good, waiting])
            prepared = response.claims[good[2]]
            assert prepared.error == ""
            (device,) = prepared.devices
            assert (device.pool_name, device.device_name) == ("n1", "dev-0")
            assert list(device.cdi_device_ids) == [f"k8s.test.example.com/claim={good[2]}-dev-0"]
            assert "daemon not ready yet" in response.claims[waiting[2]].error

            spec_path = plugin_dirs.cdi / f"k8s.test.example.com-claim_{good[2]}.json"
            spec = json.loads(spec_path.read_text())
            assert spec["kind"] == "k8s.test.example.com/claim"
            assert spec["devices"] == [
                {"name": f"{good[2]}-dev-0", "containerEdits": {"env": ["TOY_DEV_0=1"]}}
            ]
            stored = decode_checkpoint(checkpoint.read_bytes()).claims[good[2]]
            assert stored.state.value == "PrepareCompleted"
            assert stored.driver_state["step"] == "marker"
            assert stored.devices[0].driver_state == {"slot": 9}

            # The driver dies between PrepareStarted and PrepareCompleted.
            assert "internal error" in reference.prepare(ch, [crashed]).claims[crashed[2]].error
            half = decode_checkpoint(checkpoint.read_bytes()).claims[crashed[2]]
            assert half.state.value == "PrepareStarted"
            assert half.driver_state["step"] == "marker"
            assert (state_dir / crashed[2]).exists()

            assert reference.unprepare(ch, [good]).claims[good[2]].error == ""
        assert not spec_path.exists()
        (undone,) = driver.unprepared
        assert undone.uid == good[2]
        assert undone.driver_state["step"] == "marker"
        assert not (state_dir / good[2]).exists()

        # The slice is published through the core's publisher.
        wait_for(lambda: len(server.api.kind_items("resourceslices")) == 1, "the toy slice")
        (published,) = server.api.kind_items("resourceslices")
        assert published["spec"]["driver"] == DRIVER
        assert published["spec"]["pool"]["generation"] == 1
        assert [d["name"] for d in published["spec"]["devices"]] == ["dev-0"]
    finally:
        plugin.stop()

    # Restart: the driver gets every entry back, the half-prepared one with its state.
    restarted = ToyDriver(state_dir)
    plugin = RunningPlugin(settings, restarted)
    try:
        assert set(restarted.recovered) == {crashed[2]}
        entry = restarted.recovered[crashed[2]]
        assert entry.state.value == "PrepareStarted"
        assert entry.driver_state == {"step": "marker", "marker": str(state_dir / crashed[2])}
        assert entry.devices[0].driver_state == {"slot": 9}
        with grpc.insecure_channel(f"unix://{paths.dra.resolve()}") as ch:
            assert reference.unprepare(ch, [crashed]).claims[crashed[2]].error == ""
        assert [e.uid for e in restarted.unprepared] == [crashed[2]]
        assert not (state_dir / crashed[2]).exists()
        assert decode_checkpoint(checkpoint.read_bytes()).claims == {}
    finally:
        plugin.stop()


def _prepared(name: str, *, cdi: bool) -> PreparedDevice:
    ids = (IDENTITY.cdi.device_id("u1", name),) if cdi else ()
    return PreparedDevice(
        request_names=("r",), pool_name="n1", device_name=name, cdi_device_ids=ids
    )


def test_spec_devices_are_those_with_a_cdi_id_and_a_device_without_edits_is_refused() -> None:
    """The CDI library refuses a device without edits ("invalid device, empty device edits"):
    a device that names no CDI device stays out of the spec; one that names one must have
    edits, else the claim fails naming the device instead of the container later."""
    ref = ClaimRef(namespace="ns", name="c", uid="u1")
    node = ContainerEdits(env=("A=1",))
    edits = ClaimEdits(devices=(("dev-0", node), ("dev-1", ContainerEdits())))
    planned = [_prepared("dev-0", cdi=True), _prepared("dev-1", cdi=False)]
    assert edits.injected(ref, planned) == (("dev-0", node),)
    with pytest.raises(EmptyDeviceEditsError) as err:
        edits.injected(ref, [_prepared("dev-0", cdi=True), _prepared("dev-1", cdi=True)])
    assert "ns/c" in str(err.value)
    assert "device dev-1 has no container edits" in str(err.value)
