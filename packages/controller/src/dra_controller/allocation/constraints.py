"""Claim constraints: matchAttribute and distinctAttribute, with request scoping."""

from __future__ import annotations

from .model import AttrValue, ConstraintSpec, DeviceInfo


class Constraint:
    """Tracks the devices picked so far for the requests a constraint applies to."""

    def __init__(self, spec: ConstraintSpec) -> None:
        self.spec = spec
        self.requests = spec.requests
        self.attribute = spec.match_attribute or spec.distinct_attribute or ""

    def applies(self, request: str, subrequest: str) -> bool:
        """An empty request list means all; ``req`` also covers ``req/sub``."""
        if not self.requests:
            return True
        if request in self.requests:
            return True
        return bool(subrequest) and f"{request}/{subrequest}" in self.requests

    def add(self, request: str, subrequest: str, dev: DeviceInfo) -> bool:
        """Try to add the device; False if that would violate the constraint."""
        raise NotImplementedError

    def remove(self, request: str, subrequest: str, dev: DeviceInfo) -> None:
        """Undo a successful ``add`` with the same arguments."""
        raise NotImplementedError


class MatchAttribute(Constraint):
    """All devices must have the same value of the attribute."""

    def __init__(self, spec: ConstraintSpec) -> None:
        super().__init__(spec)
        self.value: AttrValue | None = None
        self.count = 0

    def add(self, request: str, subrequest: str, dev: DeviceInfo) -> bool:
        """See Constraint.add."""
        if not self.applies(request, subrequest):
            return True
        value = dev.attributes.get(self.attribute)
        if value is None:
            return False
        if self.count == 0:
            self.value = value
            self.count = 1
            return True
        if value[0] == "unknown" or value != self.value:
            return False
        self.count += 1
        return True

    def remove(self, request: str, subrequest: str, dev: DeviceInfo) -> None:  # noqa: ARG002
        """See Constraint.remove (only the count is tracked)."""
        if self.applies(request, subrequest):
            self.count -= 1


class DistinctAttribute(Constraint):
    """Devices must have different values of the attribute (Kubernetes 1.37+).

    Every device added keeps its value until it is removed again (removals undo the
    latest addition, as the search backtracks).
    """

    def __init__(self, spec: ConstraintSpec) -> None:
        super().__init__(spec)
        self.values: list[AttrValue] = []

    def add(self, request: str, subrequest: str, dev: DeviceInfo) -> bool:
        """See Constraint.add."""
        if not self.applies(request, subrequest):
            return True
        value = dev.attributes.get(self.attribute)
        if value is None or value[0] == "unknown":
            return False
        if value in self.values:
            return False
        self.values.append(value)
        return True

    def remove(self, request: str, subrequest: str, dev: DeviceInfo) -> None:  # noqa: ARG002
        """See Constraint.remove."""
        if self.applies(request, subrequest):
            self.values.pop()


class DistinctAttributePerRequest(Constraint):
    """distinctAttribute as the kube-scheduler 1.36 checks it.

    The 1.36 scheduler remembers one value per request (the last device added for it)
    and forgets it when any device of that request is removed, so a request with several
    devices is only checked against its latest one. Choices must equal the scheduler's, so
    this tracks the same way; the differential e2e test found the difference.
    """

    def __init__(self, spec: ConstraintSpec) -> None:
        super().__init__(spec)
        self.values: dict[str, AttrValue] = {}

    def add(self, request: str, subrequest: str, dev: DeviceInfo) -> bool:
        """See Constraint.add."""
        if not self.applies(request, subrequest):
            return True
        value = dev.attributes.get(self.attribute)
        if value is None or value[0] == "unknown":
            return False
        if any(existing == value for existing in self.values.values()):
            return False
        self.values[request] = value
        return True

    def remove(self, request: str, subrequest: str, dev: DeviceInfo) -> None:  # noqa: ARG002
        """See Constraint.remove: drops the request's value, as the scheduler does."""
        if self.applies(request, subrequest):
            self.values.pop(request, None)


def build_constraint(spec: ConstraintSpec, *, kube_minor: int) -> Constraint | None:
    """The tracker for a constraint spec, or None for an unknown constraint type."""
    if spec.match_attribute:
        return MatchAttribute(spec)
    if spec.distinct_attribute:
        return DistinctAttribute(spec) if kube_minor >= 37 else DistinctAttributePerRequest(spec)
    return None
