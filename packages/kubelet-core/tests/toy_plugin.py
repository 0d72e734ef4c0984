"""A tiny driver on the core alone (nothing of the GPU plugin, nothing of dra_nvlib) and a
runner that serves it on an event loop in a thread: the core's tests run one or two of them
(two plugin instances on one plugin directory, as in a surge rollout)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from dra_api_types import ResourceClaim
from dra_kube_client.testing import HttpFront
from dra_kubelet_core.allocated import AllocatedDevice
from dra_kubelet_core.allocation_info import DeviceIdentity
from dra_kubelet_core.cdi import CDIKind, ContainerEdits
from dra_kubelet_core.checkpoint import PreparedClaim, PreparedDevice
from dra_kubelet_core.driver import ClaimEdits, ClaimPlan, DriverIdentity, PrepareContext
from dra_kubelet_core.errors import ClaimNotReadyError, ClaimRef
from dra_kubelet_core.health import HealthHub
from dra_kubelet_core.runner import PluginRunner
from dra_kubelet_core.settings import CommonSettings
from dra_kubelet_core.sockets import SocketPaths
from kubelet_core_support import PluginDirs, ReferenceProtos, claim_path, make_claim

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
    prepared: list[str] = field(default_factory=list)
    recovered: dict[str, PreparedClaim] = field(default_factory=dict)

    @property
    def identity(self) -> DriverIdentity:
        """:data:`IDENTITY`: ``test.example.com`` with its test CDI kind."""
        return IDENTITY

    def plan(
        self, ref: ClaimRef, claim: ResourceClaim, allocated: Sequence[AllocatedDevice]
    ) -> ClaimPlan[None]:
        """One device per allocated result, its slot in ``driver_state``; a claim named in
        ``not_ready`` raises :class:`ClaimNotReadyError`."""
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
        """Record the marker, then write it; a claim named in ``crash_claims`` dies there
        (:class:`_Crash`). Edits: one ``TOY_<DEVICE>=1`` variable per device."""
        assert ctx.entry.driver_state == {"step": "planned"}
        marker = self.state_dir / ref.uid
        await ctx.record(
            driver_state={"step": "marker", "marker": str(marker)},
            device_states={d.device_name: {"slot": 9} for d in plan.devices},
        )
        marker.write_text("prepared")
        self.prepared.append(ref.uid)
        if ref.name in self.crash_claims:
            raise _Crash()
        env = tuple(f"TOY_{d.device_name.upper().replace('-', '_')}=1" for d in plan.devices)
        return ClaimEdits(
            devices=tuple((d.device_name, ContainerEdits(env=env)) for d in plan.devices)
        )

    async def unprepare(self, entry: PreparedClaim, *, claims: Mapping[str, PreparedClaim]) -> None:
        """Note the entry in ``unprepared`` and remove its marker file, if it recorded one."""
        self.unprepared.append(entry)
        marker = entry.driver_state.get("marker")
        if isinstance(marker, str):
            Path(marker).unlink(missing_ok=True)

    async def recover(self, entries: Mapping[str, PreparedClaim]) -> None:
        """Keep ``entries`` in ``recovered`` for the tests to read; nothing to repair."""
        self.recovered = dict(entries)

    def device_type(self, device: PreparedDevice) -> str:
        """``toy`` for every device."""
        return "toy"

    def device_identity(
        self, claim: PreparedClaim, device: PreparedDevice
    ) -> DeviceIdentity | None:
        """A made-up GPU ``GPU-<device>`` whose index is the device name's last character."""
        return DeviceIdentity(uuid=f"GPU-{device.device_name}", index=device.device_name[-1])


def toy_slices(
    node_name: str, devices: Sequence[str] = ("dev-0",)
) -> Callable[[int], list[dict[str, Any]]]:
    """The toy driver's one slice of ``devices`` in the node's pool."""

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
                    "devices": [{"name": d} for d in devices],
                },
            }
        ]

    return build


class RunningPlugin:
    """The runner with :class:`ToyDriver` on its own event loop in a thread, publishing
    ``devices`` (``handover_drain_s``: the runner's)."""

    def __init__(
        self,
        settings: CommonSettings,
        driver: ToyDriver,
        *,
        devices: Sequence[str] = ("dev-0",),
        handover_drain_s: float = 0.0,
    ) -> None:
        self.driver = driver
        self.devices = tuple(devices)
        self.runner = PluginRunner(settings, IDENTITY, handover_drain_s=handover_drain_s)
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
            await self.hub.set_devices(self.devices)

            async def signal_ready() -> None:
                await ready.wait()
                self._ready.set()

            waiter = asyncio.get_running_loop().create_task(signal_ready())
            await self.runner.run(
                self.driver,
                self._stop,
                slices=toy_slices(self.runner.settings.node_name, self.devices),
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
        """Run ``coro`` on the plugin's event loop and return its result."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    def stop(self) -> None:
        """Stop the plugin as SIGTERM does and wait until its runner returned."""
        assert self._loop is not None
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        assert not self._thread.is_alive()

    def stop_if_running(self) -> None:
        """:meth:`stop` unless it stopped already (cleanup after a failed assertion)."""
        if self._thread.is_alive():
            self.stop()


def wait_for(check: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def add_claim(server: HttpFront, name: str, device: str) -> tuple[str, str, str]:
    """An allocated claim of ``device`` on the API server; its ``(namespace, name, uid)``."""
    claim = make_claim(name=name, devices=[device], driver=DRIVER)
    server.api.put_object(claim_path("default", name), claim)
    return ("default", name, claim["metadata"]["uid"])


def toy_settings(dirs: PluginDirs, server: HttpFront, pod_uid: str = "") -> CommonSettings:
    """The core's settings for a toy plugin on node ``n1`` in ``dirs``, talking to ``server``."""
    return CommonSettings(
        node_name="n1",
        cdi_root=dirs.cdi,
        registrar_dir=dirs.registrar,
        plugins_dir=dirs.plugins,
        kubeconfig=str(server.write_kubeconfig(dirs.root / "kubeconfig")),
        boot_id_file=dirs.boot_id,
        pod_uid=pod_uid,
    )


def toy_paths(dirs: PluginDirs, pod_uid: str | None = None) -> SocketPaths:
    """The toy plugin's sockets in ``dirs`` (per instance with ``pod_uid``)."""
    return SocketPaths.build(
        driver_name=DRIVER,
        registrar_dir=dirs.registrar,
        plugins_dir=dirs.plugins,
        pod_uid=pod_uid,
    )


def register(reference: ReferenceProtos, paths: SocketPaths) -> Any:
    """What the kubelet's plugin watcher does with a new registration socket: GetInfo, then
    the registration status; returns the info."""
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
    return info
