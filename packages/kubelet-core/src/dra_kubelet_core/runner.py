"""Wiring of the core for any driver: claim source, sockets, the claim engine, the DRA and
health gRPC services, registration, the TCP health check, metrics, the slice publisher, the
periodic stale-claim cleanup, and an orderly shutdown.

A driver's plugin uses the steps in order (the GPU plugin interleaves its own: device
enumeration, health monitor)::

    runner = PluginRunner(settings, identity, metrics)
    async with runner:                       # shutdown in reverse order, whatever fails
        await runner.connect()               # API server (or claims dir), sockets checked
        engine = runner.engine(driver, retry=policy, hooks=hooks)  # checkpoint, CDI, lock
        await engine.start()                 # reboot check, driver.recover(), stale claims
        await runner.serve_dra(engine, health=hub)
        await runner.register()
        await runner.serve_endpoints()       # --healthcheck-port, --http-endpoint
        runner.publish(slices, health=hub)   # when connected to an API server
        runner.cleanup_periodically(engine)
        await runner.wait(stop)

:meth:`PluginRunner.run` does all of it for a driver without extra parts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from types import TracebackType
from typing import Any

import grpc
import grpc.aio
from dra_kube_client import (
    DelegatedAuth,
    KubeApiError,
    KubeConfigError,
    KubeTransport,
    ServingSecurity,
    TlsFilesError,
    path_segment,
)

from dra_kubelet_core.cdi_store import CDIStore
from dra_kubelet_core.checkpoint import CheckpointStore, read_boot_id
from dra_kubelet_core.claim_source import (
    ClaimSource,
    DirectoryClaimSource,
    KubeClaimSource,
)
from dra_kubelet_core.claims import ClaimDriver
from dra_kubelet_core.dra_service import dra_handlers
from dra_kubelet_core.driver import ClaimHooks, Driver, DriverIdentity, PlanT, RetryPolicy
from dra_kubelet_core.errors import ConfigurationError
from dra_kubelet_core.events import EventRecorder, KubeEventRecorder, LogEventRecorder
from dra_kubelet_core.health import ADVERTISED_HEALTH_SERVICES, HealthHub, health_handlers
from dra_kubelet_core.healthcheck import HealthcheckServer
from dra_kubelet_core.metrics import PluginMetrics, serve_metrics
from dra_kubelet_core.node_lock import InstanceLease, NodeLock
from dra_kubelet_core.pod_resources import PodResourcesContainers
from dra_kubelet_core.publisher import SlicePublisher, SliceSource
from dra_kubelet_core.registration import RegistrationServer, supported_versions
from dra_kubelet_core.resource_api import (
    ResourceApi,
    UnsupportedResourceApiError,
    discover_resource_api,
)
from dra_kubelet_core.settings import CommonSettings
from dra_kubelet_core.sockets import (
    SocketPaths,
    bind_unix,
    check_kubelet_dialable,
    remove_own_socket,
    remove_stale_socket,
    socket_identity,
)
from dra_kubelet_core.state import ClaimEngine

__all__ = ["HANDOVER_DRAIN_S", "STOP_JOIN_S", "EngineParts", "PluginRunner"]

log = logging.getLogger(__name__)

#: Seconds an instance with per-instance sockets keeps serving DRA calls after removing its
#: registration socket: the kubelet sees the removal through inotify and moves to the other
#: instance, and a call it sent just before must still find this one answering.
HANDOVER_DRAIN_S = 2.0

#: Seconds the shutdown waits, once the API connections are closed, for the threads that
#: used them (the slice publisher's watch and reconcile) to end. Closing fails their
#: requests at once, so they end in milliseconds; the bound only keeps a thread stuck
#: elsewhere from holding the stop (it is a daemon thread and dies with the process).
STOP_JOIN_S = 5.0

#: The keyword arguments of :class:`ClaimEngine` the runner provides (all but ``driver``,
#: ``retry`` and ``hooks``).
EngineParts = dict[str, Any]


class PluginRunner:
    """Builds and runs the core's parts for one driver; an async context manager that
    stops everything it started, in reverse order, on exit."""

    def __init__(
        self,
        settings: CommonSettings,
        identity: DriverIdentity,
        metrics: PluginMetrics | None = None,
        *,
        handover_drain_s: float = HANDOVER_DRAIN_S,
    ) -> None:
        """Run ``identity``'s plugin with ``settings``; ``metrics`` defaults to a new registry;
        ``handover_drain_s``: see :data:`HANDOVER_DRAIN_S`."""
        self.settings = settings
        self.handover_drain_s = handover_drain_s
        self.identity = identity
        self.metrics = metrics or PluginMetrics()
        self.plugin_dir = settings.plugin_dir_of(identity.name)
        self.transport: KubeTransport | None = None
        self.resource_api = ResourceApi()
        self.node_uid: str | None = None
        self.claims: ClaimSource | None = None
        self.events: EventRecorder = LogEventRecorder(settings.node_name)
        self.sockets: SocketPaths | None = None
        self.publisher: SlicePublisher | None = None
        self.healthcheck: HealthcheckServer | None = None
        self._health_services: Sequence[str] = ()
        self._cleanups: list[Callable[[], object]] = []
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> PluginRunner:
        """Enter: nothing started yet."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Cancel the tasks, then undo every start in reverse order (errors suppressed)."""
        await self._stop_tasks()
        for cleanup in reversed(self._cleanups):
            with contextlib.suppress(Exception):
                result = cleanup()
                if asyncio.iscoroutine(result):
                    await result
        self._cleanups.clear()

    def on_stop(self, cleanup: Callable[[], object]) -> None:
        """Call ``cleanup`` (sync or async) at shutdown, before what was started earlier."""
        self._cleanups.append(cleanup)

    def task(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        """Run ``coro`` until shutdown (cancelled then)."""
        self._tasks.append(asyncio.get_running_loop().create_task(coro, name=name))

    async def connect(self) -> None:
        """Choose the claim source (``--claims-directory`` or the API server, whose Node UID
        owns the slices and events), make the plugin directory, and check that the kubelet
        can dial both sockets before any state is touched.

        Raises:
            ConfigurationError: API server unreachable, or a socket path too long.
        """
        s = self.settings
        if s.claims_directory is not None:
            self.claims = DirectoryClaimSource(s.claims_directory)
            self.events = LogEventRecorder(s.node_name)
        else:
            try:
                transport = KubeTransport.from_kubeconfig(s.kubeconfig or None)
            except KubeConfigError as exc:
                raise ConfigurationError("--kubeconfig", str(exc)) from exc
            self.transport = transport
            self.on_stop(self._close_transport)
            self.node_uid = await asyncio.to_thread(_node_uid, transport, s.node_name)
            try:
                self.resource_api = await asyncio.to_thread(discover_resource_api, transport)
            except (UnsupportedResourceApiError, KubeApiError) as exc:
                raise ConfigurationError("--kubeconfig", str(exc)) from exc
            self.claims = KubeClaimSource(transport, self.resource_api)
            self.events = KubeEventRecorder(
                transport, s.node_name, self.node_uid, component=self.identity.component
            )
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        self.sockets = paths = SocketPaths.build(
            driver_name=self.identity.name,
            registrar_dir=s.registrar_dir,
            plugins_dir=s.plugins_dir,
            pod_uid=s.pod_uid or None,
        )
        # Fail before touching any state: a socket the kubelet cannot dial is never registered.
        check_kubelet_dialable(
            paths.registration.absolute(), setting="--kubelet-registrar-directory-path"
        )
        check_kubelet_dialable(paths.dra.resolve(), setting="--kubelet-plugins-directory-path")

    def engine_parts(self) -> EngineParts:
        """The engine's collaborators under the plugin directory (all but the driver, its
        retry policy and hooks)."""
        if self.claims is None:
            raise RuntimeError("PluginRunner.connect() must run first")
        return {
            "pool_name": self.settings.node_name,
            "claims": self.claims,
            "checkpoints": CheckpointStore(self.plugin_dir / "checkpoint.json"),
            "cdi": CDIStore(self.settings.cdi_root, kind=self.identity.cdi),
            "lock": NodeLock(self.plugin_dir / "prepare.lock"),
            "boot_id": read_boot_id(self.settings.boot_id_file),
            "events": self.events,
            "metrics": self.metrics,
        }

    def engine(
        self,
        driver: Driver[PlanT],
        *,
        retry: RetryPolicy | None = None,
        hooks: ClaimHooks | None = None,
    ) -> ClaimEngine[PlanT]:
        """The claim engine of ``driver`` (call :meth:`ClaimEngine.start` next), with its
        retry policy and hooks."""
        return ClaimEngine(driver=driver, retry=retry, hooks=hooks, **self.engine_parts())

    async def serve_dra(self, engine: ClaimDriver, *, health: HealthHub | None) -> None:
        """Serve the DRA services (v1, v1beta1) and, with ``health``, the health stream."""
        paths = self._paths()
        server = grpc.aio.server()
        handlers = dra_handlers(engine, self.metrics, self.identity.name)
        if health is not None:
            handlers += health_handlers(health)
            self._health_services = ADVERTISED_HEALTH_SERVICES
        server.add_generic_rpc_handlers(tuple(handlers))
        paths.dra.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_socket(paths.dra)
        bind_unix(server, paths.dra.resolve())
        bound = socket_identity(paths.dra)
        await server.start()

        async def stop() -> None:
            await server.stop(grace=5.0)
            # Per-instance sockets are left behind by nobody else: a new instance never
            # removes another's (the kubelet would deregister it).
            remove_own_socket(paths.dra, bound)

        self.on_stop(stop)
        log.info("DRA services serving", extra={"event": "dra_serving", "socket": str(paths.dra)})

    async def register(self) -> None:
        """Register with the kubelet (after :meth:`serve_dra`); unregisters first at stop,
        so the kubelet stops sending new calls before the services go (with per-instance
        sockets, after :attr:`handover_drain_s` more seconds of serving)."""
        paths = self._paths()
        registration = RegistrationServer(
            socket_path=paths.registration,
            driver_name=self.identity.name,
            endpoint=paths.dra.resolve(),
            versions=supported_versions(health_services=self._health_services),
        )
        await registration.start()

        async def unregister() -> None:
            await registration.stop()
            if paths.per_instance and self.handover_drain_s > 0:
                log.info(
                    "unregistered; serving calls in flight before stopping",
                    extra={"event": "handover_drain", "seconds": self.handover_drain_s},
                )
                await asyncio.sleep(self.handover_drain_s)

        self.on_stop(unregister)

    async def serve_endpoints(self) -> None:
        """The TCP health check (``--healthcheck-port``) and metrics (``--http-endpoint``)."""
        s = self.settings
        paths = self._paths()
        if s.healthcheck_port >= 0:
            self.healthcheck = HealthcheckServer(
                port=s.healthcheck_port, registration=paths.registration, dra=paths.dra
            )
            await self.healthcheck.start()
            self.on_stop(self.healthcheck.stop)
        if s.http_endpoint:
            host, _, port = s.http_endpoint.rpartition(":")
            host = host or "0.0.0.0"
            auth = None
            if not s.metrics_insecure:
                if self.transport is None:
                    raise ConfigurationError(
                        "--metrics-insecure",
                        "secure metrics review tokens with the API server; without one "
                        "(--claims-directory) set --metrics-insecure=true",
                    )
                auth = DelegatedAuth(self.transport)
            security = ServingSecurity(
                insecure=s.metrics_insecure,
                cert_file=s.metrics_tls_cert_file,
                key_file=s.metrics_tls_key_file,
            )
            try:
                tls = security.tls_context(host)
            except TlsFilesError as exc:
                raise ConfigurationError("--metrics-tls-cert-file", str(exc)) from exc
            if s.pod_resources_socket is not None:
                self.metrics.set_container_source(PodResourcesContainers(s.pod_resources_socket))
            http_server = serve_metrics(
                self.metrics.registry, host, int(port), s.metrics_path, tls=tls, auth=auth
            )
            # Undone in reverse: the serving loop ends, then the port is freed.
            self.on_stop(http_server.server_close)
            self.on_stop(http_server.shutdown)

    def publish(self, slices: SliceSource, *, health: HealthHub) -> SlicePublisher | None:
        """Keep ``slices`` published (``None`` without an API server); a change of ``health``
        or :meth:`SlicePublisher.trigger` (the driver's devices changed) republishes. Of two
        instances on the node only the one holding ``publisher.lock`` publishes."""
        if self.transport is None:
            return None
        self.publisher = publisher = SlicePublisher(
            transport=self.transport,
            driver_name=self.identity.name,
            node_name=self.settings.node_name,
            slices=slices,
            health=health,
            metrics=self.metrics,
            api=self.resource_api,
            lease=InstanceLease(self.plugin_dir / "publisher.lock"),
        )
        self.task(publisher.run(), name="publisher")
        return publisher

    def cleanup_periodically(self, engine: ClaimEngine[Any]) -> None:
        """Drop half-prepared claims whose ResourceClaim is gone, every cleanup interval."""
        self.task(
            _every(self.settings.stale_claim_cleanup_interval_s, engine.cleanup_stale),
            name="stale-cleanup",
        )

    async def wait(self, stop: asyncio.Event, *, health: HealthHub | None = None) -> None:
        """Serve until ``stop`` is set; then close ``health`` streams and stop the tasks."""
        try:
            await stop.wait()
        finally:
            log.info("shutting down", extra={"event": "stopping"})
            if health is not None:
                await health.close()
            await self._stop_tasks()

    async def run(
        self,
        driver: Driver[PlanT],
        stop: asyncio.Event,
        *,
        slices: SliceSource | None = None,
        health: HealthHub | None = None,
        ready: asyncio.Event | None = None,
    ) -> ClaimEngine[PlanT]:
        """All steps for ``driver``: serve until ``stop``, then shut down (returns the engine,
        for diagnostics). ``health`` feeds the health stream and the slices' republishing."""
        async with self:
            await self.connect()
            engine = self.engine(driver)
            await engine.start()
            await self.serve_dra(engine, health=health)
            await self.register()
            await self.serve_endpoints()
            if slices is not None:
                self.publish(slices, health=health or HealthHub(self.settings.node_name))
            self.cleanup_periodically(engine)
            if ready is not None:
                ready.set()
            await self.wait(stop, health=health)
        return engine

    def _paths(self) -> SocketPaths:
        if self.sockets is None:
            raise RuntimeError("PluginRunner.connect() must run first")
        return self.sockets

    async def _close_transport(self) -> None:
        """The last step of the shutdown: close the API connections, those in use too, so
        that no request or watch in flight (the publisher's, an event's, a claim read of a
        call the DRA server gave up on) holds the stop, nor the join of the event loop's
        executor that follows it; then wait, at most :data:`STOP_JOIN_S`, for the
        publisher's threads."""
        if self.transport is None:
            return
        self.transport.close()
        publisher = self.publisher
        if publisher is not None and not await asyncio.to_thread(publisher.join, STOP_JOIN_S):
            log.warning(
                "the ResourceSlice publisher's threads did not end",
                extra={"event": "publisher_not_stopped", "seconds": STOP_JOIN_S},
            )

    async def _stop_tasks(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()


async def _every(interval_s: float, action: Callable[[], Awaitable[object]]) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            await action()
        except Exception:
            log.exception("stale claim cleanup failed", extra={"event": "cleanup_failed"})


def _node_uid(transport: KubeTransport, node_name: str) -> str | None:
    try:
        node = transport.request("GET", f"/api/v1/nodes/{path_segment(node_name)}")
    except KubeApiError as exc:
        if exc.status == 0:
            raise ConfigurationError("--kubeconfig", f"API server unreachable: {exc}") from exc
        log.warning(
            "cannot read the Node; slices will have no owner reference",
            extra={"event": "node_get_failed", "error": str(exc)},
        )
        return None
    meta = node.get("metadata") or {}
    uid = meta.get("uid")
    return uid if isinstance(uid, str) else None
