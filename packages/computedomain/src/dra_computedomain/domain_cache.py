"""The kubelet plugin's ComputeDomains by UID: one informer, so a prepare lists nothing.

A claim names its domain by UID only (``ComputeDomainChannelConfig.domainID``), and the API
server finds objects by name, so without a cache each prepare listed every ComputeDomain of
the cluster. As NVIDIA's plugin does, one :class:`~dra_kube_client.informers.Informer` lists
them once and then watches; a lookup is a cache hit. A domain just created may not have
reached the cache yet: a miss waits up to ``miss_wait_s`` for the next change before it says
"no such domain" (which a prepare retries anyway).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from dra_api_types import ComputeDomain
from dra_kube_client import Backoff, JsonTransport, KubeApiError
from dra_kube_client.informers import Informer

from .api_paths import collection_resource

__all__ = ["DomainCache"]


def _check(obj: dict[str, Any]) -> None:
    # An object the model refuses stays out of the cache (logged once by the informer).
    ComputeDomain.from_dict(obj)


class DomainCache:
    """Every ComputeDomain, found by UID."""

    def __init__(
        self,
        transport: JsonTransport,
        *,
        miss_wait_s: float = 2.0,
        backoff: Backoff | None = None,
        watch_timeout_s: float = 300.0,
    ) -> None:
        """``miss_wait_s``: how long a lookup of an unknown UID waits for the cache to move."""
        self.miss_wait_s = miss_wait_s
        self.informer = Informer(
            transport,
            collection_resource("ComputeDomain"),
            check=_check,
            backoff=backoff,
            watch_timeout_s=watch_timeout_s,
        )
        self._keys: dict[str, str] = {}  # uid -> namespace/name
        self._cond = threading.Condition()
        self.informer.store.subscribe(self._changed)

    def _changed(self, _kind: str, key: str) -> None:
        store = self.informer.store
        with self._cond:
            if key == "*":
                self._keys = {
                    str((o.get("metadata") or {}).get("uid")): k for k, o in store.items().items()
                }
            else:
                self._keys = {u: k for u, k in self._keys.items() if k != key}
                obj = store.get(key)
                if obj is not None:
                    self._keys[str((obj.get("metadata") or {}).get("uid"))] = key
            self._cond.notify_all()

    def start(self, stop: threading.Event) -> threading.Thread:
        """List and watch on a daemon thread until ``stop`` is set."""
        thread = threading.Thread(
            target=self.informer.run, args=(stop,), name="informer-ComputeDomain", daemon=True
        )
        thread.start()
        return thread

    def get(self, uid: str) -> ComputeDomain | None:
        """The ComputeDomain with ``uid``, or None when the cache has none (after waiting up
        to ``miss_wait_s`` for it to change).

        Raises:
            KubeApiError: 503, the domains have not been listed yet (the API server is not
                reachable): a missing domain would be a guess.
        """
        deadline = time.monotonic() + self.miss_wait_s
        with self._cond:
            while True:
                key = self._keys.get(uid)
                obj = self.informer.store.get(key) if key is not None else None
                if obj is not None:
                    return ComputeDomain.from_dict(obj)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
        if not self.informer.synced.is_set():
            raise KubeApiError(
                "GET",
                self.informer.resource.path,
                503,
                f"ComputeDomain {uid}: the ComputeDomains are not listed yet",
                reason="ServiceUnavailable",
            )
        return None
