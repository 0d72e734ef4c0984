"""Prometheus metrics of the plugin, on a registry of its own (served by ``--http-endpoint``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["PluginMetrics"]


class PluginMetrics:
    """The plugin's metrics: kubelet requests, durations, in-flight calls, devices, errors."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        """Register the metrics on ``registry`` (a fresh one by default)."""
        self.registry = registry if registry is not None else CollectorRegistry()
        self.requests = Counter(
            "dra_kubelet_plugin_requests",
            "gRPC requests served, by method and API version",
            ["method", "api_version"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "dra_kubelet_plugin_request_duration_seconds",
            "gRPC request duration, by method",
            ["method"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.inflight = Gauge(
            "dra_kubelet_plugin_requests_inflight",
            "gRPC requests being served now, by method",
            ["method"],
            registry=self.registry,
        )
        self.prepared_devices = Gauge(
            "dra_kubelet_plugin_prepared_devices",
            "Devices currently prepared for claims on this node",
            registry=self.registry,
        )
        self.prepared_claims = Gauge(
            "dra_kubelet_plugin_prepared_claims",
            "Claims currently prepared on this node",
            registry=self.registry,
        )
        self.claim_errors = Counter(
            "dra_kubelet_plugin_claim_errors",
            "Per-claim errors returned to the kubelet, by method and reason",
            ["method", "reason"],
            registry=self.registry,
        )
        self.slice_publications = Counter(
            "dra_kubelet_plugin_resourceslice_publications",
            "ResourceSlice writes to the API server, by operation",
            ["operation"],
            registry=self.registry,
        )
        self.checkpoint_problems = Counter(
            "dra_kubelet_plugin_checkpoint_problems",
            "Checkpoint files found unusable at start (moved aside)",
            registry=self.registry,
        )
