"""Posting ``DRAUnsatisfiable`` Events on pods and claims, without an event storm.

The same message about the same object is posted at most once per ``repeat_s``; all
posts share a token bucket (``rate_per_s``, ``burst``). Failures to post are logged and
counted, never raised: the next reconcile tries again.

One publisher serves several posters (the controller's reconciles and the kubelet plugin's
placement check, each in its own thread), so its memory is locked and each poster prunes only
the memory of its own reason.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dra_kube_client import JsonTransport, KubeApiError

log = logging.getLogger(__name__)

REASON = "DRAUnsatisfiable"
COMPONENT = "dra-allocation-controller"


@dataclass(frozen=True, slots=True)
class InvolvedObject:
    """What an Event is about."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str


@dataclass(slots=True)
class TokenBucket:
    """``rate_per_s`` tokens a second, at most ``burst`` saved."""

    rate_per_s: float
    burst: int
    clock: Callable[[], float] = time.monotonic
    _tokens: float = field(default=-1.0, init=False)
    _at: float = field(default=0.0, init=False)

    def take(self) -> bool:
        """Take one token if there is one."""
        now = self.clock()
        if self._tokens < 0:
            self._tokens, self._at = float(self.burst), now
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate_per_s)
        self._at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False


class EventPublisher:
    """Creates Warning Events, deduplicated per object and message."""

    def __init__(
        self,
        transport: JsonTransport,
        *,
        instance: str,
        repeat_s: float = 600.0,
        bucket: TokenBucket | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_outcome: Callable[[str, str], None] = lambda *_: None,
    ) -> None:
        """Post through ``transport`` as ``instance`` (the pod name)."""
        self.transport = transport
        self.instance = instance
        self.repeat_s = repeat_s
        self.bucket = bucket if bucket is not None else TokenBucket(rate_per_s=5.0, burst=20)
        self.clock = clock
        self.on_outcome = on_outcome
        # (reason, object uid, message) -> when posted. Guarded by _lock, as is the bucket.
        self._posted: dict[tuple[str, str, str], float] = {}
        self._lock = threading.Lock()

    def forget_except(self, uids: set[str], *, reason: str = REASON) -> None:
        """Drop the memory of ``reason`` Events about objects no longer of interest (keeps
        memory bounded).

        Only ``reason``'s: the caller knows which of its own objects are still of interest, not
        another poster's (the placement check's DaemonSet is no pod or claim of the
        controller's; forgetting it made its Event repeat at every check).
        """
        with self._lock:
            self._posted = {k: v for k, v in self._posted.items() if k[0] != reason or k[1] in uids}

    def warn(
        self,
        obj: InvolvedObject,
        message: str,
        *,
        reason: str = REASON,
        log_event: str = "claim_unsatisfiable",
    ) -> bool:
        """Post the Event unless it was posted recently or the rate limit is hit; the log line
        of a posted Event carries ``log_event`` (what the Event is about)."""
        now = self.clock()
        key = (reason, obj.uid, message)
        with self._lock:
            last = self._posted.get(key)
            deduplicated = last is not None and now - last < self.repeat_s
            allowed = not deduplicated and self.bucket.take()
        if deduplicated:
            self.on_outcome(reason, "deduplicated")
            return False
        if not allowed:
            self.on_outcome(reason, "rate_limited")
            return False
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{obj.name}.", "namespace": obj.namespace},
            "involvedObject": {
                "apiVersion": obj.api_version,
                "kind": obj.kind,
                "namespace": obj.namespace,
                "name": obj.name,
                "uid": obj.uid,
            },
            "reason": reason,
            "message": message,
            "type": "Warning",
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            self.transport.request("POST", f"/api/v1/namespaces/{obj.namespace}/events", body=body)
        except KubeApiError as exc:
            self.on_outcome(reason, "failed")
            log.error(
                f"cannot post {reason} event on {obj.kind} {obj.namespace}/{obj.name}: {exc}",
                extra={
                    "event": "event_post_failed",
                    "object": f"{obj.namespace}/{obj.name}",
                    "error": str(exc),
                },
            )
            return False
        with self._lock:
            self._posted[key] = now
        self.on_outcome(reason, "posted")
        log.info(
            message,
            extra={
                "event": log_event,
                "kind": obj.kind,
                # "name" is a LogRecord attribute of its own: logging refuses it as an extra.
                "object": f"{obj.namespace}/{obj.name}",
                "uid": obj.uid,
            },
        )
        return True
