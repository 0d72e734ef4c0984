"""Claim constraints: matchAttribute and distinctAttribute, with request scoping.

With DRAListTypeAttributes (``sets``) values compare as sets, scalars as sets of one:
matchAttribute keeps the running intersection of the devices' values, which must stay
non-empty; distinctAttribute wants every device's values disjoint from every other's.
Without it a list value matches nothing (the first device of a matchAttribute aside).
"""

from __future__ import annotations

from .model import LIST_KINDS, SCALAR_KINDS, AttrValue, ConstraintSpec, DeviceInfo

# A value as a set: the element kind and the elements.
ValueSet = tuple[str, frozenset[object]]


def as_set(value: AttrValue) -> ValueSet | None:
    """The value as upstream's set form (None for an unknown kind)."""
    kind, raw = value
    if kind in SCALAR_KINDS:
        return kind, frozenset((raw,))
    if kind in LIST_KINDS and isinstance(raw, tuple):
        return kind[:-1], frozenset(raw)
    return None


def _common(a: ValueSet, b: ValueSet) -> ValueSet | None:
    """The intersection of two sets of the same kind, None when empty or of other kinds."""
    if a[0] != b[0]:
        return None
    both = a[1] & b[1]
    return (a[0], both) if both else None


def _distinct_from(value: AttrValue, others: list[AttrValue], *, sets: bool) -> bool:
    """Whether a device with ``value`` may join devices with ``others``, as upstream."""
    if sets:
        mine = as_set(value)
        if mine is None:
            return False
        for other in others:
            theirs = as_set(other)
            if theirs is not None and _common(mine, theirs) is not None:
                return False
        return True
    if others and value[0] not in SCALAR_KINDS:
        # Upstream's scalar comparison cannot compare it with anything (the first device
        # has nothing to be compared with).
        return False
    return value not in others


class Constraint:
    """Tracks the devices picked so far for the requests a constraint applies to."""

    def __init__(self, spec: ConstraintSpec, *, sets: bool = False) -> None:
        self.spec = spec
        self.requests = spec.requests
        self.attribute = spec.match_attribute or spec.distinct_attribute or ""
        self.sets = sets

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
    """All devices must have the same value of the attribute (a common one, with sets)."""

    def __init__(self, spec: ConstraintSpec, *, sets: bool = False) -> None:
        super().__init__(spec, sets=sets)
        self.value: AttrValue | None = None
        self.count = 0
        # With sets: the running intersection after each device added (popped on remove).
        self.narrowed: list[ValueSet] = []

    def add(self, request: str, subrequest: str, dev: DeviceInfo) -> bool:
        """See Constraint.add."""
        if not self.applies(request, subrequest):
            return True
        value = dev.attributes.get(self.attribute)
        if value is None:
            return False
        if self.sets:
            mine = as_set(value)
            if mine is None:
                return False
            if self.count:
                narrowed = _common(self.narrowed[self.count - 1], mine)
                if narrowed is None:
                    return False
                mine = narrowed
            del self.narrowed[self.count :]
            self.narrowed.append(mine)
            self.count += 1
            return True
        if self.count == 0:
            self.value = value
            self.count = 1
            return True
        if value[0] not in SCALAR_KINDS or value != self.value:
            return False
        self.count += 1
        return True

    def remove(self, request: str, subrequest: str, dev: DeviceInfo) -> None:  # noqa: ARG002
        """See Constraint.remove (the count, and with sets the intersection, go back)."""
        if self.applies(request, subrequest):
            self.count -= 1
            del self.narrowed[self.count :]


class DistinctAttribute(Constraint):
    """Devices must have different values of the attribute (Kubernetes 1.37+).

    Every device added keeps its value until it is removed again (removals undo the
    latest addition, as the search backtracks).
    """

    def __init__(self, spec: ConstraintSpec, *, sets: bool = False) -> None:
        super().__init__(spec, sets=sets)
        self.values: list[AttrValue] = []

    def add(self, request: str, subrequest: str, dev: DeviceInfo) -> bool:
        """See Constraint.add."""
        if not self.applies(request, subrequest):
            return True
        value = dev.attributes.get(self.attribute)
        if value is None or not _distinct_from(value, self.values, sets=self.sets):
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

    def __init__(self, spec: ConstraintSpec, *, sets: bool = False) -> None:
        super().__init__(spec, sets=sets)
        self.values: dict[str, AttrValue] = {}

    def add(self, request: str, subrequest: str, dev: DeviceInfo) -> bool:
        """See Constraint.add."""
        if not self.applies(request, subrequest):
            return True
        value = dev.attributes.get(self.attribute)
        others = list(self.values.values())
        if value is None or not _distinct_from(value, others, sets=self.sets):
            return False
        self.values[request] = value
        return True

    def remove(self, request: str, subrequest: str, dev: DeviceInfo) -> None:  # noqa: ARG002
        """See Constraint.remove: drops the request's value, as the scheduler does."""
        if self.applies(request, subrequest):
            self.values.pop(request, None)


def build_constraint(
    spec: ConstraintSpec, *, kube_minor: int, sets: bool = False
) -> Constraint | None:
    """The tracker for a constraint spec, or None for an unknown constraint type.

    ``sets`` is DRAListTypeAttributes (set semantics, list values included).
    """
    if spec.match_attribute:
        return MatchAttribute(spec, sets=sets)
    if spec.distinct_attribute:
        if kube_minor >= 37:
            return DistinctAttribute(spec, sets=sets)
        return DistinctAttributePerRequest(spec, sets=sets)
    return None
