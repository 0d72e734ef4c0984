"""Leader election with a coordination.k8s.io/v1 Lease (NVIDIA's timings: 15 s/10 s/2 s).

:func:`decide` is the pure rule; :class:`LeaseElector` applies it through the API server,
using the Lease's resourceVersion so two candidates never both win one term.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass
from typing import Any

from dra_kube_client import JsonTransport, KubeApiError, path_segment

__all__ = ["LeaseElector", "LeaseTimings", "decide"]

log = logging.getLogger(__name__)
_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass(frozen=True)
class LeaseTimings:
    """``--leader-election-*`` durations in seconds."""

    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0


def _parse(value: object) -> datetime.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    for fmt in (_FORMAT, "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.datetime.strptime(value, fmt).replace(tzinfo=datetime.UTC)
        except ValueError:
            continue
    return None


def decide(
    lease_spec: dict[str, Any] | None, identity: str, now: datetime.datetime, duration_s: float
) -> dict[str, Any] | None:
    """The Lease spec to write to hold (or take) the lease, or None if another holds it."""
    stamp = now.strftime(_FORMAT)
    spec = dict(lease_spec or {})
    holder = spec.get("holderIdentity")
    renewed = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime"))
    held_for = float(spec.get("leaseDurationSeconds") or duration_s)
    expired = renewed is None or (now - renewed).total_seconds() > held_for
    if holder == identity:
        spec["renewTime"] = stamp
        spec["leaseDurationSeconds"] = int(duration_s)
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


class LeaseElector:
    """Tries to hold the Lease ``name`` in ``namespace`` as ``identity``."""

    def __init__(
        self,
        transport: JsonTransport,
        *,
        namespace: str,
        name: str,
        identity: str,
        timings: LeaseTimings,
    ) -> None:
        """Elect through ``transport``."""
        self._transport = transport
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{path_segment(namespace)}/leases"
        self._namespace = namespace
        self._name = name
        self.identity = identity
        self.timings = timings

    def try_hold(self) -> bool:
        """One attempt to acquire or renew; True while this candidate leads."""
        now = datetime.datetime.now(datetime.UTC)
        try:
            lease = self._transport.request("GET", f"{self._path}/{path_segment(self._name)}")
        except KubeApiError as exc:
            if exc.status != 404:
                log.warning("lease read failed", extra={"event": "lease_error", "error": str(exc)})
                return False
            spec = decide(None, self.identity, now, self.timings.lease_duration_s)
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self._name, "namespace": self._namespace},
                "spec": spec,
            }
            try:
                self._transport.request("POST", self._path, body=body)
            except KubeApiError:
                return False
            log.info("became leader", extra={"event": "leader_acquired", "lease": self._name})
            return True
        spec = decide(lease.get("spec"), self.identity, now, self.timings.lease_duration_s)
        if spec is None:
            return False
        lease["spec"] = spec
        try:
            self._transport.request("PUT", f"{self._path}/{path_segment(self._name)}", body=lease)
        except KubeApiError as exc:
            # 409: another candidate wrote first; it holds the lease this term.
            log.info("lease not taken", extra={"event": "lease_lost", "error": str(exc)})
            return False
        return True
