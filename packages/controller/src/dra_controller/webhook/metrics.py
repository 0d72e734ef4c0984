"""The webhook's own review latency, for Prometheus (served by ``dra-webhook --metrics-port``).

``dra_webhook_review_duration_seconds{kind,outcome}``: a histogram of the time one review
takes inside the webhook, from the moment its request's headers have been read (just before
its body is read) to the moment its response has been written to the connection (flushed
into the socket). It covers reading the body, decoding the JSON, judging the object,
encoding the answer and writing it (through TLS). It does not cover what the API server's
``apiserver_admission_webhook_admission_duration_seconds`` adds: the TLS handshake of a new
connection, the network both ways, reading the request line and headers, and a request's
wait for a free thread or the interpreter.

The buckets are fine around issue #27's target (p99 <= 20 ms; the API server's buckets are 5,
25, 100 ms ...), and 20 ms is a bound, so a histogram can tell whether p99 is under it.

``kind``: ``ResourceClaim``, ``ResourceClaimTemplate`` (the request's ``kind.kind``), or
``other`` (anything else, or a body that could not be read that far). ``outcome``:
``allowed``, ``denied`` (a verdict), or ``error`` (no verdict: the request was answered
with an HTTP error, e.g. a body that is not an AdmissionReview).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from prometheus_client import CollectorRegistry, Histogram

__all__ = [
    "BUCKETS",
    "KINDS",
    "OTHER_KIND",
    "OUTCOMES",
    "REVIEW_SECONDS",
    "ReviewMetrics",
    "reviewed_kind",
]

PREFIX: Final = "dra_webhook"
REVIEW_SECONDS: Final = f"{PREFIX}_review_duration_seconds"
#: Seconds: 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 25, 50, 100, 250, 1000 ms.
BUCKETS: Final = (
    0.0005,
    0.001,
    0.002,
    0.003,
    0.005,
    0.0075,
    0.01,
    0.015,
    0.02,
    0.025,
    0.05,
    0.1,
    0.25,
    1.0,
)
KINDS: Final = ("ResourceClaim", "ResourceClaimTemplate")
OTHER_KIND: Final = "other"
OUTCOMES: Final = ("allowed", "denied", "error")


def reviewed_kind(body: object) -> str:
    """The ``kind`` label of a decoded AdmissionReview: its ``request.kind.kind`` when that is
    one of :data:`KINDS`, else ``other`` (the label's values stay a closed set)."""
    request = body.get("request") if isinstance(body, Mapping) else None
    kind = request.get("kind") if isinstance(request, Mapping) else None
    name = kind.get("kind") if isinstance(kind, Mapping) else None
    return name if isinstance(name, str) and name in KINDS else OTHER_KIND


class ReviewMetrics:
    """The webhook's metrics, on a registry of their own (what ``/metrics`` serves)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        """Register the histogram, with every ``kind`` and ``outcome`` series at zero (a
        scrape before the first review already has them)."""
        self.registry = registry if registry is not None else CollectorRegistry()
        self.review_seconds = Histogram(
            REVIEW_SECONDS,
            "Time a review takes in the webhook: from its body's read to its response written, "
            "by the reviewed kind and the outcome (allowed, denied, error)",
            ["kind", "outcome"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        for kind in (*KINDS, OTHER_KIND):
            for outcome in OUTCOMES:
                self.review_seconds.labels(kind, outcome)

    def observe(self, kind: str, outcome: str, seconds: float) -> None:
        """Count one review of ``kind`` (see :func:`reviewed_kind`) that took ``seconds``.

        Raises ValueError naming ``outcome`` when it is not one of :data:`OUTCOMES`.
        """
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome: {outcome!r} is not one of {', '.join(OUTCOMES)}")
        label = kind if kind in KINDS else OTHER_KIND
        self.review_seconds.labels(label, outcome).observe(seconds)
