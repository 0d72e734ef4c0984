"""What the webhook's server tests share: an AdmissionReview of a GpuConfig's sharing strategy
as the API server sends it, a :class:`WebhookServer` serving on its own thread for the length of
a block (the tests' ``server`` fixtures), an HTTPS request to a server on loopback that trusts
its self-signed certificate, and for a ``dra-webhook`` process the wait until it serves (its
port: ``dra_kube_client.testing.free_port``).
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from dra_controller.webhook.admission import DEFAULT_GATES
from dra_controller.webhook.server import WebhookServer

__all__ = [
    "NV",
    "SHARING_ON",
    "first_answer",
    "https_client",
    "https_request",
    "review_body",
    "serving",
]

T = TypeVar("T")

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


def https_client(cert: tuple[Path, Path], port: int) -> http.client.HTTPSConnection:
    """A connection to ``127.0.0.1:port`` trusting the self-signed certificate ``cert``
    (certificate and key files, as ``webhook_certs.write_self_signed`` writes them)."""
    context = ssl.create_default_context(cafile=str(cert[0]))
    return http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)


def https_request(
    cert: tuple[Path, Path],
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    content_type: str = "application/json",
) -> tuple[int, bytes]:
    """One request on a new :func:`https_client` connection (``Content-Type`` sent with a
    ``body`` only), closed after it; the response's status and body."""
    conn = https_client(cert, port)
    try:
        headers = {"Content-Type": content_type} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def first_answer(proc: subprocess.Popen[str], probe: Callable[[], T], *, timeout: float = 30) -> T:
    """What ``probe`` (a request to the ``dra-webhook`` process ``proc``) returns once the
    process serves: retried every 0.2 s while it raises :class:`OSError` (not listening yet);
    fails with the process's stderr if it exits, or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return probe()
        except OSError:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "dra-webhook did not start serving"
            time.sleep(0.2)
