"""Kubernetes Events about the node (for problems an operator must see, e.g. a checkpoint
moved aside) and about a claim (what its pod's owner must see though the prepare succeeded).
Without a cluster, events are only logged."""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Protocol

from dra_kube_client import JsonTransport, KubeApiError

from dra_kubelet_core.errors import ClaimRef

__all__ = ["EventRecorder", "KubeEventRecorder", "LogEventRecorder"]

log = logging.getLogger(__name__)


class EventRecorder(Protocol):
    """Reports events about this plugin's Node."""

    async def node_warning(self, *, reason: str, message: str) -> None:
        """Record a Warning event on the Node (never raises)."""
        ...

    async def claim_warning(self, claim: ClaimRef, *, reason: str, message: str) -> None:
        """Record a Warning event on the ResourceClaim ``claim`` (never raises)."""
        ...


class LogEventRecorder:
    """Logs events only (no cluster, e.g. ``--print-resource-slices`` or tests)."""

    def __init__(self, node_name: str) -> None:
        """Events are about ``node_name``."""
        self.node_name = node_name
        self.recorded: list[tuple[str, str]] = []
        #: claim events: (claim, reason, message)
        self.claim_recorded: list[tuple[ClaimRef, str, str]] = []

    async def node_warning(self, *, reason: str, message: str) -> None:
        """Log the event and keep it in ``recorded``."""
        self.recorded.append((reason, message))
        log.warning(
            message, extra={"event": "node_event", "reason": reason, "node": self.node_name}
        )

    async def claim_warning(self, claim: ClaimRef, *, reason: str, message: str) -> None:
        """Log the event and keep it in ``claim_recorded``."""
        self.claim_recorded.append((claim, reason, message))
        log.warning(
            message,
            extra={
                "event": "claim_event",
                "reason": reason,
                "claim": f"{claim.namespace}/{claim.name}",
                "node": self.node_name,
            },
        )


class KubeEventRecorder(LogEventRecorder):
    """Logs and creates a core/v1 Event on the Node (namespace ``default``, as the kubelet)."""

    def __init__(
        self, transport: JsonTransport, node_name: str, node_uid: str | None, *, component: str
    ) -> None:
        """Post events through ``transport`` about node ``node_name``, from ``component``
        (the driver's :attr:`~dra_kubelet_core.driver.DriverIdentity.component`)."""
        super().__init__(node_name)
        self._transport = transport
        self._node_uid = node_uid
        self._component = component

    async def node_warning(self, *, reason: str, message: str) -> None:
        """Log, then create the Event; failures to post are logged, not raised."""
        await super().node_warning(reason=reason, message=message)
        involved: dict[str, object] = {"apiVersion": "v1", "kind": "Node", "name": self.node_name}
        if self._node_uid:
            involved["uid"] = self._node_uid
        await self._post("default", f"{self.node_name}.", involved, reason, message)

    async def claim_warning(self, claim: ClaimRef, *, reason: str, message: str) -> None:
        """Log, then create the Event in the claim's namespace; failures are logged."""
        await super().claim_warning(claim, reason=reason, message=message)
        involved: dict[str, object] = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "namespace": claim.namespace,
            "name": claim.name,
            "uid": claim.uid,
        }
        await self._post(claim.namespace, f"{claim.name}.", involved, reason, message)

    async def _post(
        self,
        namespace: str,
        generate_name: str,
        involved: dict[str, object],
        reason: str,
        message: str,
    ) -> None:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": generate_name, "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message[:1024],
            "type": "Warning",
            "source": {"component": self._component, "host": self.node_name},
            "reportingComponent": self._component,
            "reportingInstance": self.node_name,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await asyncio.to_thread(
                self._transport.request, "POST", f"/api/v1/namespaces/{namespace}/events", body=body
            )
        except KubeApiError as exc:
            log.error(
                "could not post event",
                extra={"event": "event_post_failed", "reason": reason, "error": str(exc)},
            )
