"""The kubelet's PodResources ``List``, asked when the metrics are scraped (I/O edge).

The label it feeds and why it comes from the kubelet: :mod:`.pod_containers`. The call is
made from the metrics server's request thread, hence a blocking channel: each ``List`` opens
its own channel (a kubelet restart then costs nothing, where a kept channel would sit in
reconnect backoff), waits at most ``timeout_s``, and its answer -- or its failure -- is
reused for ``ttl_s``, so a burst of scrapes asks the kubelet once and a hung kubelet delays
one scrape per ``ttl_s`` by ``timeout_s`` at most. Nothing here raises: a missing socket or
a failed call is logged once (again only after a success) and gives an empty index, so the
series keep an empty ``container`` and no scrape ever fails for it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from dra_kubelet_core._proto import podresources_v1_pb2 as pb
from dra_kubelet_core.pod_containers import ContainerIndex, claim_containers
from dra_kubelet_core.sockets import short_socket_path

__all__ = ["LIST_METHOD", "PodResourcesContainers"]

log = logging.getLogger(__name__)

#: The kubelet's method (proto package ``v1``).
LIST_METHOD = "/v1.PodResourcesLister/List"


class PodResourcesContainers:
    """A :data:`~dra_kubelet_core.pod_containers.ContainerSource` reading the kubelet's
    PodResources socket; call the instance for the current index."""

    def __init__(
        self,
        socket: Path,
        *,
        timeout_s: float = 1.0,
        ttl_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Ask the kubelet at ``socket`` at most once per ``ttl_s``, waiting ``timeout_s``."""
        self.socket = socket
        self.timeout_s = timeout_s
        self.ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._index: ContainerIndex = {}
        self._fetched_at: float | None = None
        self._failing = False

    def __call__(self) -> ContainerIndex:
        """The index of the last ``List`` (asked again when older than ``ttl_s``); empty
        while the kubelet cannot be asked."""
        # One scrape asks; concurrent ones wait for its answer instead of asking again.
        with self._lock:
            now = self._clock()
            if self._fetched_at is None or now - self._fetched_at >= self.ttl_s:
                self._index = self._fetch()
                self._fetched_at = self._clock()
            return self._index

    def _fetch(self) -> ContainerIndex:
        if not self.socket.exists():
            self._failed(
                "no kubelet PodResources socket (mount the kubelet's pod-resources directory, "
                "or set --kubelet-pod-resources-socket)"
            )
            return {}
        try:
            with (
                short_socket_path(self.socket) as path,
                grpc.insecure_channel(f"unix://{path}") as channel,
            ):
                call = channel.unary_unary(
                    LIST_METHOD,
                    request_serializer=pb.ListPodResourcesRequest.SerializeToString,
                    response_deserializer=pb.ListPodResourcesResponse.FromString,
                )
                response = call(pb.ListPodResourcesRequest(), timeout=self.timeout_s)
        except Exception as exc:
            # Anything at all (a bad path, a refused call): a scrape must not fail for a label.
            detail = f"{exc.code().name}: {exc.details()}" if isinstance(exc, grpc.Call) else exc
            self._failed(f"PodResources List failed: {detail}")
            return {}
        if self._failing:
            log.info(
                "the kubelet's PodResources answers again",
                extra={"event": "pod_resources_recovered", "socket": str(self.socket)},
            )
        self._failing = False
        return claim_containers(response)

    def _failed(self, reason: str) -> None:
        # Logged once per outage: every scrape would otherwise repeat it.
        level = logging.DEBUG if self._failing else logging.WARNING
        self._failing = True
        log.log(
            level,
            "container label of nvidia_dra_device_allocation_info left empty",
            extra={"event": "pod_resources_unavailable", "socket": str(self.socket),
                   "reason": reason},
        )  # fmt: skip
