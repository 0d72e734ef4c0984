"""Exceptions of the sharing package.

Tree::

    SharingError
    ├── SharingConfigError   a claim's sharing config is invalid or not allowed here
    │   │                    (names claim, request and field)
    │   └── SharingGateError the strategy's feature gate is off
    └── SharingApplyError    applying or undoing sharing on a GPU failed (names the GPU and
                             the operation; carries the device layer's reason)

Both concern one claim: the kubelet plugin returns them to the kubelet for that claim only.
"""

from __future__ import annotations


class SharingError(Exception):
    """Base class of every error raised by this package."""


class SharingConfigError(SharingError):
    """A claim's sharing configuration cannot be applied.

    ``claim`` is the claim's display name (``namespace/name``), ``request`` the request whose
    config is at fault and ``field`` the field path inside the opaque parameters.
    """

    def __init__(self, *, claim: str, request: str, field: str, message: str) -> None:
        super().__init__(f"claim {claim}, request {request!r}, field {field}: {message}")
        self.claim = claim
        self.request = request
        self.field = field
        self.message = message


class SharingGateError(SharingConfigError):
    """A valid config asks for a strategy whose feature gate is off (``gate`` names it)."""

    def __init__(self, *, claim: str, request: str, field: str, message: str, gate: str) -> None:
        super().__init__(claim=claim, request=request, field=field, message=message)
        self.gate = gate


class SharingApplyError(SharingError):
    """Sharing could not be applied to (or removed from) a GPU."""

    def __init__(self, *, gpu: str, operation: str, message: str) -> None:
        super().__init__(f"GPU {gpu}: {operation}: {message}")
        self.gpu = gpu
        self.operation = operation
        self.message = message
