"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection.

Three durations (:class:`LeaseTimings`), as client-go names them:

* lease duration: candidates wait this long after the holder's last ``renewTime`` before
  taking the Lease over (the value written as ``leaseDurationSeconds``);
* renew deadline: a leader that has not renewed for this long stops leading (and competes
  again); a round that fails (the API server unreachable, a 409 because another candidate
  wrote first) only counts against the deadline. It must be shorter than the lease duration:
  the old leader has stopped before any candidate may take the Lease over. :attr:`leading`
  judges the deadline when read, so a round that hangs (a request that never returns) does
  not keep a leader leading past it;
* retry period: the time between rounds, for leader and followers alike.

A leader that finds the Lease held (and not expired) by another candidate has lost it and
steps down at once. Writes carry the Lease's ``resourceVersion``, so two candidates never both
win one term. Nothing is released on exit: the Lease expires.

:func:`decide` is the rule, without I/O; :class:`LeaderElector` applies it through a
:class:`~dra_kube_client.JsonTransport`.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dra_kube_client.errors import KubeApiError
from dra_kube_client.paths import path_segment
from dra_kube_client.transport import JsonTransport

__all__ = ["LeaderElector", "LeaseTimings", "decide"]

log = logging.getLogger(__name__)

_MICRO = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass(frozen=True)
class LeaseTimings:
    """Lease duration, renew deadline and retry period, in seconds (client-go's defaults)."""

    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0

    def __post_init__(self) -> None:
        """Reject timings under which a leader could outlive its Lease or never renew."""
        # Strictly below the lease (as client-go requires): with deadline == lease, a leader
        # cut off from the API server still leads at the moment another takes the Lease over.
        if not 0 < self.retry_period_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError(
                "leader election needs 0 < retry period < renew deadline < lease duration "
                f"(got {self.retry_period_s}s, {self.renew_deadline_s}s, "
                f"{self.lease_duration_s}s)"
            )


def _parse(value: object) -> datetime.datetime | None:
    """A Lease ``MicroTime`` (or a plain RFC 3339 time), in UTC."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.UTC)


def decide(
    lease_spec: dict[str, Any] | None,
    identity: str,
    now: datetime.datetime,
    duration_s: float,
) -> dict[str, Any] | None:
    """The Lease spec to write to hold (or take) the Lease at ``now``, or None while another
    candidate holds it.

    The holder's own spec keeps its ``acquireTime`` and ``leaseTransitions``; a takeover
    counts one more transition.
    """
    stamp = now.astimezone(datetime.UTC).strftime(_MICRO)
    spec = dict(lease_spec or {})
    holder = spec.get("holderIdentity") or ""
    renewed = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime"))
    held_for = float(spec.get("leaseDurationSeconds") or duration_s)
    expired = renewed is None or (now - renewed).total_seconds() > held_for
    if holder == identity:
        spec["renewTime"] = stamp
        spec["leaseDurationSeconds"] = int(duration_s)
        spec.setdefault("acquireTime", stamp)
        return spec
    if holder and not expired:
        return None
    return {
        "holderIdentity": identity,
        "leaseDurationSeconds": int(duration_s),
        "acquireTime": stamp,
        "renewTime": stamp,
        "leaseTransitions": int(spec.get("leaseTransitions") or 0) + (1 if holder else 0),
    }


class LeaderElector:
    """Holds (or waits for) the Lease ``namespace/name``; :attr:`leading` says whether this
    candidate leads (and renewed within the renew deadline).

    ``wall_clock`` stamps and judges ``renewTime`` (other candidates read it);
    ``monotonic`` measures the renew deadline. Tests pass one fake clock for both.
    ``on_change`` is called with the new state each time leadership changes.
    """

    def __init__(
        self,
        transport: JsonTransport,
        *,
        namespace: str,
        name: str,
        identity: str,
        timings: LeaseTimings | None = None,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        on_change: Callable[[bool], None] = lambda _leading: None,
    ) -> None:
        """Compete for ``namespace/name`` as ``identity`` through ``transport``."""
        self.transport = transport
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.timings = timings if timings is not None else LeaseTimings()
        self.wall_clock = wall_clock
        self.monotonic = monotonic
        self.on_change = on_change
        self._leading = False
        self._last_renew: float | None = None

    @property
    def leading(self) -> bool:
        """Whether this candidate leads: it won the last round it finished and renewed the
        Lease less than the renew deadline ago (judged now, so a hung round cannot extend it)."""
        return self._leading and self._within_deadline()

    def _within_deadline(self) -> bool:
        return (
            self._last_renew is not None
            and self.monotonic() - self._last_renew < self.timings.renew_deadline_s
        )

    def try_acquire_or_renew(self) -> bool:
        """One round: create, renew or take over the Lease; False while another holds it.

        Raises:
            KubeApiError: the Lease could not be read or written (409: another candidate
                wrote first).
        """
        now = datetime.datetime.fromtimestamp(self.wall_clock(), datetime.UTC)
        duration = self.timings.lease_duration_s
        # Literal paths: the chart's RBAC tests read the requests from this source.
        namespace, name = path_segment(self.namespace), path_segment(self.name)
        try:
            lease = self.transport.request(
                "GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
            )
        except KubeApiError as exc:
            if exc.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": decide(None, self.identity, now, duration),
            }
            self.transport.request(
                "POST", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", body=body
            )
            return True
        spec = decide(lease.get("spec"), self.identity, now, duration)
        if spec is None:
            return False
        lease["spec"] = spec
        # The resourceVersion in the body makes this a compare-and-swap.
        self.transport.request(
            "PUT",
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
            body=lease,
        )
        return True

    def step(self) -> bool:
        """One round; failures count against the renew deadline. Returns :attr:`leading`."""
        try:
            held = self.try_acquire_or_renew()
        except KubeApiError as exc:
            log.warning(
                f"lease {self.namespace}/{self.name}: {exc}",
                extra={"event": "lease_error", "error": str(exc), "identity": self.identity},
            )
            self._set(self.leading)
            return self.leading
        if held:
            self._last_renew = self.monotonic()
        self._set(held)
        return self.leading

    def is_leader(self) -> bool:
        """Whether this candidate leads (for callers that take a callable)."""
        return self.leading

    def run(self, stop: threading.Event) -> None:
        """Compete every retry period until ``stop``; release nothing on exit."""
        while not stop.is_set():
            self.step()
            stop.wait(self.timings.retry_period_s)

    def _set(self, leading: bool) -> None:
        if leading != self._leading:
            self._leading = leading
            log.info(
                "leading" if leading else "not leading",
                extra={"event": "leader_changed", "leading": leading, "identity": self.identity},
            )
            self.on_change(leading)
