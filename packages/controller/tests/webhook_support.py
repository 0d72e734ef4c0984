"""What the webhook's server tests share: an AdmissionReview of a GpuConfig's sharing strategy
as the API server sends it, a :class:`WebhookServer` serving on its own thread for the length of
a block (the tests' ``server`` fixtures), and a free port for a ``dra-webhook`` process.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from dra_controller.webhook.admission import DEFAULT_GATES
from dra_controller.webhook.server import WebhookServer

__all__ = ["NV", "SHARING_ON", "free_port", "review_body", "serving"]

NV = "resource.nvidia.com/v1beta1"
#: NVIDIA's default gates with both sharing gates on: every strategy is admitted.
SHARING_ON = {**DEFAULT_GATES, "TimeSlicingSettings": True, "MPSSupport": True}
_PLURALS = {"ResourceClaim": "resourceclaims", "ResourceClaimTemplate": "resourceclaimtemplates"}


def review_body(strategy: str, *, kind: str = "ResourceClaim", uid: str = "abc") -> bytes:
    """The JSON of an ``admission.k8s.io/v1`` AdmissionReview creating a ``kind``
    (ResourceClaim or ResourceClaimTemplate) ``ns/c`` of ``resource.k8s.io/v1`` whose one
    opaque GpuConfig asks for the sharing ``strategy``; ``uid`` empty sends one without a uid.
    """
    devices = {
        "config": [
            {
                "opaque": {
                    "driver": "gpu.nvidia.com",
                    "parameters": {
                        "apiVersion": NV,
                        "kind": "GpuConfig",
                        "sharing": {"strategy": strategy},
                    },
                }
            }
        ]
    }
    spec = {"devices": devices} if kind == "ResourceClaim" else {"spec": {"devices": devices}}
    request = {
        "uid": uid,
        "kind": {"group": "resource.k8s.io", "version": "v1", "kind": kind},
        "resource": {"group": "resource.k8s.io", "version": "v1", "resource": _PLURALS[kind]},
        "operation": "CREATE",
        "object": {"kind": kind, "metadata": {"name": "c", "namespace": "ns"}, "spec": spec},
    }
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()


@contextmanager
def serving(server: WebhookServer) -> Iterator[WebhookServer]:
    """``server`` answering on a daemon thread until the block ends; then shut down, its
    socket closed and the thread joined (whether the block passed or failed)."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for a ``dra-webhook`` process's flags)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
