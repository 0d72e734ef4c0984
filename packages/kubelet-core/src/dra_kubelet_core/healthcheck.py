"""TCP ``grpc.health.v1`` endpoint for liveness probes.

A check succeeds only when the plugin's own unix sockets answer: registration ``GetInfo``
and an empty ``NodePrepareResources`` on the DRA socket, so a wedged server fails the probe.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from dra_kubelet_core._proto import dra_v1_pb2, grpc_health_v1_pb2, pluginregistration_v1_pb2
from dra_kubelet_core.sockets import short_socket_path

__all__ = ["HealthcheckServer", "probe_sockets"]

log = logging.getLogger(__name__)


async def probe_sockets(*, registration: Path, dra: Path, timeout_s: float = 5.0) -> str | None:
    """Dial both sockets; return ``None`` when healthy, else what failed."""
    try:
        with short_socket_path(registration) as reg_path:
            async with grpc.aio.insecure_channel(f"unix://{reg_path}") as channel:
                get_info = channel.unary_unary(
                    "/pluginregistration.Registration/GetInfo",
                    request_serializer=pluginregistration_v1_pb2.InfoRequest.SerializeToString,
                    response_deserializer=pluginregistration_v1_pb2.PluginInfo.FromString,
                )
                await get_info(pluginregistration_v1_pb2.InfoRequest(), timeout=timeout_s)
    except (TimeoutError, grpc.aio.AioRpcError) as exc:
        return f"registration socket {registration}: {exc}"
    try:
        with short_socket_path(dra) as dra_path:
            async with grpc.aio.insecure_channel(f"unix://{dra_path}") as channel:
                prepare = channel.unary_unary(
                    "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
                    request_serializer=dra_v1_pb2.NodePrepareResourcesRequest.SerializeToString,
                    response_deserializer=dra_v1_pb2.NodePrepareResourcesResponse.FromString,
                )
                await prepare(dra_v1_pb2.NodePrepareResourcesRequest(), timeout=timeout_s)
    except (TimeoutError, grpc.aio.AioRpcError) as exc:
        return f"DRA socket {dra}: {exc}"
    return None


class HealthcheckServer:
    """Serves ``grpc.health.v1.Health/Check`` on a TCP port."""

    def __init__(self, *, port: int, registration: Path, dra: Path, host: str = "[::]") -> None:
        """Serve on ``host:port`` (port 0 picks a free one) probing the given sockets."""
        self._address = f"{host}:{port}"
        self._registration = registration
        self._dra = dra
        self._server: grpc.aio.Server | None = None
        self.port = port

    async def start(self) -> None:
        """Start serving; ``self.port`` is the bound port afterwards."""
        server = grpc.aio.server()
        pb = grpc_health_v1_pb2
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "grpc.health.v1.Health",
                    {
                        "Check": grpc.unary_unary_rpc_method_handler(
                            self._check,
                            request_deserializer=pb.HealthCheckRequest.FromString,
                            response_serializer=pb.HealthCheckResponse.SerializeToString,
                        )
                    },
                ),
            )
        )
        self.port = server.add_insecure_port(self._address)
        await server.start()
        self._server = server
        log.info("healthcheck serving", extra={"event": "healthcheck_serving", "port": self.port})

    async def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            await self._server.stop(grace=1.0)
            self._server = None

    async def _check(
        self,
        request: grpc_health_v1_pb2.HealthCheckRequest,
        _context: grpc.aio.ServicerContext[Any, Any],
    ) -> grpc_health_v1_pb2.HealthCheckResponse:
        pb = grpc_health_v1_pb2.HealthCheckResponse
        if request.service not in ("", "liveness"):
            return pb(status=pb.SERVICE_UNKNOWN)
        problem = await probe_sockets(registration=self._registration, dra=self._dra)
        if problem is not None:
            log.warning(
                "healthcheck failed", extra={"event": "healthcheck_failed", "error": problem}
            )
            return pb(status=pb.NOT_SERVING)
        return pb(status=pb.SERVING)
