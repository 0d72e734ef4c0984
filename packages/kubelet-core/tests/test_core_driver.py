"""The driver-agnostic core with a tiny driver of its own (nothing of the GPU plugin, nothing
of dra_nvlib): registration with a fake kubelet registrar, prepare and unprepare over the DRA
gRPC service, the driver's state handed back at unprepare and, after a crash between
``PrepareStarted`` and ``PrepareCompleted``, at restart; its CDI spec; its slice published
through the core's publisher to the test double of the API server."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from dra_api_types import ResourceClaim
from dra_kube_client.testing import HttpFront
from dra_kubelet_core.allocated import AllocatedDevice
from dra_kubelet_core.allocation_info import DeviceIdentity
from dra_kubelet_core.cdi import CDIKind, ContainerEdits
from dra_kubelet_core.checkpoint import PreparedClaim, PreparedDevice, decode_checkpoint
from dra_kubelet_core.driver import ClaimEdits, ClaimPlan, DriverIdentity, PrepareContext
from dra_kubelet_core.errors import ClaimNotReadyError, ClaimRef, EmptyDeviceEditsError
from dra_kubelet_core.health import HealthHub
from dra_kubelet_core.runner import PluginRunner
from dra_kubelet_core.settings import CommonSettings
from dra_kubelet_core.sockets import SocketPaths
from kubelet_core_support import (
    PluginDirs,
    ReferenceProtos,
    claim_path,
    make_claim,
    plugin_api_server,
)

DRIVER = "test.example.com"
IDENTITY = DriverIdentity(name=DRIVER, cdi=CDIKind(vendor="k8s.test.example.com"))


class _Crash(BaseException):
    """Stands in for the process dying in the middle of a driver's side effects."""


@dataclass
class ToyDriver:
    """Prepares ``dev-N`` devices: one marker file per claim is its side effect."""

    state_dir: Path
    crash_claims: set[str] = field(default_factory=set)
    not_ready: set[str] = field(default_factory=set)
    unprepared: list[PreparedClaim] = field(default_factory=list)
    recovered: dict[str, PreparedClaim] = field(default_factory=dict)

    @property
    def identity(self) -> DriverIdentity:
        return IDENTITY

    def plan(
        self, ref: ClaimRef, claim: ResourceClaim, allocated: Sequence[AllocatedDevice]
    ) -> ClaimPlan[None]:
        if claim.metadata.name in self.not_ready:
            raise ClaimNotReadyError(ref, "daemon not ready yet")
        devices = tuple(
            PreparedDevice(
                request_names=(a.request,),
                pool_name=a.pool_name,
                device_name=a.device_name,
                cdi_device_ids=(IDENTITY.cdi.device_id(ref.uid, a.device_name),),
                driver_state={"slot": i},
            )
            for i, a in enumerate(allocated)
        )
        return ClaimPlan(devices=devices, driver_state={"step": "planned"}, detail=None)

    async def prepare(
        self, ref: ClaimRef, plan: ClaimPlan[None], ctx: PrepareContext
    ) -> ClaimEdits:
        assert ctx.entry.driver_state == {"step": "planned"}
        marker = self.state_dir / ref.uid
        await ctx.record(
            driver_state={"step": "marker", "marker": str(marker)},
            device_states={d.device_name: {"slot": 9} for d in plan.devices},
        )
        marker.write_text("prepared")
        if ref.name in self.crash_claims:
            raise _Crash()
        env = tuple(f"TOY_{d.device_name.upper().replace('-', '_')}=1" for d in plan.devices)
        return ClaimEdits(
            devices=tuple((d.device_name, ContainerEdits(env=env)) for d in plan.devices)
        )

    async def unprepare(self, entry: PreparedClaim, *, claims: Mapping[str, PreparedClaim]) -> None:
        self.unprepared.append(entry)
        marker = entry.driver_state.get("marker")
        if isinstance(marker, str):
            Path(marker).unlink(missing_ok=True)

    async def recover(self, entries: Mapping[str, PreparedClaim]) -> None:
        self.recovered = dict(entries)

    def device_type(self, device: PreparedDevice) -> str:
        return "toy"

    def device_identity(
        self, claim: PreparedClaim, device: PreparedDevice
    ) -> DeviceIdentity | None:
        return DeviceIdentity(uuid=f"GPU-{device.device_name}", index=device.device_name[-1])


def toy_slices(node_name: str) -> Callable[[int], list[dict[str, Any]]]:
    def build(generation: int) -> list[dict[str, Any]]:
        return [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"generateName": f"{node_name}-{DRIVER}-"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node_name,
                    "pool": {"name": node_name, "generation": generation, "resourceSliceCount": 1},
                    "devices": [{"name": "dev-0"}],
                },
            }
        ]

    return build


class RunningPlugin:
    """The runner with :class:`ToyDriver` on its own event loop in a thread."""

    def __init__(self, settings: CommonSettings, driver: ToyDriver) -> None:
        self.driver = driver
        self.runner = PluginRunner(settings, IDENTITY)
        self.hub = HealthHub(settings.node_name)
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()
        assert self._ready.wait(20), "plugin did not start"
        if self._error is not None:
            raise self._error

    def _main(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            ready = asyncio.Event()
            await self.hub.set_devices(["dev-0"])

            async def signal_ready() -> None:
                await ready.wait()
                self._ready.set()

            waiter = asyncio.get_running_loop().create_task(signal_ready())
            await self.runner.run(
                self.driver,
                self._stop,
                slices=toy_slices(self.runner.settings.node_name),
                health=self.hub,
                ready=ready,
            )
            waiter.cancel()

        try:
            asyncio.run(main())
        except BaseException as exc:
            self._error = exc
            self._ready.set()

    def call(self, coro: Any) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    def stop(self) -> None:
        assert self._loop is not None
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        assert not self._thread.is_alive()


@pytest.fixture
def server() -> Iterator[HttpFront]:
    with plugin_api_server("u-n1") as front:
        yield front


def wait_for(check: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def add_claim(server: HttpFront, name: str, device: str) -> tuple[str, str, str]:
    claim = make_claim(name=name, devices=[device], driver=DRIVER)
    server.api.put_object(claim_path("default", name), claim)
    return ("default", name, claim["metadata"]["uid"])


def test_a_driver_on_the_core_registers_prepares_unprepares_recovers_and_publishes(
    server: HttpFront, plugin_dirs: PluginDirs, reference: ReferenceProtos
) -> None:
    settings = CommonSettings(
        node_name="n1",
        cdi_root=plugin_dirs.cdi,
        registrar_dir=plugin_dirs.registrar,
        plugins_dir=plugin_dirs.plugins,
        kubeconfig=str(server.write_kubeconfig(plugin_dirs.root / "kubeconfig")),
        boot_id_file=plugin_dirs.boot_id,
    )
    paths = SocketPaths.build(
        driver_name=DRIVER,
        registrar_dir=plugin_dirs.registrar,
        plugins_dir=plugin_dirs.plugins,
        pod_uid=None,
    )
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
        with grpc.insecure_channel(f"unix://{paths.registration}") as ch:
            info = reference.call(
                ch,
                "pluginregistration.Registration",
                "GetInfo",
                reference.message("pluginregistration.InfoRequest")(),
            )
            reference.call(
                ch,
                "pluginregistration.Registration",
                "NotifyRegistrationStatus",
                reference.message("pluginregistration.RegistrationStatus")(plugin_registered=True),
            )
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
