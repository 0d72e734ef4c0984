"""Publishes the node's ResourceSlices and keeps them published.

Reconciles the desired slices (built by the driver: a :data:`SliceSource`, e.g. the GPU
plugin's :func:`~dra_kubelet_plugin.slices.gpu_slice_source`) with what the API server holds
for this node and driver: creates, updates and deletes slices,
bumping the pool generation on every change. A watch on the node's slices triggers a
reconcile within seconds when they are deleted (the kubelet wipes a node's slices at its
start and 30 s after the driver disconnects) or changed (a
:class:`~dra_kube_client.informers.Informer`: list, watch, relist on 410, jittered backoff);
health changes do too, and a periodic resync covers a broken watch.

The API server may store less than we send: with the ``DRADeviceTaints`` gate off it drops
device ``taints``. Comparing the desired slices with the stored ones would then find a
difference on every reconcile and PUT (and bump the generation) forever, so the publisher
remembers, per slice, the resourceVersion the server answered our last write with and what we
sent: a slice nobody changed since, for unchanged desired content, is up to date whatever the
server kept. A plugin restart forgets this and writes at most once more.

Two plugin instances overlap on a node during a surge rollout; only the one holding the
instance lease (:class:`~dra_kubelet_core.node_lock.InstanceLease`) publishes, so their
slices never flap between two views. The other waits for the lease and takes over, from
the slices as the server holds them, when the first stops.

Stopping (cancelling :meth:`SlicePublisher.run`) never waits for the API server: a
reconcile's request in flight goes on until it is answered or the transport is closed
(which fails it at once), and keeps the lease until then; :meth:`SlicePublisher.join`
waits for the publisher's threads after that.

The slices are built and compared as ``resource.k8s.io/v1``; on a server that serves only a
beta version (Kubernetes 1.32, 1.33) they are written and read in that version
(:class:`~dra_kubelet_core.resource_api.ResourceApi`, found by discovery).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dra_api_types import ResourceSlice, ValidationError
from dra_kube_client import Backoff, JsonTransport, KubeApiError, path_segment
from dra_kube_client.informers import Informer, Listener, Resource, Store, metadata_only

from dra_kubelet_core.health import HealthHub
from dra_kubelet_core.metrics import PluginMetrics
from dra_kubelet_core.node_lock import InstanceLease
from dra_kubelet_core.resource_api import ResourceApi

__all__ = ["SlicePublisher", "SliceSource", "slices_equal"]

#: The driver's desired ResourceSlices of this node's pool for a pool ``generation`` (full
#: objects, as ``resource.k8s.io/v1`` JSON); called on every reconcile, so it reads the
#: driver's current devices and health.
SliceSource = Callable[[int], list[dict[str, Any]]]

log = logging.getLogger(__name__)


def _comparable(slice_spec: dict[str, Any]) -> dict[str, Any]:
    """The parts of a slice spec we own, with server-filled taint timestamps removed."""
    devices = []
    for device in slice_spec.get("devices") or []:
        d = dict(device)
        if d.get("taints"):
            d["taints"] = [{k: v for k, v in t.items() if k != "timeAdded"} for t in d["taints"]]
        devices.append(d)
    pool = slice_spec.get("pool") or {}
    return {
        "driver": slice_spec.get("driver"),
        "nodeName": slice_spec.get("nodeName"),
        "poolName": pool.get("name"),
        "count": pool.get("resourceSliceCount"),
        "devices": devices,
    }


def _parse(raw: dict[str, Any]) -> dict[str, Any] | None:
    """A slice as the typed model reads it (so stored and sent compare alike), or ``None``."""
    try:
        return ResourceSlice.from_dict(raw).to_dict()
    except ValidationError as exc:
        log.warning(
            "ignoring unparsable ResourceSlice",
            extra={"event": "slice_unparsable", "error": str(exc)},
        )
        return None


def slices_equal(existing: Sequence[dict[str, Any]], desired: Sequence[dict[str, Any]]) -> bool:
    """Whether the existing slices already publish exactly the desired devices, in one
    generation."""
    if len(existing) != len(desired):
        return False
    generations = {(s.get("spec") or {}).get("pool", {}).get("generation") for s in existing}
    if len(generations) != 1:
        return False
    return all(
        _comparable(e.get("spec") or {}) == _comparable(d["spec"])
        for e, d in zip(existing, desired, strict=True)
    )


@dataclass(frozen=True)
class _Written:
    """What we sent in our last write of one slice, and the version the server stored."""

    resource_version: str
    sent: dict[str, Any]


def _dropped_fields(sent: dict[str, Any], stored: dict[str, Any]) -> list[str]:
    """Device fields present in ``sent`` but absent from ``stored`` (what the server drops)."""
    dropped: set[str] = set()
    for ours, theirs in zip(sent.get("devices") or [], stored.get("devices") or [], strict=False):
        dropped.update(k for k in ours if k not in theirs)
    return sorted(dropped)


class SlicePublisher:
    """Keeps this node's pool of ``driver`` published on the API server."""

    def __init__(
        self,
        *,
        transport: JsonTransport,
        driver_name: str,
        node_name: str,
        slices: SliceSource,
        health: HealthHub,
        metrics: PluginMetrics,
        resync_s: float = 30.0,
        api: ResourceApi | None = None,
        lease: InstanceLease | None = None,
    ) -> None:
        """Publish ``slices(generation)`` as the pool of ``driver_name`` on ``node_name``; a
        change of ``health`` (or :meth:`trigger`) reconciles at once; ``resync_s`` bounds the
        time without a check; ``api``: the served version (default v1); ``lease``: publish
        only while holding it (``None``: always)."""
        self._transport = transport
        self._api = api or ResourceApi()
        self._driver_name = driver_name
        self._node_name = node_name
        self._slices = slices
        self._health = health
        self._metrics = metrics
        self._resync_s = resync_s
        self._lease = lease
        self._trigger = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop reconciling, once run
        self._stop = threading.Event()
        # Whether a reconcile runs on its worker thread, and whether run() has ended; both
        # decide who gives the lease up (see _release_lease).
        self._state = threading.Condition()
        self._in_flight = False
        self._stopped = False
        self._watcher: threading.Thread | None = None
        self.reconciles = 0
        self._last_generation = 0
        self._written: dict[str, _Written] = {}
        self._warned_dropped: set[str] = set()

    def trigger(self) -> None:
        """Ask for a reconcile soon (from any thread)."""
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        loop = self._loop
        if loop is None or loop is here:
            self._trigger.set()
            return
        # An asyncio.Event set from another thread does not wake the loop waiting on it: the
        # reconcile would wait for the next resync.
        with contextlib.suppress(RuntimeError):  # the loop is closed: shutting down
            loop.call_soon_threadsafe(self._trigger.set)

    def _selector(self) -> dict[str, str]:
        return {"fieldSelector": f"spec.nodeName={self._node_name},spec.driver={self._driver_name}"}

    def _v1(self, raw: Any) -> dict[str, Any] | None:
        """A slice the server returned, as the typed model reads it in v1 (or ``None``)."""
        if not isinstance(raw, dict):
            return None
        try:
            return _parse(self._api.to_v1(raw, "ResourceSlice"))
        except ValidationError as exc:
            log.warning(
                "ignoring unconvertible ResourceSlice",
                extra={"event": "slice_unparsable", "error": str(exc)},
            )
            return None

    def _list(self) -> list[dict[str, Any]]:
        data = self._transport.request(
            "GET",
            f"/apis/resource.k8s.io/{self._api.version}/resourceslices",
            query=self._selector(),
        )
        items: list[dict[str, Any]] = []
        for raw in data.get("items") or []:
            parsed = self._v1(raw)
            if parsed is None:
                continue
            # Guard against a server that ignores the field selector.
            spec = parsed.get("spec") or {}
            if spec.get("nodeName") == self._node_name and (
                spec.get("driver") == self._driver_name
            ):
                items.append(parsed)
        return sorted(items, key=lambda s: str(s["metadata"].get("name", "")))

    def reconcile_once(self) -> bool:
        """Make the API server hold exactly the desired slices; return whether it changed."""
        existing = self._list()
        # Never reuse a generation, even after our slices were deleted: consumers that saw
        # the old slices must treat the new ones as newer.
        current_gen = max(
            (int((s.get("spec") or {}).get("pool", {}).get("generation") or 0) for s in existing),
            default=0,
        )
        current_gen = max(current_gen, self._last_generation if not existing else 0)
        desired = self._slices(current_gen)
        self.reconciles += 1
        if existing and (
            slices_equal(existing, desired) or self._unchanged_since_written(existing, desired)
        ):
            return False
        desired = self._slices(current_gen + 1)
        self._last_generation = current_gen + 1
        for i, body in enumerate(desired):
            if i < len(existing):
                old = existing[i]
                meta: dict[str, Any] = dict(old["metadata"])
                new_meta: dict[str, Any] = body["metadata"]
                body = {
                    **body,
                    "metadata": {
                        **meta,
                        **{k: v for k, v in new_meta.items() if k != "generateName"},
                    },
                }
                name = str(meta["name"])
                stored = self._transport.request(
                    "PUT",
                    f"/apis/resource.k8s.io/{self._api.version}/resourceslices/{path_segment(name)}",
                    body=self._api.slice_from_v1(body),
                )
                self._metrics.slice_publications.labels(operation="update").inc()
            else:
                stored = self._transport.request(
                    "POST",
                    f"/apis/resource.k8s.io/{self._api.version}/resourceslices",
                    body=self._api.slice_from_v1(body),
                )
                self._metrics.slice_publications.labels(operation="create").inc()
            self._remember(body, stored)
        for old in existing[len(desired) :]:
            name = str(old["metadata"]["name"])
            self._written.pop(name, None)
            try:
                self._transport.request(
                    "DELETE",
                    f"/apis/resource.k8s.io/{self._api.version}/resourceslices/{path_segment(name)}",
                )
            except KubeApiError as exc:
                if exc.status != 404:
                    raise
            self._metrics.slice_publications.labels(operation="delete").inc()
        log.info(
            "published ResourceSlices",
            extra={
                "event": "slices_published",
                "slices": len(desired),
                "generation": current_gen + 1,
                "devices": sum(len((d.get("spec") or {}).get("devices") or []) for d in desired),
            },
        )
        return True

    def _unchanged_since_written(
        self, existing: Sequence[dict[str, Any]], desired: Sequence[dict[str, Any]]
    ) -> bool:
        """Whether every existing slice is the one our last write stored (same
        resourceVersion) and the desired content is what that write sent."""
        if len(existing) != len(desired):
            return False
        for e, d in zip(existing, desired, strict=True):
            written = self._written.get(str(e["metadata"].get("name", "")))
            if written is None:
                return False
            if written.resource_version != str(e["metadata"].get("resourceVersion", "")):
                return False
            if written.sent != _comparable(d["spec"]):
                return False
        return True

    def _remember(self, body: dict[str, Any], response: dict[str, Any]) -> None:
        """Record what the server answered a write of ``body`` with (see module docs)."""
        stored = self._v1(response)
        if stored is None:
            return
        meta = stored["metadata"]
        name, version = meta.get("name"), meta.get("resourceVersion")
        if not name or not version:
            return
        sent = _comparable(body["spec"])
        self._written[str(name)] = _Written(resource_version=str(version), sent=sent)
        dropped = [
            f
            for f in _dropped_fields(sent, _comparable(stored.get("spec") or {}))
            if f not in self._warned_dropped
        ]
        if dropped:
            self._warned_dropped.update(dropped)
            log.warning(
                "the API server did not store some device fields of our ResourceSlice "
                "(a feature gate such as DRADeviceTaints is off?)",
                extra={"event": "slice_fields_dropped", "slice": name, "fields": dropped},
            )

    @property
    def publishing(self) -> bool:
        """Whether this instance publishes (it holds the lease, or there is none)."""
        return self._lease is None or self._lease.held

    async def run(self) -> None:
        """Take the lease (waiting while another instance holds it), then reconcile now, on
        every trigger, health change, watch event and resync period; give the lease up when
        cancelled (once a reconcile in flight returned)."""
        try:
            await self._take_lease()
            await self._publish()
        finally:
            self._stop.set()
            self._release_lease()

    def join(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds for the threads of a stopped publisher (the
        slice watch, a reconcile in flight) to end; return whether they did. Once the
        transport is closed they end at once: their requests fail."""
        deadline = time.monotonic() + timeout_s
        watcher = self._watcher
        if watcher is not None:
            watcher.join(timeout_s)
        with self._state:
            idle = self._state.wait_for(
                lambda: not self._in_flight, max(0.0, deadline - time.monotonic())
            )
        return idle and (watcher is None or not watcher.is_alive())

    def _reconcile_unless_stopped(self) -> None:
        """:meth:`reconcile_once` on a worker thread, unless :meth:`run` ended while it was
        queued; when :meth:`run` ended during it, the lease is given up here, after it."""
        with self._state:
            queued_past_stop = self._stopped
            self._in_flight = not queued_past_stop
        if queued_past_stop:
            return
        try:
            self.reconcile_once()
        finally:
            with self._state:
                self._in_flight = False
                release = self._stopped
                self._state.notify_all()
            if release and self._lease is not None:
                self._lease.release()

    def _release_lease(self) -> None:
        """Give the lease up, or leave that to the reconcile in flight. Cancelling
        :meth:`run` does not stop a reconcile's request (it ends with its answer, or when
        the transport is closed); that reconcile keeps the lease until it returns, so the
        next instance never publishes alongside a write of ours."""
        with self._state:
            self._stopped = True
            if self._in_flight:
                return
        if self._lease is not None:
            self._lease.release()

    async def _take_lease(self) -> None:
        lease = self._lease
        if lease is None or lease.try_acquire():
            return
        log.info(
            "another plugin instance publishes this node's ResourceSlices; waiting to take over",
            extra={"event": "slices_waiting_for_lease", "lease": str(lease.path)},
        )
        await lease.acquire()
        log.info(
            "took over publishing this node's ResourceSlices",
            extra={"event": "slices_lease_taken", "lease": str(lease.path)},
        )

    async def _publish(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        informer = self.slice_informer()
        informer.store.subscribe(self._on_slice_change(loop, informer.store))
        self._watcher = watcher = threading.Thread(
            target=informer.run, args=(self._stop,), name="slice-watch", daemon=True
        )
        watcher.start()
        health_task = loop.create_task(self._follow_health())
        # Jittered: after an API server outage, every node's plugin retries against it.
        backoff = Backoff(initial_s=1.0, max_s=30.0)
        try:
            while True:
                self._trigger.clear()
                try:
                    await asyncio.to_thread(self._reconcile_unless_stopped)
                    backoff.reset()
                    wait = self._resync_s
                except Exception as exc:  # never let the publisher die: retry with backoff
                    log.error(
                        "publishing ResourceSlices failed; will retry",
                        extra={
                            "event": "slices_publish_failed",
                            "error": str(exc),
                            "error_type": type(exc).__name__,
                        },
                    )
                    wait = backoff.next_delay()
                # asyncio.timeout, not wait_for: on Python 3.11 a cancel arriving as the
                # trigger fires is lost inside wait_for, and the loop went on publishing
                # after the plugin's shutdown had cancelled it (a SIGTERM then hung).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._trigger.wait()
        finally:
            self._stop.set()
            health_task.cancel()

    async def _follow_health(self) -> None:
        version = self._health.version
        while True:
            version = await self._health.wait_for_change(version)
            self.trigger()

    def slice_informer(self) -> Informer:
        """The informer of this node's slices of this driver (metadata only: it only wakes
        the reconcile, which reads the slices itself)."""
        resource = Resource(
            "ResourceSlice",
            f"resource.k8s.io/{self._api.version}",
            f"/apis/resource.k8s.io/{self._api.version}/resourceslices",
            transform=metadata_only,
            field_selector=self._selector()["fieldSelector"],
        )
        return Informer(self._transport, resource, backoff=Backoff(initial_s=1.0, max_s=30.0))

    def _on_slice_change(self, loop: asyncio.AbstractEventLoop, store: Store) -> Listener:
        def changed(_kind: str, key: str) -> None:
            if key != "*" and store.get(key) is None:
                log.info("ResourceSlice deleted; republishing", extra={"event": "slice_deleted"})
            # The event loop is closed once we are shutting down: nothing to wake then.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._trigger.set)

        return changed
