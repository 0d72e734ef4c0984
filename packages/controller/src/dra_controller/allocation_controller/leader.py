"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection.

The holder renews every ``retry_s``; another replica takes the Lease once it has not been
renewed for ``lease_s``. A leader that cannot renew within ``lease_s`` stops leading (its
metrics keep being served; it stops posting Events) and competes again.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from dra_kube_client import JsonTransport, KubeApiError

log = logging.getLogger(__name__)


def _now_micro() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(text: object) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class LeaderElector:
    """Holds (or waits for) one Lease; :attr:`leading` says whether this replica leads."""

    def __init__(
        self,
        transport: JsonTransport,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_s: float = 15.0,
        retry_s: float = 2.0,
        wall_clock: Callable[[], float] = time.time,
        on_change: Callable[[bool], None] = lambda *_: None,
    ) -> None:
        """Compete for ``namespace/name`` as ``identity``."""
        self.transport = transport
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_s = lease_s
        self.retry_s = retry_s
        self.clock = wall_clock
        self.on_change = on_change
        self.leading = False
        self._last_renew = 0.0

    def _set(self, leading: bool) -> None:
        if leading != self.leading:
            self.leading = leading
            log.info(
                "leading" if leading else "not leading",
                extra={"event": "leader_changed", "leading": leading, "identity": self.identity},
            )
            self.on_change(leading)

    def _spec(self, transitions: int, acquire: str) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_s),
            "acquireTime": acquire,
            "renewTime": _now_micro(),
            "leaseTransitions": transitions,
        }

    def try_acquire_or_renew(self) -> bool:
        """One round: create, renew or take over the Lease; return whether we lead."""
        try:
            lease = self.transport.request(
                "GET",
                f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}",
            )
        except KubeApiError as exc:
            if exc.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(0, _now_micro()),
            }
            self.transport.request(
                "POST",
                f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases",
                body=body,
            )
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        renewed = _parse_time(spec.get("renewTime")) or 0.0
        duration = float(spec.get("leaseDurationSeconds") or self.lease_s)
        if holder and holder != self.identity and self.clock() - renewed < duration:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        acquire = spec.get("acquireTime") or _now_micro()
        if holder != self.identity:
            transitions, acquire = transitions + 1, _now_micro()
        lease["spec"] = self._spec(transitions, str(acquire))
        # The resourceVersion in the body makes this a compare-and-swap: a 409 means another
        # replica wrote first.
        self.transport.request(
            "PUT",
            f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}",
            body=lease,
        )
        return True

    def step(self) -> None:
        """One round, with failures counted against the lease duration."""
        try:
            ok = self.try_acquire_or_renew()
        except KubeApiError as exc:
            log.warning(
                f"lease {self.namespace}/{self.name}: {exc}",
                extra={"event": "lease_error", "error": str(exc)},
            )
            if self.leading and self.clock() - self._last_renew < self.lease_s:
                return
            ok = False
        if ok:
            self._last_renew = self.clock()
        self._set(ok)

    def run(self, stop: threading.Event) -> None:
        """Compete until ``stop``; release nothing on exit (the Lease expires)."""
        while not stop.is_set():
            self.step()
            stop.wait(self.retry_s)
