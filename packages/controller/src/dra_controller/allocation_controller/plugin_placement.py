"""Warning when the kubelet plugin's DaemonSet is scheduled on no node.

A DaemonSet whose nodeSelector and node affinity match no node runs no pod, yet
``kubectl rollout status`` succeeds, and a plugin that never starts cannot warn. The
allocation controller runs regardless, so it reads the DaemonSet and, once
``status.desiredNumberScheduled`` has been 0 for longer than a grace period (a fresh install
or a node pool being added passes through 0), logs a structured warning and posts a Warning
Event on the DaemonSet naming its selector.

:class:`PlacementWatch` is the pure decision; :class:`PlacementChecker` is the I/O edge (one
GET, then the log line and the Event).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dra_kube_client import JsonTransport, KubeApiError

from .events import EventPublisher, InvolvedObject

log = logging.getLogger(__name__)

REASON = "KubeletPluginUnscheduled"


@dataclass(frozen=True, slots=True)
class Unscheduled:
    """A DaemonSet that has wanted no pod for ``for_s`` seconds."""

    obj: InvolvedObject
    selector: str
    for_s: float

    def message(self) -> str:
        """The Event's text: what is wrong and the fix (no duration: the text must not change
        between checks, so the publisher's per-message deduplication holds)."""
        return (
            f"DaemonSet {self.obj.namespace}/{self.obj.name} is scheduled on no node "
            "(desiredNumberScheduled 0 past the grace period): no node matches its "
            f"placement {self.selector}, so no device is published. Label the GPU nodes "
            "(Node Feature Discovery, or nvidia.com/gpu.present=true) or set "
            "kubeletPlugin.affinity (null: every node) and kubeletPlugin.nodeSelector."
        )


def placement_of(daemonset: Mapping[str, Any]) -> str:
    """The pod template's nodeSelector and node affinity, compact JSON (``{}``: none)."""
    spec = daemonset.get("spec", {}).get("template", {}).get("spec", {})
    placement: dict[str, Any] = {}
    if spec.get("nodeSelector"):
        placement["nodeSelector"] = spec["nodeSelector"]
    affinity = (spec.get("affinity") or {}).get("nodeAffinity")
    if affinity:
        placement["nodeAffinity"] = affinity
    return json.dumps(placement, sort_keys=True, separators=(",", ":"))


@dataclass(slots=True)
class PlacementWatch:
    """Remembers since when each DaemonSet has wanted no pod; pure."""

    grace_s: float
    _zero_since: dict[str, float] = field(default_factory=dict)

    def observe(self, daemonset: Mapping[str, Any], now: float) -> Unscheduled | None:
        """The warning due for ``daemonset`` at ``now``, or None.

        A DaemonSet whose controller has not reported yet (``observedGeneration`` behind
        ``metadata.generation``) is not judged: its 0 may be stale.
        """
        meta = daemonset.get("metadata", {})
        status = daemonset.get("status", {})
        uid = str(meta.get("uid", ""))
        observed = status.get("observedGeneration", 0) >= meta.get("generation", 0)
        if not observed:
            return None
        if status.get("desiredNumberScheduled", 0) > 0:
            self._zero_since.pop(uid, None)
            return None
        since = self._zero_since.setdefault(uid, now)
        if now - since < self.grace_s:
            return None
        obj = InvolvedObject(
            "apps/v1", "DaemonSet", str(meta.get("namespace", "")), str(meta["name"]), uid
        )
        return Unscheduled(obj, placement_of(daemonset), now - since)


class PlacementChecker:
    """Reads the named DaemonSets and warns about those scheduled on no node."""

    def __init__(
        self,
        transport: JsonTransport,
        daemonsets: list[tuple[str, str]],
        *,
        watch: PlacementWatch,
        publisher: EventPublisher | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Check ``daemonsets`` (namespace, name) through ``transport``."""
        self.transport = transport
        self.daemonsets = daemonsets
        self.watch = watch
        self.publisher = publisher
        self.clock = clock

    def check(self) -> list[Unscheduled]:
        """One pass; a DaemonSet that cannot be read is logged and skipped."""
        found: list[Unscheduled] = []
        for namespace, name in self.daemonsets:
            path = f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}"
            try:
                daemonset = self.transport.request("GET", path)
            except KubeApiError as exc:
                log.warning(
                    f"cannot read DaemonSet {namespace}/{name}: {exc}",
                    extra={"event": "daemonset_unreadable", "object": f"{namespace}/{name}"},
                )
                continue
            unscheduled = self.watch.observe(daemonset, self.clock())
            if unscheduled is None:
                continue
            found.append(unscheduled)
            log.warning(
                unscheduled.message(),
                extra={
                    "event": "kubelet_plugin_unscheduled",
                    "object": f"{namespace}/{name}",
                    "selector": unscheduled.selector,
                    "for_s": int(unscheduled.for_s),
                },
            )
            if self.publisher is not None:
                self.publisher.warn(
                    unscheduled.obj,
                    unscheduled.message(),
                    reason=REASON,
                    log_event="kubelet_plugin_unscheduled_event_posted",
                )
        return found

    def run(self, stop: threading.Event, *, every_s: float, is_leader: Callable[[], bool]) -> None:
        """Check every ``every_s`` until ``stop``; only the leader warns (one Event, not N)."""
        while not stop.wait(every_s):
            if is_leader():
                self.check()
