"""Publishes the node's ResourceSlices and keeps them published.

Reconciles the desired slices (from :func:`~dra_kubelet_plugin.slices.build_resource_slices`)
with what the API server holds for this node and driver: creates, updates and deletes slices,
bumping the pool generation on every change. A watch on the node's slices triggers a
reconcile within seconds when they are deleted (the kubelet wipes a node's slices at its
start and 30 s after the driver disconnects) or changed; health changes do too, and a
periodic resync covers a broken watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from dra_api_types import ResourceSlice, ValidationError

from dra_kubelet_plugin.errors import KubeApiError
from dra_kubelet_plugin.health import HealthHub
from dra_kubelet_plugin.inventory import NodeDevice
from dra_kubelet_plugin.kube import JsonTransport, path_segment
from dra_kubelet_plugin.metrics import PluginMetrics
from dra_kubelet_plugin.slices import SliceSpec, build_resource_slices

__all__ = ["SlicePublisher", "slices_equal"]

log = logging.getLogger(__name__)
_SLICES = "/apis/resource.k8s.io/v1/resourceslices"


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


class SlicePublisher:
    """Keeps this node's pool of ``driver`` published on the API server."""

    def __init__(
        self,
        *,
        transport: JsonTransport,
        spec: SliceSpec,
        devices: Callable[[], Sequence[NodeDevice]],
        health: HealthHub,
        metrics: PluginMetrics,
        resync_s: float = 30.0,
    ) -> None:
        """Publish ``devices()`` for ``spec``; ``resync_s`` bounds the time without a check."""
        self._transport = transport
        self._spec = spec
        self._devices = devices
        self._health = health
        self._metrics = metrics
        self._resync_s = resync_s
        self._trigger = asyncio.Event()
        self._stop = threading.Event()
        self.reconciles = 0
        self._last_generation = 0

    def trigger(self) -> None:
        """Ask for a reconcile soon."""
        self._trigger.set()

    def _selector(self) -> dict[str, str]:
        spec = self._spec
        return {"fieldSelector": f"spec.nodeName={spec.node_name},spec.driver={spec.driver_name}"}

    def _list(self) -> list[dict[str, Any]]:
        data = self._transport.request("GET", _SLICES, query=self._selector())
        items: list[dict[str, Any]] = []
        for raw in data.get("items") or []:
            try:
                parsed = ResourceSlice.from_dict(raw)
            except ValidationError as exc:
                log.warning(
                    "ignoring unparsable ResourceSlice",
                    extra={"event": "slice_unparsable", "error": str(exc)},
                )
                continue
            # Guard against a server that ignores the field selector.
            if parsed.spec.node_name == self._spec.node_name and (
                parsed.spec.driver == self._spec.driver_name
            ):
                items.append(parsed.to_dict())
        return sorted(items, key=lambda s: str(s["metadata"].get("name", "")))

    def reconcile_once(self) -> bool:
        """Make the API server hold exactly the desired slices; return whether it changed."""
        existing = self._list()
        health = {h.device_name: h for h in self._health.snapshot()}
        # Never reuse a generation, even after our slices were deleted: consumers that saw
        # the old slices must treat the new ones as newer.
        current_gen = max(
            (int((s.get("spec") or {}).get("pool", {}).get("generation") or 0) for s in existing),
            default=0,
        )
        current_gen = max(current_gen, self._last_generation if not existing else 0)
        desired = build_resource_slices(
            self._spec, self._devices(), generation=current_gen, health=health
        )
        self.reconciles += 1
        if existing and slices_equal(existing, desired):
            return False
        desired = build_resource_slices(
            self._spec, self._devices(), generation=current_gen + 1, health=health
        )
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
                self._transport.request("PUT", f"{_SLICES}/{path_segment(name)}", body=body)
                self._metrics.slice_publications.labels(operation="update").inc()
            else:
                self._transport.request("POST", _SLICES, body=body)
                self._metrics.slice_publications.labels(operation="create").inc()
        for old in existing[len(desired) :]:
            name = str(old["metadata"]["name"])
            try:
                self._transport.request("DELETE", f"{_SLICES}/{path_segment(name)}")
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
                "devices": len(self._devices()),
            },
        )
        return True

    async def run(self) -> None:
        """Reconcile now, on every trigger, health change, watch event and resync period."""
        loop = asyncio.get_running_loop()
        watcher = threading.Thread(
            target=self._watch_forever, args=(loop,), name="slice-watch", daemon=True
        )
        watcher.start()
        health_task = loop.create_task(self._follow_health())
        backoff = 1.0
        try:
            while True:
                self._trigger.clear()
                try:
                    await asyncio.to_thread(self.reconcile_once)
                    backoff = 1.0
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
                    wait = backoff
                    backoff = min(backoff * 2, 30.0)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._trigger.wait(), timeout=wait)
        finally:
            self._stop.set()
            health_task.cancel()

    async def _follow_health(self) -> None:
        version = self._health.version
        while True:
            version = await self._health.wait_for_change(version)
            self.trigger()

    def _watch_forever(self, loop: asyncio.AbstractEventLoop) -> None:
        while not self._stop.is_set():
            try:
                for event in self._transport.watch_lines(
                    _SLICES, query=self._selector(), timeout_s=300
                ):
                    if self._stop.is_set():
                        return
                    kind = event.get("type")
                    if kind in ("DELETED", "MODIFIED", "ADDED"):
                        if kind == "DELETED":
                            log.info(
                                "ResourceSlice deleted; republishing",
                                extra={"event": "slice_deleted"},
                            )
                        loop.call_soon_threadsafe(self._trigger.set)
            except KubeApiError as exc:
                log.debug(
                    "slice watch ended", extra={"event": "slice_watch_error", "error": str(exc)}
                )
            except RuntimeError:
                return  # the event loop is closed: we are shutting down
            self._stop.wait(1.0)
