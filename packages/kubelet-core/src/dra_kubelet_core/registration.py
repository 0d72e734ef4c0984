"""The kubelet plugin-registration service on ``<registrar dir>/<driver>-reg.sock``.

The kubelet's plugin watcher notices the socket, calls ``GetInfo``, connects to the endpoint
it names and reports back with ``NotifyRegistrationStatus``. A failed registration is
retried by re-creating the socket (the watcher only reacts to socket creation), with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from dra_kube_client import Backoff

from dra_kubelet_core._proto import pluginregistration_v1_pb2 as pb
from dra_kubelet_core.sockets import (
    SocketIdentity,
    bind_unix,
    remove_own_socket,
    remove_stale_socket,
    socket_identity,
)

__all__ = ["DRA_PLUGIN_TYPE", "RegistrationServer", "supported_versions"]

log = logging.getLogger(__name__)

DRA_PLUGIN_TYPE = "DRAPlugin"
_SERVICE = "pluginregistration.Registration"


def supported_versions(*, health_services: Sequence[str] = ()) -> list[str]:
    """Services the DRA endpoint serves, as the kubelet names them: newest DRA API first."""
    return ["v1.DRAPlugin", "v1beta1.DRAPlugin", *health_services]


class RegistrationServer:
    """Serves registration on a unix socket and re-registers after a failed registration."""

    def __init__(
        self,
        *,
        socket_path: Path,
        driver_name: str,
        endpoint: Path,
        versions: Sequence[str],
        retry_initial_s: float = 1.0,
        retry_max_s: float = 60.0,
    ) -> None:
        """Prepare (not start) the server; ``endpoint`` is the DRA socket's absolute path."""
        if not endpoint.is_absolute():
            raise ValueError(f"endpoint {endpoint} must be an absolute path")
        self.socket_path = socket_path
        self.info = pb.PluginInfo(
            type=DRA_PLUGIN_TYPE,
            name=driver_name,
            endpoint=str(endpoint),
            supported_versions=list(versions),
        )
        self.registered = asyncio.Event()
        self.last_error = ""
        self._server: grpc.aio.Server | None = None
        self._bound: SocketIdentity | None = None
        self._retry = Backoff(initial_s=retry_initial_s, max_s=retry_max_s)
        self._retry_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Bind the socket (removing our stale one first) and start serving."""
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_socket(self.socket_path)
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((self._handler(),))
        bind_unix(server, self.socket_path)
        self._bound = socket_identity(self.socket_path)
        await server.start()
        self._server = server
        log.info(
            "registration socket serving",
            extra={"event": "registration_serving", "socket": str(self.socket_path)},
        )

    async def stop(self) -> None:
        """Stop serving and remove the socket (if it is still ours: see
        :func:`~dra_kubelet_core.sockets.remove_own_socket`)."""
        if self._retry_task is not None:
            self._retry_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retry_task
            self._retry_task = None
        await self._stop_server()

    async def _stop_server(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=1.0)
            self._server = None
        remove_own_socket(self.socket_path, self._bound)
        self._bound = None

    def _handler(self) -> grpc.GenericRpcHandler[Any, Any]:
        return grpc.method_handlers_generic_handler(
            _SERVICE,
            {
                "GetInfo": grpc.unary_unary_rpc_method_handler(
                    self._get_info,
                    request_deserializer=pb.InfoRequest.FromString,
                    response_serializer=pb.PluginInfo.SerializeToString,
                ),
                "NotifyRegistrationStatus": grpc.unary_unary_rpc_method_handler(
                    self._notify,
                    request_deserializer=pb.RegistrationStatus.FromString,
                    response_serializer=pb.RegistrationStatusResponse.SerializeToString,
                ),
            },
        )

    async def _get_info(
        self, _request: pb.InfoRequest, _context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.PluginInfo:
        log.info("kubelet asked for plugin info", extra={"event": "registration_get_info"})
        return self.info

    async def _notify(
        self, request: pb.RegistrationStatus, _context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.RegistrationStatusResponse:
        if request.plugin_registered:
            log.info("registered with the kubelet", extra={"event": "registration_succeeded"})
            self.last_error = ""
            self._retry.reset()
            self.registered.set()
        else:
            self.last_error = request.error
            self.registered.clear()
            pending = self._retry_task is not None and not self._retry_task.done()
            delay = None if pending else self._retry.next_delay()  # None: a retry is on its way
            log.error(
                "kubelet rejected the registration; will retry",
                extra={
                    "event": "registration_failed",
                    "error": request.error,
                    "retry_in_s": delay,
                },
            )
            if delay is not None:
                self._retry_task = asyncio.get_running_loop().create_task(self._reregister(delay))
        return pb.RegistrationStatusResponse()

    async def _reregister(self, delay: float) -> None:
        await asyncio.sleep(delay)
        # Give the in-flight Notify reply a moment to be sent before the socket goes away.
        await self._stop_server()
        await self.start()
        log.info("registration socket re-created", extra={"event": "registration_retry"})
