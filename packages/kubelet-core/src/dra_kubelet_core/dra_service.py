"""The DRA node services (v1 and v1beta1) the kubelet calls, over the generated messages.

The two API versions carry the same fields (v1 adds ``share_id``); both delegate to one
:class:`~dra_kubelet_core.claims.ClaimDriver`. Errors of single claims go into the
response; only a malformed request as a whole is a gRPC error.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

import grpc
import grpc.aio

from dra_kubelet_core._proto import dra_v1_pb2, dra_v1beta1_pb2
from dra_kubelet_core.claims import ClaimDriver
from dra_kubelet_core.errors import ClaimRef
from dra_kubelet_core.logs import bind
from dra_kubelet_core.metrics import PREPARE, UNPREPARE, PluginMetrics

__all__ = ["DRA_SERVICE_NAMES", "dra_handlers"]

log = logging.getLogger(__name__)

_PACKAGES: dict[str, ModuleType] = {"v1": dra_v1_pb2, "v1beta1": dra_v1beta1_pb2}
#: gRPC service names by API version, as served on the DRA socket.
DRA_SERVICE_NAMES = {v: f"k8s.io.kubelet.pkg.apis.dra.{v}.DRAPlugin" for v in _PACKAGES}


def dra_handlers(
    driver: ClaimDriver, metrics: PluginMetrics, driver_name: str
) -> list[grpc.GenericRpcHandler[Any, Any]]:
    """Return generic handlers serving DRA v1 and v1beta1 with ``driver``; metrics are
    labelled with ``driver_name``."""
    metrics.init_driver(driver_name)
    return [
        grpc.method_handlers_generic_handler(
            DRA_SERVICE_NAMES[version],
            {
                "NodePrepareResources": grpc.unary_unary_rpc_method_handler(
                    _prepare(driver, metrics, driver_name, version, pb),
                    request_deserializer=pb.NodePrepareResourcesRequest.FromString,
                    response_serializer=pb.NodePrepareResourcesResponse.SerializeToString,
                ),
                "NodeUnprepareResources": grpc.unary_unary_rpc_method_handler(
                    _unprepare(driver, metrics, driver_name, version, pb),
                    request_deserializer=pb.NodeUnprepareResourcesRequest.FromString,
                    response_serializer=pb.NodeUnprepareResourcesResponse.SerializeToString,
                ),
            },
        )
        for version, pb in _PACKAGES.items()
    ]


Handler = Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[Any]]


def _refs(request: Any) -> list[ClaimRef]:
    return [ClaimRef(namespace=c.namespace, name=c.name, uid=c.uid) for c in request.claims]


def _prepare(
    driver: ClaimDriver, metrics: PluginMetrics, driver_name: str, version: str, pb: ModuleType
) -> Handler:
    method = "NodePrepareResources"

    async def handle(request: Any, _context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        refs = _refs(request)
        with (
            _Observe(metrics, method, version, len(refs)) as observed,
            metrics.claims_in_flight(driver_name, PREPARE, len(refs)),
        ):
            outcomes = await driver.prepare_claims(refs)
            elapsed = observed.elapsed()
            response = pb.NodePrepareResourcesResponse()
            for ref in refs:
                outcome = outcomes[ref.uid]
                entry = response.claims[ref.uid]
                if outcome.error:
                    metrics.claim_errors.labels(method=method, reason=outcome.reason).inc()
                    metrics.claim_failed(driver_name, PREPARE, outcome.reason)
                    entry.error = outcome.error
                    continue
                metrics.claim_succeeded(driver_name, PREPARE, elapsed)
                for dev in outcome.devices:
                    out = entry.devices.add(
                        request_names=list(dev.request_names),
                        pool_name=dev.pool_name,
                        device_name=dev.device_name,
                        cdi_device_ids=list(dev.cdi_device_ids),
                    )
                    if dev.share_id is not None and version == "v1":
                        out.share_id = dev.share_id
            return response

    return handle


def _unprepare(
    driver: ClaimDriver, metrics: PluginMetrics, driver_name: str, version: str, pb: ModuleType
) -> Handler:
    method = "NodeUnprepareResources"

    async def handle(request: Any, _context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        refs = _refs(request)
        with (
            _Observe(metrics, method, version, len(refs)) as observed,
            metrics.claims_in_flight(driver_name, UNPREPARE, len(refs)),
        ):
            outcomes = await driver.unprepare_claims(refs)
            elapsed = observed.elapsed()
            response = pb.NodeUnprepareResourcesResponse()
            for ref in refs:
                outcome = outcomes[ref.uid]
                response.claims[ref.uid].error = outcome.error
                if outcome.error:
                    metrics.claim_errors.labels(method=method, reason=outcome.reason).inc()
                    metrics.claim_failed(driver_name, UNPREPARE, outcome.reason)
                else:
                    metrics.claim_succeeded(driver_name, UNPREPARE, elapsed)
            return response

    return handle


class _Observe:
    """Times one request, tracks it in flight and binds a request id for its log lines."""

    def __init__(self, metrics: PluginMetrics, method: str, version: str, n_claims: int) -> None:
        self._metrics = metrics
        self._method = method
        self._version = version
        self._n = n_claims
        self._bind = bind(request_id=uuid.uuid4().hex[:12], method=method, api_version=version)
        self._start = 0.0

    def elapsed(self) -> float:
        """Seconds since the request started."""
        return time.perf_counter() - self._start

    def __enter__(self) -> _Observe:
        self._bind.__enter__()
        self._start = time.perf_counter()
        self._metrics.requests.labels(method=self._method, api_version=self._version).inc()
        self._metrics.inflight.labels(method=self._method).inc()
        log.debug("request started", extra={"event": "request_started", "claims": self._n})
        return self

    def __exit__(self, *exc: object) -> None:
        elapsed = time.perf_counter() - self._start
        self._metrics.inflight.labels(method=self._method).dec()
        self._metrics.duration.labels(method=self._method).observe(elapsed)
        # Empty requests are the liveness probe's: keep them out of the info log.
        log.log(
            logging.INFO if self._n else logging.DEBUG,
            "request finished",
            extra={"event": "request_finished", "duration_s": round(elapsed, 6)},
        )
        self._bind.__exit__(None, None, None)
