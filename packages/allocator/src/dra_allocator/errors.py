"""Errors raised by the structured allocator.

Exception tree::

    AllocationError                  invalid input: the kube-scheduler's allocator errors out too
    +-- UnknownDeviceClassError      request names a DeviceClass that does not exist
    +-- UnsupportedRequestError      empty selector, unknown allocation mode, bad count, ...
    +-- FeatureDisabledError         request uses a field whose feature switch is off
    +-- SelectorError                a CEL selector failed to compile or to evaluate
    +-- TooManyDevicesError          a claim needs more than 32 devices
    +-- InvalidPoolError             a pool needed for allocation is invalid or being updated
    +-- ConstraintError              an "All" request can never satisfy a claim constraint
    +-- AllocationTimeoutError       the search ran past its deadline
    +-- UpstreamCrashError           the modelled release's allocator crashes on this input

Being unsatisfiable on a node is *not* an error: ``Allocator.allocate`` returns ``None``
for that, so callers can try the next node.
"""

from __future__ import annotations


class AllocationError(Exception):
    """Invalid input for allocation: names the object and the field at fault."""

    def __init__(self, message: str, *, object_ref: str = "", field: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.object_ref = object_ref
        self.field = field

    def __str__(self) -> str:
        parts = []
        if self.object_ref:
            parts.append(self.object_ref)
        if self.field:
            parts.append(self.field)
        prefix = ", ".join(parts)
        return f"{prefix}: {self.message}" if prefix else self.message


class UnknownDeviceClassError(AllocationError):
    """A request refers to a DeviceClass that is not known."""


class UnsupportedRequestError(AllocationError):
    """A request or constraint has a shape this allocator cannot handle."""


class FeatureDisabledError(AllocationError):
    """A request uses a field whose feature switch is disabled."""


class SelectorError(AllocationError):
    """A CEL selector failed to compile or raised at runtime."""


class TooManyDevicesError(AllocationError):
    """A claim would need more devices than fit into an allocation result."""


class InvalidPoolError(AllocationError):
    """A resource pool is invalid (or incomplete where completeness is required)."""


class ConstraintError(AllocationError):
    """An "All" request cannot satisfy a claim constraint."""


class AllocationTimeoutError(AllocationError):
    """The search for a solution exceeded its deadline."""


class CapacityRequestError(AllocationError):
    """A capacity request the allocator cannot round (not representable) or a negative one."""


class UpstreamCrashError(AllocationError):
    """The reproduced release's allocator crashes here (a bug fixed later), so no answer."""
