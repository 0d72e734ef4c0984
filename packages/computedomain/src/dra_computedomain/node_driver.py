"""Prepare and unprepare of ``compute-domain.nvidia.com`` claims on one node (kube edge).

Channel prepares wait for the node's domain daemon, so each prepare retries its checks with
backoff (250 ms doubling to 3 s, NVIDIA's) until the request's deadline, unless the error is
permanent. Fixes of NVIDIA's bugs:

* #641 (double channel prepare): a channel claim is refused while another claim still holds
  the node's channel;
* #1162 (stale prepare after unprepare): an unprepare bumps the claim's generation; a prepare
  still retrying for an older generation stops, and takes back the node label it set;
* #892 (two domains in one clique): readiness is read from this domain's own clique object.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from dra_api_types import (
    ComputeDomain,
    ComputeDomainChannelConfig,
    ComputeDomainClique,
    ResourceClaim,
)
from dra_kubelet_plugin.cdi import ContainerEdits
from dra_kubelet_plugin.errors import KubeApiError
from dra_kubelet_plugin.kube import JsonTransport

from .api_paths import Permission, collection_path, node_path, object_path
from .channel_prepare import (
    ChannelClaim,
    NodeView,
    channel_edits,
    daemon_edits,
    daemon_ready_on,
    decide_channel,
)
from .claim_devices import claim_devices
from .errors import DomainNotFoundError, PrepareError
from .names import COMPUTE_DOMAIN_LABEL, clique_object_name

__all__ = ["REQUESTS", "ComputeDomainNodeDriver", "StalePrepareError"]

log = logging.getLogger(__name__)

#: What the compute-domain plugin asks of the API server (added to the plugin's ClusterRole).
REQUESTS: Final[frozenset[Permission]] = frozenset(
    {
        ("resource.nvidia.com", "computedomains", "list"),
        ("resource.nvidia.com", "computedomaincliques", "get"),
        ("", "nodes", "get"),
        ("", "nodes", "patch"),
    }
)
_LABEL_PATH: Final = "/metadata/labels/" + COMPUTE_DOMAIN_LABEL.replace("/", "~1")


class StalePrepareError(PrepareError):
    """The claim was unprepared while this prepare was still retrying (NVIDIA #1162)."""

    permanent = True


class ComputeDomainNodeDriver:
    """The compute-domain plugin's claim logic for node ``node_name``."""

    def __init__(
        self,
        transport: JsonTransport,
        *,
        node_name: str,
        driver_namespace: str,
        clique_id: str,
        domains_dir: Path,
        fake: bool,
        backoff_s: tuple[float, float] = (0.25, 3.0),
    ) -> None:
        """``domains_dir`` holds one config directory per domain (host path, for CDI)."""
        self._transport = transport
        self.node_name = node_name
        self._namespace = driver_namespace
        self.clique_id = clique_id
        self._domains_dir = domains_dir
        self._fake = fake
        self._backoff = backoff_s
        self._generation: dict[str, int] = {}
        #: completed channel prepares on this node: claim UID -> domain UID
        self.prepared_channels: dict[str, str] = {}

    def restore(self, prepared_channels: Mapping[str, str]) -> None:
        """Seed the completed channel prepares from the checkpoint (at start)."""
        self.prepared_channels = dict(prepared_channels)

    # ------------------------------------------------------------ reads
    def _domain(self, uid: str) -> ComputeDomain | None:
        items = self._transport.request("GET", collection_path("ComputeDomain")).get("items")
        for item in items or []:
            if (item.get("metadata") or {}).get("uid") == uid:
                return ComputeDomain.from_dict(item)
        return None

    def _clique(self, domain_uid: str) -> list[ComputeDomainClique]:
        path = object_path(
            "ComputeDomainClique", self._namespace, clique_object_name(domain_uid, self.clique_id)
        )
        try:
            return [ComputeDomainClique.from_dict(self._transport.request("GET", path))]
        except KubeApiError as exc:
            if exc.status == 404:
                return []
            raise

    def _node(self) -> tuple[str | None, str]:
        node = self._transport.request("GET", node_path(self.node_name))
        meta = node.get("metadata") or {}
        return (meta.get("labels") or {}).get(COMPUTE_DOMAIN_LABEL), str(
            meta.get("resourceVersion", "")
        )

    # ------------------------------------------------------------ label
    def _set_label(self, domain_uid: str, resource_version: str) -> None:
        patch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
            {"op": "add", "path": _LABEL_PATH, "value": domain_uid},
        ]
        self._transport.request(
            "PATCH",
            node_path(self.node_name),
            body=patch,
            content_type="application/json-patch+json",
        )
        log.info("node labelled", extra={"event": "node_labelled", "domain_uid": domain_uid})

    def _remove_label(self, domain_uid: str) -> None:
        patch = [
            {"op": "test", "path": _LABEL_PATH, "value": domain_uid},
            {"op": "remove", "path": _LABEL_PATH},
        ]
        try:
            self._transport.request(
                "PATCH",
                node_path(self.node_name),
                body=patch,
                content_type="application/json-patch+json",
            )
        except KubeApiError as exc:
            if exc.status in (404, 422):  # gone, or the label is not (or no longer) ours
                return
            raise
        log.info("node unlabelled", extra={"event": "node_unlabelled", "domain_uid": domain_uid})

    # ------------------------------------------------------------ prepare
    def _attempt_channel(
        self, claim: ChannelClaim, config: ComputeDomainChannelConfig, generation: int
    ) -> ContainerEdits:
        self._check_generation(claim, generation)
        domain = self._domain(claim.domain_uid)
        label, resource_version = self._node()
        node = NodeView(
            name=self.node_name,
            clique_id=self.clique_id,
            label=label,
            prepared_channels=self.prepared_channels,
        )
        ready = domain is not None and daemon_ready_on(
            node, domain, self._clique(claim.domain_uid) if self.clique_id else []
        )
        decision = decide_channel(claim, domain, node, daemon_ready=ready)
        if decision.label_node:
            self._check_generation(claim, generation)
            self._set_label(claim.domain_uid, resource_version)
        if decision.error is not None:
            raise decision.error
        self._check_generation(claim, generation)
        self.prepared_channels[claim.uid] = claim.domain_uid
        return channel_edits(config.allocation_mode or "Single", self.clique_id, fake=self._fake)

    def _attempt_daemon(self, ref: str, domain_uid: str) -> ContainerEdits:
        domain = self._domain(domain_uid)
        if domain is None:
            raise DomainNotFoundError(ref, f"no ComputeDomain with UID {domain_uid}")
        directory = self._domains_dir / domain_uid
        directory.mkdir(parents=True, exist_ok=True)
        return daemon_edits(domain, self.clique_id, str(directory))

    def _check_generation(self, claim: ChannelClaim, generation: int) -> None:
        if self._generation.get(claim.uid, 0) != generation:
            raise StalePrepareError(claim.ref, "unprepared while the prepare was retrying")

    def _attempt(self, claim: ResourceClaim, generation: int) -> dict[str, ContainerEdits]:
        ref = f"{claim.metadata.namespace}/{claim.metadata.name}"
        edits: dict[str, ContainerEdits] = {}
        for device in claim_devices(claim, pool=self.node_name):
            config = device.config
            if isinstance(config, ComputeDomainChannelConfig):
                channel = ChannelClaim(
                    uid=claim.metadata.uid or "",
                    namespace=claim.metadata.namespace or "",
                    name=claim.metadata.name or "",
                    domain_uid=config.domain_id,
                    allocation_mode=config.allocation_mode or "Single",
                )
                edits[device.device] = self._attempt_channel(channel, config, generation)
            else:
                edits[device.device] = self._attempt_daemon(ref, config.domain_id)
        return edits

    async def prepare(
        self, claim: ResourceClaim, *, deadline_s: float
    ) -> dict[str, ContainerEdits]:
        """The container edits of each of the claim's devices, retrying until ``deadline_s``.

        Raises:
            PrepareError: permanent at once, retryable ones once the deadline has passed
                (the kubelet retries the whole prepare later).
            KubeApiError: the API server kept failing until the deadline.
        """
        uid = claim.metadata.uid or ""
        generation = self._generation.get(uid, 0)
        deadline = time.monotonic() + deadline_s
        delay = self._backoff[0]
        while True:
            try:
                return await asyncio.to_thread(self._attempt, claim, generation)
            except StalePrepareError:
                domain_uid = self._channel_domain(claim)
                if domain_uid and not self._channel_users(domain_uid, except_uid=uid):
                    await asyncio.to_thread(self._remove_label, domain_uid)
                raise
            except (PrepareError, KubeApiError) as exc:
                if isinstance(exc, PrepareError) and exc.permanent:
                    raise
                if time.monotonic() + delay > deadline:
                    raise
                log.info(
                    "prepare retried",
                    extra={"event": "prepare_retry", "error": str(exc), "retry_in_s": delay},
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._backoff[1])

    def _channel_domain(self, claim: ResourceClaim) -> str | None:
        try:
            devices = claim_devices(claim, pool=self.node_name)
        except PrepareError:
            return None
        for device in devices:
            if isinstance(device.config, ComputeDomainChannelConfig):
                return device.config.domain_id
        return None

    def _channel_users(self, domain_uid: str, *, except_uid: str) -> list[str]:
        return [u for u, d in self.prepared_channels.items() if d == domain_uid and u != except_uid]

    async def unprepare(self, claim_uid: str) -> None:
        """Forget the claim; the last channel claim of a domain takes the node label off."""
        self._generation[claim_uid] = self._generation.get(claim_uid, 0) + 1
        domain_uid = self.prepared_channels.pop(claim_uid, None)
        if domain_uid is not None and not self._channel_users(domain_uid, except_uid=claim_uid):
            await asyncio.to_thread(self._remove_label, domain_uid)
