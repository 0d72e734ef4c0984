"""The allocator's own view of DeviceClasses, ResourceSlices and ResourceClaims.

Objects arrive as ``resource.k8s.io/v1`` JSON (``to_dict()`` of the api-types models or
what the apiserver returns). They are parsed once into slotted records with everything the
search loop needs precomputed (fully-qualified attributes, exact quantities, ids), so that
the loop never touches JSON again. Parsing is lenient like the kube-scheduler's informers:
defaults are applied, unknown fields ignored; only input that cannot be read raises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_api_types import Amount, Quantity, QuantityError

from .errors import AllocationError
from .taint_rules import apply_taint_rules

RawObject = Mapping[str, Any]
DeviceID = tuple[str, str, str]
AttrValue = tuple[str, object]

MODE_EXACT = "ExactCount"
MODE_ALL = "All"


def _str(obj: RawObject, key: str, *, ref: str, path: str, default: str = "") -> str:
    value = obj.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise AllocationError(
            f"must be a string, got {type(value).__name__}",
            object_ref=ref,
            field=f"{path}.{key}".lstrip("."),
        )
    return value


def _list(obj: RawObject, key: str, *, ref: str, path: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise AllocationError("must be a list", object_ref=ref, field=f"{path}.{key}".lstrip("."))
    return value


def _map(obj: RawObject, key: str, *, ref: str, path: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise AllocationError(
            "must be an object", object_ref=ref, field=f"{path}.{key}".lstrip(".")
        )
    return value


def parse_quantity(value: object, *, where: str = "") -> Amount:
    """A quantity as written in an object (``"80Gi"``, ``"1.5"``, ``7``), exactly."""
    try:
        return Quantity.coerce(value).amount()
    except QuantityError as exc:
        raise AllocationError(f"not a quantity: {value!r}", field=where) from exc


# The scalar kinds of an attribute value, and the list kinds of DRAListTypeAttributes
# (a tuple of values each), named by their JSON field.
SCALAR_KINDS = ("int", "bool", "string", "version")
LIST_KINDS = ("ints", "bools", "strings", "versions")


def _attr_value(raw: Any, *, ref: str, path: str) -> AttrValue:
    if not isinstance(raw, Mapping):
        raise AllocationError("must be an object", object_ref=ref, field=path)
    # Lists first, as upstream reads them (a value sets exactly one field).
    for key in LIST_KINDS:
        values = raw.get(key)
        if values is None:
            continue
        if not isinstance(values, list) or not values:
            raise AllocationError("must be a non-empty list", object_ref=ref, field=f"{path}.{key}")
        return (key, tuple(values))
    for key in SCALAR_KINDS:
        if key in raw and raw[key] is not None:
            return (key, raw[key])
    return ("unknown", None)


@dataclass(frozen=True, slots=True)
class Taint:
    """A device taint."""

    key: str
    value: str
    effect: str
    raw: RawObject


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
    """One capacity of a device, with its request policy."""

    value: Amount
    default: Amount | None
    default_raw: object
    valid_values: tuple[tuple[Amount, object], ...]
    range_min: Amount | None
    range_min_raw: object
    range_max: Amount | None
    range_step: Amount | None
    range_step_raw: object
    has_policy: bool
    has_range: bool


@dataclass(eq=False, slots=True)
class DeviceInfo:
    """One device of a slice, parsed for the search loop."""

    id: DeviceID
    name: str
    raw: RawObject
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
    node_selector: RawObject | None
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
    node_selector: RawObject | None
    per_device_node_selection: bool
    shared_counters: tuple[tuple[str, dict[str, Amount]], ...]
    devices: list[DeviceInfo]
    raw: RawObject

    @property
    def ref(self) -> str:
        """How errors name this object."""
        return f"ResourceSlice {self.name}"


def parse_slice(obj: RawObject) -> SliceInfo:
    """Parse a v1 ResourceSlice."""
    meta = _map(obj, "metadata", ref="ResourceSlice", path="")
    name = _str(meta, "name", ref="ResourceSlice", path="metadata")
    ref = f"ResourceSlice {name}"
    spec = _map(obj, "spec", ref=ref, path="")
    driver = _str(spec, "driver", ref=ref, path="spec")
    pool = _map(spec, "pool", ref=ref, path="spec")
    try:
        generation = int(pool.get("generation") or 0)
        slice_count = int(pool.get("resourceSliceCount") or 0)
    except (TypeError, ValueError) as exc:
        raise AllocationError(
            "generation and resourceSliceCount must be integers", object_ref=ref, field="spec.pool"
        ) from exc
    counters: list[tuple[str, dict[str, Amount]]] = []
    for i, cs in enumerate(_list(spec, "sharedCounters", ref=ref, path="spec")):
        where = f"spec.sharedCounters[{i}]"
        values = {
            cname: parse_quantity((c or {}).get("value"), where=f"{where}.counters.{cname}")
            for cname, c in _map(cs, "counters", ref=ref, path=where).items()
        }
        counters.append((_str(cs, "name", ref=ref, path=where), values))
    node_selector = spec.get("nodeSelector")
    info = SliceInfo(
        name=name,
        driver=driver,
        pool=_str(pool, "name", ref=ref, path="spec.pool"),
        generation=generation,
        slice_count=slice_count,
        node_name=_str(spec, "nodeName", ref=ref, path="spec"),
        all_nodes=bool(spec.get("allNodes")),
        node_selector=node_selector if isinstance(node_selector, Mapping) else None,
        per_device_node_selection=bool(spec.get("perDeviceNodeSelection")),
        shared_counters=tuple(counters),
        devices=[],
        raw=obj,
    )
    for i, dev in enumerate(_list(spec, "devices", ref=ref, path="spec")):
        info.devices.append(_parse_device(dev, info, where=f"spec.devices[{i}]"))
    return info


def _parse_capacity(raw: Any, *, ref: str, where: str) -> CapacityInfo:
    if not isinstance(raw, Mapping):
        raise AllocationError("must be an object", object_ref=ref, field=where)
    policy = raw.get("requestPolicy")
    policy = policy if isinstance(policy, Mapping) else None
    rng = (policy or {}).get("validRange")
    rng = rng if isinstance(rng, Mapping) else None
    default_raw = (policy or {}).get("default")

    def q(value: object, sub: str) -> Amount | None:
        """An optional quantity of the policy."""
        return None if value is None else parse_quantity(value, where=f"{where}.{sub}")

    valid = tuple(
        (parse_quantity(v, where=f"{where}.requestPolicy.validValues[{i}]"), v)
        for i, v in enumerate((policy or {}).get("validValues") or [])
    )
    return CapacityInfo(
        value=parse_quantity(raw.get("value"), where=f"{where}.value"),
        default=q(default_raw, "requestPolicy.default"),
        default_raw=default_raw,
        valid_values=valid,
        range_min=q((rng or {}).get("min"), "requestPolicy.validRange.min"),
        range_min_raw=(rng or {}).get("min"),
        range_max=q((rng or {}).get("max"), "requestPolicy.validRange.max"),
        range_step=q((rng or {}).get("step"), "requestPolicy.validRange.step"),
        range_step_raw=(rng or {}).get("step"),
        has_policy=policy is not None,
        has_range=rng is not None,
    )


def _parse_device(raw: Any, slc: SliceInfo, *, where: str) -> DeviceInfo:
    ref = slc.ref
    if not isinstance(raw, Mapping):
        raise AllocationError("must be an object", object_ref=ref, field=where)
    name = _str(raw, "name", ref=ref, path=where)
    attributes: dict[str, AttrValue] = {}
    qualified_given: dict[str, AttrValue] = {}
    for key, value in _map(raw, "attributes", ref=ref, path=where).items():
        parsed = _attr_value(value, ref=ref, path=f"{where}.attributes.{key}")
        if "/" in key:
            qualified_given[key] = parsed
        else:
            attributes[f"{slc.driver}/{key}"] = parsed
    # An explicitly qualified name wins over the unqualified one in the driver's domain.
    attributes.update(qualified_given)
    capacity = {
        key: _parse_capacity(value, ref=ref, where=f"{where}.capacity.{key}")
        for key, value in _map(raw, "capacity", ref=ref, path=where).items()
    }
    consumes: list[tuple[str, tuple[tuple[str, Amount], ...]]] = []
    for i, cc in enumerate(_list(raw, "consumesCounters", ref=ref, path=where)):
        cwhere = f"{where}.consumesCounters[{i}]"
        items = tuple(
            (cname, parse_quantity((c or {}).get("value"), where=f"{cwhere}.counters.{cname}"))
            for cname, c in _map(cc, "counters", ref=ref, path=cwhere).items()
        )
        consumes.append((_str(cc, "counterSet", ref=ref, path=cwhere), items))
    taints = tuple(
        Taint(
            key=_str(t, "key", ref=ref, path=f"{where}.taints[{i}]"),
            value=_str(t, "value", ref=ref, path=f"{where}.taints[{i}]"),
            effect=_str(t, "effect", ref=ref, path=f"{where}.taints[{i}]"),
            raw=t,
        )
        for i, t in enumerate(_list(raw, "taints", ref=ref, path=where))
    )
    node_selector = raw.get("nodeSelector")
    return DeviceInfo(
        id=(slc.driver, slc.pool, name),
        name=name,
        raw=raw,
        slice=slc,
        attributes=attributes,
        capacity=capacity,
        consumes_counters=tuple(consumes),
        taints=taints,
        binding_conditions=tuple(_list(raw, "bindingConditions", ref=ref, path=where)),
        binding_failure_conditions=tuple(
            _list(raw, "bindingFailureConditions", ref=ref, path=where)
        ),
        binds_to_node=bool(raw.get("bindsToNode")),
        allow_multiple=bool(raw.get("allowMultipleAllocations")),
        node_name=_str(raw, "nodeName", ref=ref, path=where),
        all_nodes=bool(raw.get("allNodes")),
        node_selector=node_selector if isinstance(node_selector, Mapping) else None,
    )


@dataclass(frozen=True, slots=True)
class ClassInfo:
    """A DeviceClass: its CEL selectors and configs."""

    name: str
    selectors: tuple[str | None, ...]
    config: tuple[RawObject, ...]
    raw: RawObject


def parse_class(obj: RawObject) -> ClassInfo:
    """Parse a v1 DeviceClass."""
    meta = _map(obj, "metadata", ref="DeviceClass", path="")
    name = _str(meta, "name", ref="DeviceClass", path="metadata")
    ref = f"DeviceClass {name}"
    spec = _map(obj, "spec", ref=ref, path="")
    return ClassInfo(
        name=name,
        selectors=tuple(_selector_exprs(spec, ref=ref, path="spec")),
        config=tuple(_list(spec, "config", ref=ref, path="spec")),
        raw=obj,
    )


def _selector_exprs(obj: RawObject, *, ref: str, path: str) -> list[str | None]:
    out: list[str | None] = []
    for i, sel in enumerate(_list(obj, "selectors", ref=ref, path=path)):
        cel = sel.get("cel") if isinstance(sel, Mapping) else None
        if isinstance(cel, Mapping) and isinstance(cel.get("expression"), str):
            out.append(cel["expression"])
        elif cel is None:
            out.append(None)
        else:
            raise AllocationError(
                "must have a string expression", object_ref=ref, field=f"{path}.selectors[{i}].cel"
            )
    return out


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
    tolerations_raw: tuple[RawObject, ...]
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
    """A ResourceClaim."""

    namespace: str
    name: str
    uid: str
    requests: list[DeviceRequestInfo]
    constraints: list[ConstraintSpec]
    config: list[RawObject]
    allocation: RawObject | None
    raw: RawObject

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def ref(self) -> str:
        """How errors name this object."""
        return f"ResourceClaim {self.key}"


def _parse_request_body(
    body: RawObject,
    *,
    name: str,
    parent: str | None,
    index: int,
    ref: str,
    path: str,
    allow_admin: bool,
) -> RequestSpec:
    raw_count = body.get("count")
    mode = _str(body, "allocationMode", ref=ref, path=path) or MODE_EXACT
    try:
        count = int(raw_count) if raw_count is not None else (1 if mode == MODE_EXACT else 0)
    except (TypeError, ValueError) as exc:
        raise AllocationError("must be an integer", object_ref=ref, field=f"{path}.count") from exc
    tolerations_raw = tuple(_list(body, "tolerations", ref=ref, path=path))
    tolerations = tuple(
        Toleration(
            key=_str(t, "key", ref=ref, path=f"{path}.tolerations[{i}]"),
            operator=_str(t, "operator", ref=ref, path=f"{path}.tolerations[{i}]"),
            value=_str(t, "value", ref=ref, path=f"{path}.tolerations[{i}]"),
            effect=_str(t, "effect", ref=ref, path=f"{path}.tolerations[{i}]"),
        )
        for i, t in enumerate(tolerations_raw)
    )
    capacity = body.get("capacity")
    cap_requests: dict[str, tuple[Amount, object]] | None = None
    if isinstance(capacity, Mapping):
        cap_requests = {
            key: (parse_quantity(v, where=f"{path}.capacity.requests.{key}"), v)
            for key, v in _map(capacity, "requests", ref=ref, path=f"{path}.capacity").items()
        }
    admin = body.get("adminAccess") if allow_admin else None
    return RequestSpec(
        name=name,
        parent=parent,
        index=index,
        class_name=_str(body, "deviceClassName", ref=ref, path=path),
        mode=mode,
        count=count,
        admin_access=bool(admin) if admin is not None else None,
        selectors=tuple(_selector_exprs(body, ref=ref, path=path)),
        tolerations=tolerations,
        tolerations_raw=tolerations_raw,
        capacity_requests=cap_requests,
        field_path=path,
    )


def parse_claim(obj: RawObject) -> ClaimInfo:
    """Parse a v1 ResourceClaim (spec and any existing status.allocation)."""
    meta = _map(obj, "metadata", ref="ResourceClaim", path="")
    name = _str(meta, "name", ref="ResourceClaim", path="metadata")
    namespace = _str(meta, "namespace", ref="ResourceClaim", path="metadata") or "default"
    ref = f"ResourceClaim {namespace}/{name}"
    spec = _map(obj, "spec", ref=ref, path="")
    devices = _map(spec, "devices", ref=ref, path="spec")
    requests: list[DeviceRequestInfo] = []
    for i, req in enumerate(_list(devices, "requests", ref=ref, path="spec.devices")):
        path = f"spec.devices.requests[{i}]"
        if not isinstance(req, Mapping):
            raise AllocationError("must be an object", object_ref=ref, field=path)
        rname = _str(req, "name", ref=ref, path=path)
        exact_raw = req.get("exactly")
        first = _list(req, "firstAvailable", ref=ref, path=path)
        exact = None
        if isinstance(exact_raw, Mapping):
            exact = _parse_request_body(
                exact_raw,
                name=rname,
                parent=None,
                index=i,
                ref=ref,
                path=f"{path}.exactly",
                allow_admin=True,
            )
        subs = tuple(
            _parse_request_body(
                sub,
                name=_str(sub, "name", ref=ref, path=f"{path}.firstAvailable[{j}]"),
                parent=rname,
                index=i,
                ref=ref,
                path=f"{path}.firstAvailable[{j}]",
                allow_admin=False,
            )
            for j, sub in enumerate(first)
        )
        requests.append(DeviceRequestInfo(name=rname, exact=exact, first_available=subs))
    constraints = [
        ConstraintSpec(
            requests=frozenset(
                _list(c, "requests", ref=ref, path=f"spec.devices.constraints[{i}]")
            ),
            match_attribute=c.get("matchAttribute"),
            distinct_attribute=c.get("distinctAttribute"),
        )
        for i, c in enumerate(_list(devices, "constraints", ref=ref, path="spec.devices"))
    ]
    status = _map(obj, "status", ref=ref, path="")
    allocation = status.get("allocation")
    return ClaimInfo(
        namespace=namespace,
        name=name,
        uid=_str(meta, "uid", ref=ref, path="metadata"),
        requests=requests,
        constraints=constraints,
        config=list(_list(devices, "config", ref=ref, path="spec.devices")),
        allocation=allocation if isinstance(allocation, Mapping) else None,
        raw=obj,
    )


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
        if kind == "DeviceClass":
            classes.append(parse_class(obj))
        elif kind == "ResourceSlice":
            slices.append(parse_slice(apply_taint_rules(obj, rules) if rules else obj))
        elif kind == "ResourceClaim":
            claims.append(parse_claim(obj))
        elif kind == "Node":
            nodes.append(obj)
    return classes, slices, claims, nodes
