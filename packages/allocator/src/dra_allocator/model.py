"""The allocator's own view of DeviceClasses, ResourceSlices and ResourceClaims.

Objects arrive as api-types' lenient ``resource.k8s.io/v1`` models (what
:func:`read_model` makes of the apiserver's JSON: unknown fields kept, no API validation).
They are turned once into slotted records with everything the search loop needs
precomputed (fully-qualified attributes, exact quantities, ids), so that the loop never
walks the models again. Only input that cannot be read raises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_api_types import (
    AllocationResult,
    Amount,
    ApiObject,
    Counter,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceClaimConfiguration,
    DeviceClass,
    DeviceClassConfiguration,
    DeviceSelector,
    DeviceSubRequest,
    DeviceToleration,
    ExactDeviceRequest,
    NodeSelector,
    Quantity,
    QuantityError,
    ResourceClaim,
    ResourceSlice,
    ValidationError,
    parse_object,
)

from .errors import AllocationError
from .taint_rules import apply_taint_rules

RawObject = Mapping[str, Any]
DeviceID = tuple[str, str, str]
AttrValue = tuple[str, object]

MODE_EXACT = "ExactCount"
MODE_ALL = "All"


def read_model(data: Mapping[str, Any], *, where: str) -> ApiObject:
    """An object's api-types model, parsed leniently (no API validation).

    Raises:
        AllocationError: the JSON does not fit the model (naming ``where`` and the field).
    """
    try:
        obj = parse_object(data, validate=False)
    except ValidationError as exc:
        raise AllocationError(
            f"cannot parse: {exc}", object_ref=where, field=getattr(exc, "path", "")
        ) from exc
    except (TypeError, ValueError) as exc:
        raise AllocationError(f"cannot parse: {exc}", object_ref=where) from exc
    if not isinstance(obj, ApiObject):
        raise AllocationError(f"cannot parse: no model for {data.get('kind')}", object_ref=where)
    return obj


def parse_quantity(value: object, *, where: str = "") -> Amount:
    """A quantity as written in an object (``"80Gi"``, ``"1.5"``, ``7``), exactly."""
    try:
        return Quantity.coerce(value).amount()
    except QuantityError as exc:
        raise AllocationError(f"not a quantity: {value!r}", field=where) from exc


def _written(q: Quantity) -> str:
    """The quantity as the apiserver stores it (what Go's ``==`` and the result format see)."""
    return str(q)


# The scalar kinds of an attribute value, and the list kinds of DRAListTypeAttributes
# (a tuple of values each), named by their JSON field.
SCALAR_KINDS = ("int", "bool", "string", "version")
LIST_KINDS = ("ints", "bools", "strings", "versions")


def _attr_value(attr: DeviceAttribute, *, ref: str, path: str) -> AttrValue:
    # Lists first, as upstream reads them (a value sets exactly one field).
    lists = (("ints", attr.ints), ("bools", attr.bools), ("strings", attr.strings))
    for key, values in (*lists, ("versions", attr.versions)):
        if values is None:
            continue
        if not values:
            raise AllocationError("must be a non-empty list", object_ref=ref, field=f"{path}.{key}")
        return (key, tuple(values))
    scalars = (("int", attr.int_), ("bool", attr.bool_), ("string", attr.string))
    for key, value in (*scalars, ("version", attr.version)):
        if value is not None:
            return (key, value)
    return ("unknown", None)


@dataclass(frozen=True, slots=True)
class Taint:
    """A device taint."""

    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    """A device toleration of a request."""

    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        """Same rule as resourceclaim.ToleratesTaint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


@dataclass(frozen=True, slots=True)
class CapacityInfo:
    """One capacity of a device, with its request policy.

    The ``*_raw`` fields are the quantities as written, which decide the result's format and
    what Go's ``==`` sees.
    """

    quantity: Quantity
    value: Amount
    default: Amount | None
    default_raw: str | None
    valid_values: tuple[tuple[Amount, str], ...]
    range_min: Amount | None
    range_min_raw: str | None
    range_max: Amount | None
    range_step: Amount | None
    range_step_raw: str | None
    has_policy: bool
    has_range: bool


@dataclass(eq=False, slots=True)
class DeviceInfo:
    """One device of a slice, parsed for the search loop."""

    id: DeviceID
    name: str
    slice: SliceInfo
    attributes: dict[str, AttrValue]
    capacity: dict[str, CapacityInfo]
    consumes_counters: tuple[tuple[str, tuple[tuple[str, Amount], ...]], ...]
    taints: tuple[Taint, ...]
    binding_conditions: tuple[str, ...]
    binding_failure_conditions: tuple[str, ...]
    binds_to_node: bool
    allow_multiple: bool
    node_name: str
    all_nodes: bool
    node_selector: NodeSelector | None
    # Selector results are pure functions of the device, so they are cached across claims.
    selector_cache: dict[str, bool | Exception] = field(default_factory=dict)
    cel_device: object | None = None

    @property
    def driver(self) -> str:
        """The driver that publishes the device."""
        return self.id[0]

    @property
    def pool(self) -> str:
        """The pool the device belongs to."""
        return self.id[1]

    def lookup_attribute(self, qualified: str) -> AttrValue | None:
        """Fully-qualified attribute lookup as in the allocator's constraints."""
        return self.attributes.get(qualified)


@dataclass(eq=False, slots=True)
class SliceInfo:
    """A ResourceSlice."""

    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    node_name: str
    all_nodes: bool
    node_selector: NodeSelector | None
    per_device_node_selection: bool
    shared_counters: tuple[tuple[str, dict[str, Amount]], ...]
    devices: list[DeviceInfo]

    @property
    def ref(self) -> str:
        """How errors name this object."""
        return f"ResourceSlice {self.name}"


def _counter_values(counters: Mapping[str, Counter]) -> tuple[tuple[str, Amount], ...]:
    return tuple((cname, c.value.amount()) for cname, c in counters.items())


def parse_slice(obj: ResourceSlice) -> SliceInfo:
    """Turn a v1 ResourceSlice into the allocator's record."""
    name = obj.metadata.name or ""
    spec = obj.spec
    counters = [(cs.name, dict(_counter_values(cs.counters))) for cs in spec.shared_counters or []]
    info = SliceInfo(
        name=name,
        driver=spec.driver,
        pool=spec.pool.name,
        generation=spec.pool.generation,
        slice_count=spec.pool.resource_slice_count,
        node_name=spec.node_name or "",
        all_nodes=bool(spec.all_nodes),
        node_selector=spec.node_selector,
        per_device_node_selection=bool(spec.per_device_node_selection),
        shared_counters=tuple(counters),
        devices=[],
    )
    for i, dev in enumerate(spec.devices or []):
        info.devices.append(_parse_device(dev, info, where=f"spec.devices[{i}]"))
    return info


def _parse_capacity(cap: DeviceCapacity) -> CapacityInfo:
    """A capacity and its request policy."""
    policy = cap.request_policy
    rng = policy.valid_range if policy is not None else None
    default = policy.default if policy is not None else None
    has_min = rng is not None and "min" in rng.model_fields_set
    low = rng.min if rng is not None and has_min else None
    step = rng.step if rng is not None else None
    high = rng.max if rng is not None else None
    return CapacityInfo(
        quantity=cap.value,
        value=cap.value.amount(),
        default=None if default is None else default.amount(),
        default_raw=None if default is None else _written(default),
        valid_values=tuple(
            (v.amount(), _written(v)) for v in (policy.valid_values or [] if policy else [])
        ),
        range_min=None if low is None else low.amount(),
        range_min_raw=None if low is None else _written(low),
        range_max=None if high is None else high.amount(),
        range_step=None if step is None else step.amount(),
        range_step_raw=None if step is None else _written(step),
        has_policy=policy is not None,
        has_range=rng is not None,
    )


def _parse_device(dev: Device, slc: SliceInfo, *, where: str) -> DeviceInfo:
    ref = slc.ref
    attributes: dict[str, AttrValue] = {}
    qualified_given: dict[str, AttrValue] = {}
    for key, value in (dev.attributes or {}).items():
        parsed = _attr_value(value, ref=ref, path=f"{where}.attributes.{key}")
        if "/" in key:
            qualified_given[key] = parsed
        else:
            attributes[f"{slc.driver}/{key}"] = parsed
    # An explicitly qualified name wins over the unqualified one in the driver's domain.
    attributes.update(qualified_given)
    capacity = {key: _parse_capacity(value) for key, value in (dev.capacity or {}).items()}
    consumes = tuple(
        (cc.counter_set, _counter_values(cc.counters)) for cc in dev.consumes_counters or []
    )
    taints = tuple(Taint(key=t.key, value=t.value or "", effect=t.effect) for t in dev.taints or [])
    return DeviceInfo(
        id=(slc.driver, slc.pool, dev.name),
        name=dev.name,
        slice=slc,
        attributes=attributes,
        capacity=capacity,
        consumes_counters=consumes,
        taints=taints,
        binding_conditions=tuple(dev.binding_conditions or ()),
        binding_failure_conditions=tuple(dev.binding_failure_conditions or ()),
        binds_to_node=bool(dev.binds_to_node),
        allow_multiple=bool(dev.allow_multiple_allocations),
        node_name=dev.node_name or "",
        all_nodes=bool(dev.all_nodes),
        node_selector=dev.node_selector,
    )


@dataclass(frozen=True, slots=True)
class ClassInfo:
    """A DeviceClass: its CEL selectors and configs (as results copy them)."""

    name: str
    selectors: tuple[str | None, ...]
    config: tuple[DeviceClassConfiguration, ...]
    obj: DeviceClass


def parse_class(obj: DeviceClass) -> ClassInfo:
    """Turn a v1 DeviceClass into the allocator's record."""
    return ClassInfo(
        name=obj.metadata.name or "",
        selectors=_selector_exprs(obj.spec.selectors),
        config=tuple(obj.spec.config or []),
        obj=obj,
    )


def _selector_exprs(selectors: Sequence[DeviceSelector] | None) -> tuple[str | None, ...]:
    return tuple(None if sel.cel is None else sel.cel.expression for sel in selectors or [])


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """A request (``exactly``) or one subrequest of ``firstAvailable``."""

    name: str
    parent: str | None
    index: int
    class_name: str
    mode: str
    count: int
    admin_access: bool | None
    selectors: tuple[str | None, ...]
    tolerations: tuple[Toleration, ...]
    #: The tolerations as the claim has them (results copy them).
    tolerations_raw: tuple[DeviceToleration, ...]
    capacity_requests: dict[str, tuple[Amount, object]] | None
    field_path: str

    @property
    def full_name(self) -> str:
        """``request`` or ``request/subrequest`` as in allocation results."""
        return f"{self.parent}/{self.name}" if self.parent else self.name


@dataclass(frozen=True, slots=True)
class DeviceRequestInfo:
    """One entry of ``spec.devices.requests``: either exact or a prioritized list."""

    name: str
    exact: RequestSpec | None
    first_available: tuple[RequestSpec, ...]


@dataclass(frozen=True, slots=True)
class ConstraintSpec:
    """A claim constraint."""

    requests: frozenset[str]
    match_attribute: str | None
    distinct_attribute: str | None


@dataclass(eq=False, slots=True)
class ClaimInfo:
    """A ResourceClaim; ``allocation`` is its ``status.allocation`` (or the one committed)."""

    namespace: str
    name: str
    uid: str
    requests: list[DeviceRequestInfo]
    constraints: list[ConstraintSpec]
    config: list[DeviceClaimConfiguration]
    allocation: AllocationResult | None
    obj: ResourceClaim

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def ref(self) -> str:
        """How errors name this object."""
        return f"ResourceClaim {self.key}"


def _parse_request_body(
    body: ExactDeviceRequest | DeviceSubRequest,
    *,
    name: str,
    parent: str | None,
    index: int,
    path: str,
) -> RequestSpec:
    mode = body.allocation_mode or MODE_EXACT
    count = body.count if body.count is not None else (1 if mode == MODE_EXACT else 0)
    tolerations = body.tolerations or []
    cap_requests: dict[str, tuple[Amount, object]] | None = None
    if body.capacity is not None:
        cap_requests = {
            key: (q.amount(), _written(q)) for key, q in (body.capacity.requests or {}).items()
        }
    admin = body.admin_access if isinstance(body, ExactDeviceRequest) else None
    return RequestSpec(
        name=name,
        parent=parent,
        index=index,
        class_name=body.device_class_name,
        mode=mode,
        count=count,
        admin_access=admin,
        selectors=_selector_exprs(body.selectors),
        tolerations=tuple(
            Toleration(
                key=t.key or "",
                operator=t.operator or "",
                value=t.value or "",
                effect=t.effect or "",
            )
            for t in tolerations
        ),
        tolerations_raw=tuple(tolerations),
        capacity_requests=cap_requests,
        field_path=path,
    )


#: What a claim's spec parses into: its requests, constraints and configs.
SpecRecords = tuple[list[DeviceRequestInfo], list[ConstraintSpec], list[DeviceClaimConfiguration]]


def parse_claim(obj: ResourceClaim, *, spec_records: SpecRecords | None = None) -> ClaimInfo:
    """Turn a v1 ResourceClaim (spec and any existing status.allocation) into the record.

    ``spec_records``: what :func:`parse_claim_spec` returned for a spec equal to
    ``obj.spec``, taken as they are (the records are shared, not copied).
    """
    requests, constraints, config = spec_records or parse_claim_spec(obj)
    return ClaimInfo(
        namespace=obj.metadata.namespace or "default",
        name=obj.metadata.name or "",
        uid=obj.metadata.uid or "",
        requests=requests,
        constraints=constraints,
        config=config,
        allocation=obj.status.allocation,
        obj=obj,
    )


def parse_claim_spec(obj: ResourceClaim) -> SpecRecords:
    """The requests, constraints and configs of a claim's spec, as the allocator reads them."""
    devices = obj.spec.devices
    requests: list[DeviceRequestInfo] = []
    for i, req in enumerate(devices.requests or []):
        path = f"spec.devices.requests[{i}]"
        exact = None
        if req.exactly is not None:
            exact = _parse_request_body(
                req.exactly, name=req.name, parent=None, index=i, path=f"{path}.exactly"
            )
        subs = tuple(
            _parse_request_body(
                sub, name=sub.name, parent=req.name, index=i, path=f"{path}.firstAvailable[{j}]"
            )
            for j, sub in enumerate(req.first_available or [])
        )
        requests.append(DeviceRequestInfo(name=req.name, exact=exact, first_available=subs))
    constraints = [
        ConstraintSpec(
            requests=frozenset(c.requests or ()),
            match_attribute=c.match_attribute,
            distinct_attribute=c.distinct_attribute,
        )
        for c in devices.constraints or []
    ]
    return requests, constraints, list(devices.config or [])


def parse_model(obj: ApiObject) -> ClassInfo | SliceInfo | ClaimInfo | None:
    """The allocator's record of a DeviceClass, ResourceSlice or ResourceClaim model."""
    if isinstance(obj, DeviceClass):
        return parse_class(obj)
    if isinstance(obj, ResourceSlice):
        return parse_slice(obj)
    if isinstance(obj, ResourceClaim):
        return parse_claim(obj)
    return None


def parse_objects(
    objects: Sequence[RawObject],
) -> tuple[list[ClassInfo], list[SliceInfo], list[ClaimInfo], list[RawObject]]:
    """Sort v1 JSON objects by kind into classes, slices, claims and nodes.

    DeviceTaintRules are applied to the slices' devices, as the kube-scheduler does.
    """
    classes: list[ClassInfo] = []
    slices: list[SliceInfo] = []
    claims: list[ClaimInfo] = []
    nodes: list[RawObject] = []
    rules = [obj for obj in objects if obj.get("kind") == "DeviceTaintRule"]
    for obj in objects:
        kind = obj.get("kind")
        if kind == "Node":
            nodes.append(obj)
        elif kind in ("DeviceClass", "ResourceSlice", "ResourceClaim"):
            data = apply_taint_rules(obj, rules) if kind == "ResourceSlice" and rules else obj
            item = parse_model(read_model(data, where=str(kind)))
            if isinstance(item, ClassInfo):
                classes.append(item)
            elif isinstance(item, SliceInfo):
                slices.append(item)
            elif isinstance(item, ClaimInfo):
                claims.append(item)
    return classes, slices, claims, nodes
