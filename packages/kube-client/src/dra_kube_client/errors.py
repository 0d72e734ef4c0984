"""Exceptions of the Kubernetes client.

Tree::

    KubeClientError
    ├── KubeApiError      a request failed: ``status`` (0: not reached) and ``reason``
    └── KubeConfigError   the kubeconfig or in-cluster configuration cannot be loaded
"""

from __future__ import annotations

import json
from typing import cast


class KubeClientError(Exception):
    """Base class of every error raised by this package."""


class KubeApiError(KubeClientError):
    """The API server could not be reached (``status`` 0) or answered with an error status.

    ``reason`` is the ``reason`` of the server's Status body (``NotFound``, ``Conflict``,
    ``AlreadyExists``, ``Expired``...), empty when the answer had none.
    """

    def __init__(
        self, method: str, path: str, status: int, message: str, *, reason: str = ""
    ) -> None:
        """Record what was asked and what came back."""
        super().__init__(
            f"{method} {path}: HTTP {status}: {message}"
            if status
            else f"{method} {path}: {message}"
        )
        self.method = method
        self.path = path
        self.status = status
        self.message = message
        self.reason = reason


class KubeConfigError(KubeClientError):
    """The client configuration cannot be loaded; ``source`` names where it was looked for
    (the kubeconfig path, ``--kubeconfig`` default or ``in-cluster config``)."""

    def __init__(self, source: str, message: str) -> None:
        """Name the configuration source and why it failed."""
        super().__init__(f"{source}: {message}")
        self.source = source
        self.message = message


def status_fields(raw: bytes | None) -> tuple[str, str]:
    """``(reason, message)`` of a Status body; without one, no reason and the body's start."""
    if not raw:
        return "", ""
    try:
        decoded = json.loads(raw)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and isinstance(decoded.get("message"), str):
        reason = decoded.get("reason")
        return (reason if isinstance(reason, str) else "", cast(str, decoded["message"]))
    return "", raw[:200].decode(errors="replace")


def answer_error(method: str, path: str, status: int, raw: bytes | None) -> KubeApiError:
    """The :class:`KubeApiError` of a non-2xx answer whose body is ``raw``."""
    reason, message = status_fields(raw)
    return KubeApiError(method, path, status, message, reason=reason)
