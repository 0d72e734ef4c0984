"""Prometheus metrics of the plugin, on a registry of its own (served by ``--http-endpoint``).

Two families, both always exported:

* NVIDIA's (``nvidia_dra_*``), with the names, labels, types and buckets of NVIDIA's driver
  (``pkg/metrics``), so operators' dashboards and alerts keep working when they switch:
  per-claim prepare/unprepare counts, durations and in-flight gauges by ``driver`` and
  ``operation``; prepared devices by ``node``, ``driver`` and ``device_type``; prepare and
  unprepare failures by ``driver`` and ``error_type``. As there, a claim is counted in
  ``nvidia_dra_requests_total`` (and its duration observed) when it succeeded. Beyond
  NVIDIA's: ``nvidia_dra_device_allocation_info`` (value 1), one series per prepared device,
  pod and container, labelled to join dcgm-exporter's series (:mod:`.allocation_info`,
  :mod:`.pod_containers`).
* This plugin's own (``dra_kubelet_plugin_*``): per gRPC call, with our failure reasons, slice
  writes and checkpoint problems.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from http import HTTPStatus
from http.server import ThreadingHTTPServer
from typing import Final

from dra_kube_client import DelegatedAuth, admit, start_http_server
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import MetricsHandler
from prometheus_client.registry import Collector

from dra_kubelet_core.allocation_info import ALLOCATION_INFO_LABELS, AllocationInfo
from dra_kubelet_core.pod_containers import ContainerIndex, ContainerSource, with_containers

__all__ = [
    "ALLOCATION_INFO",
    "NVIDIA_DEVICE_TYPES",
    "NVIDIA_OPERATIONS",
    "NVIDIA_REQUEST_BUCKETS",
    "PREPARE",
    "UNPREPARE",
    "PluginMetrics",
    "nvidia_error_type",
    "serve_metrics",
]

PREPARE: Final = "prepare"
UNPREPARE: Final = "unprepare"
NVIDIA_OPERATIONS: Final = (PREPARE, UNPREPARE)
#: ``device_type`` values of ``nvidia_dra_prepared_devices`` (NVIDIA's, "unknown" included).
NVIDIA_DEVICE_TYPES: Final = ("gpu", "mig", "vfio", "unknown")
#: NVIDIA's ``ExponentialBuckets(0.05, 2, 9)``: 50 ms to 12.8 s.
NVIDIA_REQUEST_BUCKETS: Final = tuple(0.05 * 2**i for i in range(9))

#: The per-pod device series (``{ALLOCATION_INFO_LABELS} 1``).
ALLOCATION_INFO: Final = "nvidia_dra_device_allocation_info"

#: Our failure reasons that NVIDIA's driver reports under an error type of their own.
_NVIDIA_ERROR_TYPES: Final = {"LockTimeout": "lock_acquire"}


def nvidia_error_type(operation: str, reason: str) -> str:
    """NVIDIA's ``error_type`` of a failed claim: ``lock_acquire`` when the node lock was not
    acquired, otherwise ``prepare_devices`` / ``unprepare_devices`` (``reason`` is ours)."""
    return _NVIDIA_ERROR_TYPES.get(reason, f"{operation}_devices")


def _no_containers() -> ContainerIndex:
    return {}


class _AllocationCollector(Collector):
    """Serves the rows swapped in whole by the last checkpoint write (never half of two),
    each once per container the source lists for it at scrape time."""

    def __init__(self) -> None:
        self.rows: tuple[AllocationInfo, ...] = ()
        self.containers: ContainerSource = _no_containers
        self.lock = threading.Lock()

    def collect(self) -> Iterable[GaugeMetricFamily]:
        with self.lock:
            rows, containers = self.rows, self.containers
        family = GaugeMetricFamily(
            ALLOCATION_INFO,
            "1 per prepared device, pod the claim is reserved for and container of the pod "
            "using the claim; UUID and GPU_I_ID join dcgm-exporter's series",
            labels=list(ALLOCATION_INFO_LABELS),
        )
        # No prepared device: nothing to ask the kubelet about.
        for row in with_containers(rows, containers()) if rows else ():
            family.add_metric(row.values(), 1)
        return [family]


class PluginMetrics:
    """The plugin's metrics: kubelet requests, durations, in-flight calls, devices, errors."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        """Register the metrics on ``registry`` (a fresh one by default)."""
        self.registry = registry if registry is not None else CollectorRegistry()
        self._register_nvidia()
        self._allocations = _AllocationCollector()
        self.registry.register(self._allocations)
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

    def _register_nvidia(self) -> None:
        self.nvidia_requests = Counter(
            "nvidia_dra_requests",
            "Total number of DRA prepare and unprepare requests.",
            ["driver", "operation"],
            registry=self.registry,
        )
        self.nvidia_duration = Histogram(
            "nvidia_dra_request_duration_seconds",
            "Duration of DRA prepare and unprepare requests.",
            ["driver", "operation"],
            buckets=NVIDIA_REQUEST_BUCKETS,
            registry=self.registry,
        )
        self.nvidia_inflight = Gauge(
            "nvidia_dra_requests_inflight",
            "Number of in-flight DRA prepare and unprepare requests.",
            ["driver", "operation"],
            registry=self.registry,
        )
        self.nvidia_prepared_devices = Gauge(
            "nvidia_dra_prepared_devices",
            "Current number of prepared devices by device type.",
            ["node", "driver", "device_type"],
            registry=self.registry,
        )
        self.nvidia_prepare_errors = Counter(
            "nvidia_dra_node_prepare_errors",
            "Total number of failures during DRA node prepare for kubelet plugins.",
            ["driver", "error_type"],
            registry=self.registry,
        )
        self.nvidia_unprepare_errors = Counter(
            "nvidia_dra_node_unprepare_errors",
            "Total number of failures during DRA node unprepare for kubelet plugins.",
            ["driver", "error_type"],
            registry=self.registry,
        )

    def init_driver(self, driver: str) -> None:
        """Create the zero request series of ``driver``, so the first scrape shows them."""
        for operation in NVIDIA_OPERATIONS:
            self.nvidia_requests.labels(driver=driver, operation=operation)
            self.nvidia_duration.labels(driver=driver, operation=operation)
            self.nvidia_inflight.labels(driver=driver, operation=operation)

    @contextmanager
    def claims_in_flight(self, driver: str, operation: str, count: int) -> Iterator[None]:
        """Count ``count`` claims of ``operation`` in flight while the block runs."""
        gauge = self.nvidia_inflight.labels(driver=driver, operation=operation)
        gauge.inc(count)
        try:
            yield
        finally:
            gauge.dec(count)

    def claim_succeeded(self, driver: str, operation: str, seconds: float) -> None:
        """One claim's ``operation`` succeeded after ``seconds``."""
        self.nvidia_requests.labels(driver=driver, operation=operation).inc()
        self.nvidia_duration.labels(driver=driver, operation=operation).observe(seconds)

    def claim_failed(self, driver: str, operation: str, reason: str) -> None:
        """One claim's ``operation`` failed with our ``reason`` (a ClaimError's, or another)."""
        errors = (
            self.nvidia_prepare_errors if operation == PREPARE else self.nvidia_unprepare_errors
        )
        errors.labels(driver=driver, error_type=nvidia_error_type(operation, reason)).inc()

    def set_prepared_devices(self, node: str, driver: str, counts: Mapping[str, int]) -> None:
        """Set the prepared device gauges of every NVIDIA device type (absent ones to 0)."""
        for device_type in (*NVIDIA_DEVICE_TYPES, *sorted(set(counts) - set(NVIDIA_DEVICE_TYPES))):
            self.nvidia_prepared_devices.labels(
                node=node, driver=driver, device_type=device_type
            ).set(counts.get(device_type, 0))

    def set_allocation_info(self, rows: Sequence[AllocationInfo]) -> None:
        """Replace every ``nvidia_dra_device_allocation_info`` series with ``rows``."""
        with self._allocations.lock:
            self._allocations.rows = tuple(rows)

    def set_container_source(self, containers: ContainerSource) -> None:
        """Label ``nvidia_dra_device_allocation_info`` with the containers ``containers``
        lists when scraped (by default none: ``container`` stays empty)."""
        with self._allocations.lock:
            self._allocations.containers = containers


def serve_metrics(
    registry: CollectorRegistry,
    host: str,
    port: int,
    path: str = "/metrics",
    *,
    tls: ssl.SSLContext | None = None,
    auth: DelegatedAuth | None = None,
) -> ThreadingHTTPServer:
    """Start serving ``registry`` at ``host:port/path`` (other paths: 404) in a thread; call
    ``shutdown()`` on the result to stop. Port 0 picks a free port.

    HTTPS with ``tls``; with ``auth`` every request is authenticated and authorized first
    (401/403, :func:`dra_kube_client.admit`). Both None: plain HTTP to anyone, which only
    ``--metrics-insecure=true`` asks for.
    """
    wanted = "/" + path.strip("/")

    class _Handler(MetricsHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib handler's method name)
            if self.path.split("?", 1)[0] != wanted:
                self.send_error(HTTPStatus.NOT_FOUND, f"metrics are served at {wanted}")
                return
            if not admit(self, auth):
                return
            super().do_GET()

    _Handler.registry = registry
    return start_http_server((host, port), _Handler, tls=tls, name="metrics-http")
