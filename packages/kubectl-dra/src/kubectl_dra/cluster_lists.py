"""The cluster's lists that ``kubectl dra explain`` reads, asked for as early as possible.

This module imports only :mod:`dra_kube_client` and the standard library, so the command
line can start the lists before it imports the allocator, the models and the CEL
compiler: the API server builds the lists while this process loads those (docs/scale.md,
"explain": at 5,000 claims on a loaded host each took about a second).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from dra_kube_client import JsonTransport, KubeApiError, KubeConfigError, KubeTransport

LISTS = [
    ("/apis/resource.k8s.io/v1/deviceclasses", "resource.k8s.io/v1", "DeviceClass"),
    ("/apis/resource.k8s.io/v1/resourceslices", "resource.k8s.io/v1", "ResourceSlice"),
    ("/apis/resource.k8s.io/v1/resourceclaims", "resource.k8s.io/v1", "ResourceClaim"),
    # A pod's claims the resourceclaim controller has not made yet are made from these.
    (
        "/apis/resource.k8s.io/v1/resourceclaimtemplates",
        "resource.k8s.io/v1",
        "ResourceClaimTemplate",
    ),
    ("/apis/resource.k8s.io/v1/devicetaintrules", "resource.k8s.io/v1", "DeviceTaintRule"),
    ("/api/v1/nodes", "v1", "Node"),
]
# Served only where the DeviceTaintRule API is on; without it there are no rules to apply.
_OPTIONAL = {"DeviceTaintRule"}

_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")\]]+)")


class LiveClusterError(Exception):
    """The cluster could not be reached or refused a request (one line, for stderr)."""


class ClusterLists:
    """The lists of :data:`LISTS`, all asked for at once when this is built.

    Each list is fetched on a daemon thread of its own (a transport serves requests from
    several threads, as the informers use it), so a command that ends early, on a bad
    target say, does not wait for the replies to exit. :meth:`replies` hands them over in
    the lists' order.
    """

    def __init__(self, transport: JsonTransport, *, server: str = "") -> None:
        """Ask ``transport`` for every list now (``server`` names it in errors)."""
        self.transport = transport
        self.server = server or "(from the kubeconfig)"
        self._replies: list[Future[dict[str, Any]]] = []
        for path, _, _ in LISTS:
            reply: Future[dict[str, Any]] = Future()
            threading.Thread(
                target=_answer, args=(reply, transport, path), name="list", daemon=True
            ).start()
            self._replies.append(reply)

    def replies(self) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
        """``(path, apiVersion, kind, body)`` of each list, in :data:`LISTS`' order; an
        optional list the server does not serve is left out.

        Raises:
            LiveClusterError: the first list (in that order) that failed, in one line.
        """
        for (path, api_version, kind), reply in zip(LISTS, self._replies, strict=True):
            try:
                body = reply.result()
            except KubeApiError as exc:
                if exc.status == 404 and kind in _OPTIONAL:
                    continue
                raise self.error(exc) from exc
            yield path, api_version, kind, body

    def error(self, exc: KubeApiError) -> LiveClusterError:
        """A request's failure in one line: unreachable servers by their address and cause."""
        if exc.status == 0:
            m = _ERRNO.search(exc.message)
            cause = m.group(1).strip() if m else exc.message.splitlines()[0][:200]
            return LiveClusterError(f"cannot reach the API server {self.server}: {cause}")
        return LiveClusterError(str(exc).splitlines()[0])


def _answer(reply: Future[dict[str, Any]], transport: JsonTransport, path: str) -> None:
    try:
        reply.set_result(transport.request("GET", path))
    except BaseException as exc:  # handed to the reader, which raises it in the main thread
        reply.set_exception(exc)


def start_lists(*, kubeconfig: str | None, context: str | None) -> ClusterLists:
    """:class:`ClusterLists` of the cluster the kubeconfig (or its default) names.

    Raises:
        LiveClusterError: no usable kubeconfig.
    """
    _check_kubeconfig(kubeconfig)
    try:
        transport = KubeTransport.from_kubeconfig(kubeconfig, context=context, in_cluster=False)
    except KubeConfigError as exc:
        reason = exc.message.removeprefix("cannot load: ")
        raise LiveClusterError(f"cannot load kubeconfig {exc.source}: {reason}") from exc
    return ClusterLists(transport, server=transport.server)


def _check_kubeconfig(kubeconfig: str | None) -> None:
    """A missing kubeconfig named as such (the client says "Invalid kube-config file")."""
    if kubeconfig is not None:
        if not Path(kubeconfig).is_file():
            raise LiveClusterError(f"kubeconfig {kubeconfig} does not exist")
        return
    env = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if env:
        if not any(Path(p).is_file() for p in env):
            raise LiveClusterError(
                f"no kubeconfig: $KUBECONFIG names {', '.join(env)}, which does not exist; "
                "pass --kubeconfig FILE, or -f FILE to work offline"
            )
        return
    if not (Path.home() / ".kube" / "config").is_file():
        raise LiveClusterError(
            "no kubeconfig: --kubeconfig not given, $KUBECONFIG not set and ~/.kube/config "
            "does not exist; pass --kubeconfig FILE, or -f FILE to work offline"
        )
