"""The kube-apiserver's validation of resource.k8s.io/v1 objects, and of our CRs.

:func:`validate` raises the first problem; :func:`validation_errors` returns all of them.
Each problem is a :class:`~dra_api_types.errors.ValidationError` whose ``path`` is the field
path in API spelling (``spec.devices[3].attributes["gpu.nvidia.com/uuid"]``) and whose
``object_ref`` names the object.

Objects are validated as a user submits them, before the apiserver's defaulting, so omitted
defaulted fields (``allocationMode``, ``count``, ``operator``) are accepted. CEL expressions
are checked for size here; compiling them needs the DRA CEL environment (dra-cel).
Namespaces are checked for format but not required (kubectl fills in the default one).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterable, Sequence, Sized
from typing import Any, Final

from . import nvidia_v1beta1 as nv
from . import resource_v1 as r
from ._model import ApiModel, ApiObject
from .errors import ObjectRef, ValidationError
from .meta_v1 import NodeSelector, ObjectMeta, OwnerReference
from .names import (
    device_qualified_name_errors,
    dns_label_errors,
    dns_subdomain_errors,
    fully_qualified_name_errors,
    label_value_errors,
    qualified_name_errors,
    uid_errors,
)
from .quantity import Quantity

__all__ = ["LIMITS", "validate", "validation_errors"]

#: Size limits of resource.k8s.io/v1 (Kubernetes 1.34-1.36).
LIMITS: Final = {
    "devices_per_slice": 128,
    "devices_per_slice_with_taints_or_counters": 64,
    "attributes_and_capacities_per_device": 32,
    "attribute_values_per_device": 48,
    "attribute_string_length": 64,
    "counter_sets_per_slice": 8,
    "counters_per_counter_set": 32,
    "counter_consumptions_per_device": 2,
    "counters_per_consumption": 32,
    "taints_per_device": 16,
    "binding_conditions": 4,
    "requests": 32,
    "subrequests": 8,
    "constraints": 32,
    "configs": 32,
    "selectors": 32,
    "tolerations": 16,
    "cel_expression_bytes": 10 * 1024,
    "opaque_parameters_bytes": 10 * 1024,
    "device_status_data_bytes": 10 * 1024,
    "allocation_results": 32,
    "reserved_for": 256,
    "device_status_conditions": 8,
    "valid_values": 10,
    "interface_name": 256,
    "hardware_address": 128,
    "network_ips": 16,
    "driver_name": 63,
    "pool_name": 253,
}

ALLOCATION_MODES: Final = ("ExactCount", "All")
# The apiserver's own check of version attributes (no numeric range limit, unlike parsing).
_NUMERIC: Final = r"(0|[1-9]\d*)"
_PRERELEASE: Final = r"(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD: Final = r"[0-9a-zA-Z-]+"
_SEMVER: Final = re.compile(
    rf"^{_NUMERIC}\.{_NUMERIC}\.{_NUMERIC}(-{_PRERELEASE}(\.{_PRERELEASE})*)?"
    rf"(\+{_BUILD}(\.{_BUILD})*)?$"
)
TAINT_EFFECTS: Final = ("NoExecute", "NoSchedule", "None")
TOLERATION_OPERATORS: Final = ("Exists", "Equal")
NODE_SELECTOR_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
CONFIG_SOURCES: Final = ("FromClass", "FromClaim")


def _field(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _index(path: str, index: int) -> str:
    return f"{path}[{index}]"


def _key(path: str, key: str) -> str:
    return f'{path}["{key}"]'


class _Errors:
    """Collects problems of one object."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.items.append((path, message))

    def required(self, path: str) -> None:
        self.add(path, "Required value")

    def names(self, path: str, value: str, check: Callable[[str], list[str]]) -> None:
        problems = check(value)
        if problems:
            self.add(path, f"Invalid value: {value!r}: " + "; ".join(problems))

    def too_many(self, path: str, items: Sized, limit: int) -> bool:
        if len(items) > limit:
            self.add(path, f"Too many: {len(items)}: must have at most {limit} items")
            return True
        return False

    def not_supported(self, path: str, value: object, allowed: Sequence[str]) -> None:
        shown = ", ".join(f'"{a}"' for a in allowed)
        self.add(path, f"Unsupported value: {value!r}: supported values: {shown}")


# ---------------------------------------------------------------------------- metadata
def _validate_meta(
    e: _Errors, meta: ObjectMeta, path: str, *, namespaced: bool, name_required: bool = True
) -> None:
    if not meta.name and not meta.generate_name and name_required:
        e.add(_field(path, "name"), "Required value: name or generateName is required")
    if meta.name:
        e.names(_field(path, "name"), meta.name, dns_subdomain_errors)
    if meta.generate_name:
        # generateName gets a random suffix appended; check the prefix leniently.
        e.names(
            _field(path, "generateName"),
            meta.generate_name.rstrip("-") or "x",
            dns_subdomain_errors,
        )
    if meta.namespace:
        if not namespaced:
            e.add(_field(path, "namespace"), "Forbidden: not allowed on this type")
        else:
            e.names(_field(path, "namespace"), meta.namespace, dns_label_errors)
    for key, value in (meta.labels or {}).items():
        e.names(_key(_field(path, "labels"), key), key, qualified_name_errors)
        e.names(_key(_field(path, "labels"), key), value, label_value_errors)
    total = 0
    for key, value in (meta.annotations or {}).items():
        e.names(_key(_field(path, "annotations"), key), key.lower(), qualified_name_errors)
        total += len(key) + len(value)
    if total > 256 * 1024:
        e.add(_field(path, "annotations"), "Too long: must have at most 262144 bytes")
    seen_uids: set[str] = set()
    for i, ref in enumerate(meta.owner_references or []):
        _validate_owner_reference(e, ref, _index(_field(path, "ownerReferences"), i))
        if ref.uid and ref.uid in seen_uids:
            e.add(
                _field(_index(_field(path, "ownerReferences"), i), "uid"),
                f"Duplicate value: {ref.uid!r}",
            )
        seen_uids.add(ref.uid)
    controllers = [o for o in meta.owner_references or [] if o.controller]
    if len(controllers) > 1:
        e.add(
            _field(path, "ownerReferences"),
            "Invalid value: only one reference can have Controller set to true",
        )
    if meta.generation is not None and meta.generation < 0:
        e.add(_field(path, "generation"), "Invalid value: must be greater than or equal to 0")


def _validate_owner_reference(e: _Errors, ref: OwnerReference, path: str) -> None:
    if not ref.api_version:
        e.add(_field(path, "apiVersion"), "Invalid value: version must not be empty")
    if not ref.kind:
        e.add(_field(path, "kind"), "Invalid value: kind must not be empty")
    if not ref.name:
        e.add(_field(path, "name"), "Invalid value: name must not be empty")
    if not ref.uid:
        e.add(_field(path, "uid"), "Invalid value: uid must not be empty")


def _validate_node_selector(
    e: _Errors, selector: NodeSelector, path: str, *, one_term: bool
) -> None:
    terms = selector.node_selector_terms
    terms_path = _field(path, "nodeSelectorTerms")
    if one_term and len(terms) != 1:
        e.add(
            terms_path, f"Invalid value: must have exactly one node selector term, got {len(terms)}"
        )
    elif not terms:
        e.required(terms_path)
    for i, term in enumerate(terms):
        term_path = _index(terms_path, i)
        for j, req in enumerate(term.match_expressions or []):
            req_path = _index(_field(term_path, "matchExpressions"), j)
            e.names(_field(req_path, "key"), req.key, qualified_name_errors)
            _validate_node_selector_requirement(e, req.operator, req.values or [], req_path)
        for j, req in enumerate(term.match_fields or []):
            req_path = _index(_field(term_path, "matchFields"), j)
            if req.key != "metadata.name":
                e.not_supported(_field(req_path, "key"), req.key, ["metadata.name"])
            if req.operator not in ("In", "NotIn"):
                e.not_supported(_field(req_path, "operator"), req.operator, ["In", "NotIn"])
            elif len(req.values or []) != 1:
                e.add(
                    _field(req_path, "values"),
                    "Required value: must be only one value when `operator` is 'In' or 'NotIn' "
                    "for node field selector",
                )


def _validate_node_selector_requirement(
    e: _Errors, operator: str, values: list[str], path: str
) -> None:
    if operator in ("In", "NotIn"):
        if not values:
            e.add(
                _field(path, "values"),
                "Required value: must be specified when `operator` is 'In' or 'NotIn'",
            )
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            e.add(
                _field(path, "values"),
                "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            e.add(
                _field(path, "values"),
                "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
            )
        elif not values[0].lstrip("-").isdigit():
            e.add(
                _index(_field(path, "values"), 0),
                f"Invalid value: {values[0]!r}: must be an integer",
            )
    else:
        e.not_supported(_field(path, "operator"), operator, NODE_SELECTOR_OPERATORS)


# ---------------------------------------------------------------------------- shared pieces
def _validate_driver(e: _Errors, driver: str, path: str) -> None:
    if not driver:
        e.required(path)
        return
    if len(driver) > LIMITS["driver_name"]:
        e.add(path, f"Too long: may not be more than {LIMITS['driver_name']} bytes")
    # Same rules as a CSI driver name: upper case is tolerated.
    e.names(path, driver, lambda v: dns_subdomain_errors(v.lower()))


def _validate_pool_name(e: _Errors, name: str, path: str) -> None:
    if not name:
        e.required(path)
        return
    if len(name) > LIMITS["pool_name"]:
        e.add(path, f"Too long: may not be more than {LIMITS['pool_name']} bytes")
    for part in name.split("/"):
        problems = dns_subdomain_errors(part)
        if problems:
            e.add(
                path,
                f"Invalid value: {name!r}: each part separated by '/' must be a DNS subdomain: "
                + "; ".join(problems),
            )
            return


def _validate_selectors(e: _Errors, selectors: list[r.DeviceSelector] | None, path: str) -> None:
    if selectors is None:
        return
    if e.too_many(path, selectors, LIMITS["selectors"]):
        return
    for i, selector in enumerate(selectors):
        sel_path = _index(path, i)
        if selector.cel is None:
            e.required(_field(sel_path, "cel"))
            continue
        expr_path = _field(_field(sel_path, "cel"), "expression")
        expression = selector.cel.expression
        if not expression:
            e.required(expr_path)
        elif len(expression.encode()) > LIMITS["cel_expression_bytes"]:
            e.add(
                expr_path, f"Too long: may not be more than {LIMITS['cel_expression_bytes']} bytes"
            )


def _validate_opaque(e: _Errors, config: r.DeviceConfiguration, path: str) -> None:
    if config.opaque is None:
        e.add(
            _field(path, "opaque"), "Required value: exactly one configuration source must be set"
        )
        return
    opaque_path = _field(path, "opaque")
    _validate_driver(e, config.opaque.driver, _field(opaque_path, "driver"))
    params_path = _field(opaque_path, "parameters")
    params = config.opaque.parameters
    if not params and "parameters" not in config.opaque.model_fields_set:
        e.required(params_path)
        return
    size = len(json.dumps(params, separators=(",", ":")).encode())
    if size > LIMITS["opaque_parameters_bytes"]:
        e.add(
            params_path, f"Too long: may not be more than {LIMITS['opaque_parameters_bytes']} bytes"
        )
    if (
        config.opaque.driver in (nv.GPU_DRIVER, nv.COMPUTE_DOMAIN_DRIVER)
        and params.get("apiVersion") == nv.API_VERSION
    ):
        # Our own configs: the admission webhook rejects what the driver would reject.
        try:
            nv.decode_opaque_config(params)
        except ValidationError as exc:
            e.add(_prefix(params_path, exc.path), exc.message)


def _prefix(prefix: str, path: str) -> str:
    if not path:
        return prefix
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"


def _validate_tolerations(
    e: _Errors, tolerations: list[r.DeviceToleration] | None, path: str
) -> None:
    if tolerations is None:
        return
    if e.too_many(path, tolerations, LIMITS["tolerations"]):
        return
    for i, tol in enumerate(tolerations):
        tol_path = _index(path, i)
        if tol.key:
            e.names(_field(tol_path, "key"), tol.key, qualified_name_errors)
        # Unset means the default, Equal.
        operator = "Equal" if tol.operator is None else tol.operator
        if operator == "Exists":
            if tol.value:
                e.add(
                    _field(tol_path, "value"),
                    f"Invalid value: {tol.value!r}: must be empty for operator `Exists`",
                )
        elif operator == "Equal":
            e.names(_field(tol_path, "value"), tol.value or "", label_value_errors)
        elif operator == "":
            e.required(_field(tol_path, "operator"))
        else:
            e.not_supported(_field(tol_path, "operator"), operator, TOLERATION_OPERATORS)
        if tol.effect and tol.effect not in TAINT_EFFECTS:
            e.not_supported(_field(tol_path, "effect"), tol.effect, TAINT_EFFECTS)


def _validate_capacity_requests(
    e: _Errors, capacity: r.CapacityRequirements | None, path: str
) -> None:
    if capacity is None:
        return
    for name, amount in (capacity.requests or {}).items():
        req_path = _key(_field(path, "requests"), name)
        e.names(req_path, name, device_qualified_name_errors)
        if amount.sign() < 0:
            e.add(req_path, f"Invalid value: {str(amount)!r}: must be greater than or equal to 0")


def _validate_allocation_mode(e: _Errors, mode: str | None, count: int | None, path: str) -> None:
    if mode is None or mode == "" or mode == "ExactCount":
        if count is not None and count <= 0:
            e.add(_field(path, "count"), f"Invalid value: {count}: must be greater than zero")
    elif mode == "All":
        if count is not None:
            e.add(
                _field(path, "count"),
                "Invalid value: must not be specified when allocationMode is 'All'",
            )
    else:
        e.not_supported(_field(path, "allocationMode"), mode, ALLOCATION_MODES)


# ---------------------------------------------------------------------------- DeviceClass
def _validate_device_class(e: _Errors, obj: r.DeviceClass) -> None:
    _validate_meta(e, obj.metadata, "metadata", namespaced=False)
    spec = obj.spec
    _validate_selectors(e, spec.selectors, "spec.selectors")
    if spec.config is not None and not e.too_many("spec.config", spec.config, LIMITS["configs"]):
        for i, config in enumerate(spec.config):
            _validate_opaque(e, config, _index("spec.config", i))
    if spec.extended_resource_name is not None:
        _validate_extended_resource_name(
            e, spec.extended_resource_name, "spec.extendedResourceName"
        )


def _validate_extended_resource_name(e: _Errors, name: str, path: str) -> None:
    if "/" not in name or "kubernetes.io/" in name:
        e.add(
            path,
            f"Invalid value: {name!r}: must be an extended resource name (a domain-prefixed name "
            "outside kubernetes.io)",
        )
        return
    if name.startswith("requests."):
        e.add(path, f"Invalid value: {name!r}: must not start with 'requests.'")
        return
    e.names(path, "requests." + name, qualified_name_errors)


# ---------------------------------------------------------------------------- ResourceClaim
def _request_names(requests: list[r.DeviceRequest]) -> dict[str, set[str] | None]:
    """Request name -> subrequest names (None for an ``exactly`` request)."""
    names: dict[str, set[str] | None] = {}
    for request in requests:
        if request.first_available is not None:
            names[request.name] = {s.name for s in request.first_available}
        else:
            names[request.name] = None
    return names


def _validate_request_refs(
    e: _Errors, refs: list[str] | None, known: dict[str, set[str] | None], path: str
) -> None:
    if refs is None or e.too_many(path, refs, LIMITS["requests"]):
        return
    seen: set[str] = set()
    for i, ref in enumerate(refs):
        _validate_request_ref(e, ref, known, _index(path, i))
        if ref in seen:
            e.add(_index(path, i), f"Duplicate value: {ref!r}")
        seen.add(ref)


def _validate_request_ref(
    e: _Errors, ref: str, known: dict[str, set[str] | None], path: str
) -> None:
    """``request`` or ``request/subrequest`` naming a request of the claim."""
    segments = ref.split("/")
    if len(segments) <= 2:
        for segment in segments:
            e.names(path, segment, dns_label_errors)
    main, _, sub = ref.partition("/")
    subs = known.get(main)
    if len(segments) > 2 or main not in known or (sub and (subs is None or sub not in subs)):
        e.add(
            path,
            f"Invalid value: {ref!r}: must be the name of a request in the claim or the name "
            "of a request and a subrequest separated by '/'",
        )


def _validate_device_claim(e: _Errors, claim: r.DeviceClaim, path: str) -> None:
    requests = claim.requests or []
    req_path = _field(path, "requests")
    if not e.too_many(req_path, requests, LIMITS["requests"]):
        seen: set[str] = set()
        for i, request in enumerate(requests):
            _validate_request(e, request, _index(req_path, i))
            if request.name in seen:
                e.add(_field(_index(req_path, i), "name"), f"Duplicate value: {request.name!r}")
            seen.add(request.name)
    known = _request_names(requests)
    cons_path = _field(path, "constraints")
    if claim.constraints is not None and not e.too_many(
        cons_path, claim.constraints, LIMITS["constraints"]
    ):
        for i, constraint in enumerate(claim.constraints):
            c_path = _index(cons_path, i)
            _validate_request_refs(e, constraint.requests, known, _field(c_path, "requests"))
            set_fields = [
                n
                for n in ("matchAttribute", "distinctAttribute")
                if getattr(
                    constraint, "match_attribute" if n == "matchAttribute" else "distinct_attribute"
                )
                is not None
            ]
            if not set_fields:
                e.add(
                    _field(c_path, "matchAttribute"),
                    "Required value: exactly one of `matchAttribute` or `distinctAttribute` is "
                    "required",
                )
            elif len(set_fields) > 1:
                e.add(
                    c_path,
                    "Invalid value: exactly one of `matchAttribute` or `distinctAttribute` is "
                    "required, but multiple fields are set",
                )
            if constraint.match_attribute is not None:
                e.names(
                    _field(c_path, "matchAttribute"),
                    constraint.match_attribute,
                    fully_qualified_name_errors,
                )
            if constraint.distinct_attribute is not None:
                e.names(
                    _field(c_path, "distinctAttribute"),
                    constraint.distinct_attribute,
                    fully_qualified_name_errors,
                )
    conf_path = _field(path, "config")
    if claim.config is not None and not e.too_many(conf_path, claim.config, LIMITS["configs"]):
        for i, config in enumerate(claim.config):
            c_path = _index(conf_path, i)
            _validate_request_refs(e, config.requests, known, _field(c_path, "requests"))
            _validate_opaque(e, config, c_path)


def _validate_request(e: _Errors, request: r.DeviceRequest, path: str) -> None:
    if not request.name:
        e.required(_field(path, "name"))
    else:
        e.names(_field(path, "name"), request.name, dns_label_errors)
    if request.exactly is None and request.first_available is None:
        e.add(path, "Required value: exactly one of `exactly` or `firstAvailable` is required")
        return
    if request.exactly is not None and request.first_available is not None:
        e.add(
            path,
            "Invalid value: exactly one of `exactly` or `firstAvailable` is required, but "
            "multiple fields are set",
        )
        return
    if request.exactly is not None:
        ex = request.exactly
        ex_path = _field(path, "exactly")
        if not ex.device_class_name:
            e.required(_field(ex_path, "deviceClassName"))
        else:
            e.names(_field(ex_path, "deviceClassName"), ex.device_class_name, dns_subdomain_errors)
        _validate_selectors(e, ex.selectors, _field(ex_path, "selectors"))
        _validate_allocation_mode(e, ex.allocation_mode, ex.count, ex_path)
        _validate_tolerations(e, ex.tolerations, _field(ex_path, "tolerations"))
        _validate_capacity_requests(e, ex.capacity, _field(ex_path, "capacity"))
        return
    subs = request.first_available or []
    fa_path = _field(path, "firstAvailable")
    if not subs:
        e.required(fa_path)
        return
    if e.too_many(fa_path, subs, LIMITS["subrequests"]):
        return
    seen: set[str] = set()
    for i, sub in enumerate(subs):
        sub_path = _index(fa_path, i)
        if not sub.name:
            e.required(_field(sub_path, "name"))
        else:
            e.names(_field(sub_path, "name"), sub.name, dns_label_errors)
            if sub.name in seen:
                e.add(_field(sub_path, "name"), f"Duplicate value: {sub.name!r}")
            seen.add(sub.name)
        if not sub.device_class_name:
            e.required(_field(sub_path, "deviceClassName"))
        else:
            e.names(
                _field(sub_path, "deviceClassName"), sub.device_class_name, dns_subdomain_errors
            )
        _validate_selectors(e, sub.selectors, _field(sub_path, "selectors"))
        _validate_allocation_mode(e, sub.allocation_mode, sub.count, sub_path)
        _validate_tolerations(e, sub.tolerations, _field(sub_path, "tolerations"))
        _validate_capacity_requests(e, sub.capacity, _field(sub_path, "capacity"))


def _validate_claim_status(
    e: _Errors, status: r.ResourceClaimStatus, known: dict[str, set[str] | None], path: str
) -> None:
    if status.allocation is not None:
        a_path = _field(path, "allocation")
        results = status.allocation.devices.results or []
        res_path = _field(_field(a_path, "devices"), "results")
        if not e.too_many(res_path, results, LIMITS["allocation_results"]):
            for i, result in enumerate(results):
                rp = _index(res_path, i)
                _validate_request_ref(e, result.request, known, _field(rp, "request"))
                _validate_driver(e, result.driver, _field(rp, "driver"))
                _validate_pool_name(e, result.pool, _field(rp, "pool"))
                if not result.device:
                    e.required(_field(rp, "device"))
                else:
                    e.names(_field(rp, "device"), result.device, dns_label_errors)
                _validate_tolerations(e, result.tolerations, _field(rp, "tolerations"))
                _validate_binding_parameters(
                    e, result.binding_conditions, result.binding_failure_conditions, rp
                )
                if result.share_id is not None:
                    e.names(_field(rp, "shareID"), result.share_id, uid_errors)
        configs = status.allocation.devices.config or []
        conf_path = _field(_field(a_path, "devices"), "config")
        if not e.too_many(conf_path, configs, 2 * LIMITS["configs"]):
            for i, config in enumerate(configs):
                cp = _index(conf_path, i)
                if not config.source:
                    e.required(_field(cp, "source"))
                elif config.source not in CONFIG_SOURCES:
                    e.not_supported(_field(cp, "source"), config.source, CONFIG_SOURCES)
                _validate_request_refs(e, config.requests, known, _field(cp, "requests"))
                _validate_opaque(e, config, cp)
        if status.allocation.node_selector is not None:
            _validate_node_selector(
                e, status.allocation.node_selector, _field(a_path, "nodeSelector"), one_term=False
            )
    reserved = status.reserved_for or []
    rf_path = _field(path, "reservedFor")
    if not e.too_many(rf_path, reserved, LIMITS["reserved_for"]):
        uids: set[str] = set()
        for i, ref in enumerate(reserved):
            rp = _index(rf_path, i)
            if not ref.resource:
                e.required(_field(rp, "resource"))
            if not ref.name:
                e.required(_field(rp, "name"))
            if not ref.uid:
                e.required(_field(rp, "uid"))
            elif ref.uid in uids:
                e.add(_field(rp, "uid"), f"Duplicate value: {ref.uid!r}")
            uids.add(ref.uid)
        if reserved and status.allocation is None:
            e.add(rf_path, "Forbidden: may not be specified when `allocated` is not set")
    dev_path = _field(path, "devices")
    allocated = {
        (res.driver, res.pool, res.device, res.share_id)
        for res in (status.allocation.devices.results or [] if status.allocation else [])
    }
    seen: set[tuple[str, str, str, str | None]] = set()
    for i, dev in enumerate(status.devices or []):
        dp = _index(dev_path, i)
        _validate_driver(e, dev.driver, _field(dp, "driver"))
        _validate_pool_name(e, dev.pool, _field(dp, "pool"))
        if not dev.device:
            e.required(_field(dp, "device"))
        else:
            e.names(_field(dp, "device"), dev.device, dns_label_errors)
        if dev.share_id is not None:
            e.names(_field(dp, "shareID"), dev.share_id, uid_errors)
        key = (dev.driver, dev.pool, dev.device, dev.share_id)
        if key not in allocated:
            e.add(dp, "Invalid value: must be an allocated device in the claim")
        if key in seen:
            e.add(dp, f"Duplicate value: {dev.driver}/{dev.pool}/{dev.device}")
        seen.add(key)
        e.too_many(
            _field(dp, "conditions"), dev.conditions or [], LIMITS["device_status_conditions"]
        )
        if (
            dev.data is not None
            and len(json.dumps(dev.data, separators=(",", ":")).encode())
            > LIMITS["device_status_data_bytes"]
        ):
            e.add(
                _field(dp, "data"),
                f"Too long: may not be more than {LIMITS['device_status_data_bytes']} bytes",
            )
        nd = dev.network_data
        if nd is not None:
            np = _field(dp, "networkData")
            if nd.interface_name is not None and len(nd.interface_name) > LIMITS["interface_name"]:
                e.add(
                    _field(np, "interfaceName"),
                    f"Too long: may not be more than {LIMITS['interface_name']} bytes",
                )
            if (
                nd.hardware_address is not None
                and len(nd.hardware_address) > LIMITS["hardware_address"]
            ):
                e.add(
                    _field(np, "hardwareAddress"),
                    f"Too long: may not be more than {LIMITS['hardware_address']} bytes",
                )
            ips_seen: set[str] = set()
            e.too_many(_field(np, "ips"), nd.ips or [], LIMITS["network_ips"])
            for j, ip in enumerate(nd.ips or []):
                try:
                    ipaddress.ip_interface(ip)
                except ValueError:
                    e.add(
                        _index(_field(np, "ips"), j),
                        f"Invalid value: {ip!r}: must be a valid address in CIDR form",
                    )
                if ip in ips_seen:
                    e.add(_index(_field(np, "ips"), j), f"Duplicate value: {ip!r}")
                ips_seen.add(ip)


def _validate_resource_claim(e: _Errors, obj: r.ResourceClaim) -> None:
    _validate_meta(e, obj.metadata, "metadata", namespaced=True)
    _validate_device_claim(e, obj.spec.devices, "spec.devices")
    _validate_claim_status(e, obj.status, _request_names(obj.spec.devices.requests or []), "status")


def _validate_resource_claim_template(e: _Errors, obj: r.ResourceClaimTemplate) -> None:
    _validate_meta(e, obj.metadata, "metadata", namespaced=True)
    meta = obj.spec.metadata
    allowed = {"labels", "annotations"}
    for name in meta.model_fields_set | set(meta.model_extra or {}):
        alias = type(meta).model_fields[name].alias if name in type(meta).model_fields else name
        if name not in allowed and getattr(meta, name, None) not in (None, "", [], {}):
            e.add(
                _field("spec.metadata", alias or name),
                "Forbidden: only labels and annotations may be set",
            )
    for key, value in (meta.labels or {}).items():
        e.names(_key("spec.metadata.labels", key), key, qualified_name_errors)
        e.names(_key("spec.metadata.labels", key), value, label_value_errors)
    _validate_device_claim(e, obj.spec.spec.devices, "spec.spec.devices")


# ---------------------------------------------------------------------------- ResourceSlice
def _uses_counters_or_taints(device: r.Device) -> bool:
    list_attrs = any(
        a.ints is not None or a.bools is not None or a.strings is not None or a.versions is not None
        for a in (device.attributes or {}).values()
    )
    return bool(device.taints) or bool(device.consumes_counters) or list_attrs


def _validate_resource_slice(e: _Errors, obj: r.ResourceSlice) -> None:
    _validate_meta(e, obj.metadata, "metadata", namespaced=False)
    spec = obj.spec
    _validate_driver(e, spec.driver, "spec.driver")
    _validate_pool_name(e, spec.pool.name, "spec.pool.name")
    if spec.pool.generation < 0:
        e.add(
            "spec.pool.generation",
            f"Invalid value: {spec.pool.generation}: must be greater than or equal to 0",
        )
    if spec.pool.resource_slice_count <= 0:
        e.add(
            "spec.pool.resourceSliceCount",
            f"Invalid value: {spec.pool.resource_slice_count}: must be greater than zero",
        )
    chosen = [
        name
        for name, is_set in (
            ("nodeName", bool(spec.node_name)),
            ("nodeSelector", spec.node_selector is not None),
            ("allNodes", bool(spec.all_nodes)),
            ("perDeviceNodeSelection", bool(spec.per_device_node_selection)),
        )
        if is_set
    ]
    if len(chosen) != 1:
        e.add(
            "spec",
            "Invalid value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
            "`perDeviceNodeSelection` is required"
            + (f", but multiple fields are set: {', '.join(chosen)}" if chosen else ""),
        )
    if spec.node_name:
        e.names("spec.nodeName", spec.node_name, dns_subdomain_errors)
    elif spec.node_name == "":
        e.add("spec.nodeName", "Invalid value: must be either unset or set to a non-empty string")
    for name, flag in (
        ("allNodes", spec.all_nodes),
        ("perDeviceNodeSelection", spec.per_device_node_selection),
    ):
        if flag is False:
            e.add(_field("spec", name), "Invalid value: false: must be either unset or set to true")
    if spec.node_selector is not None:
        _validate_node_selector(e, spec.node_selector, "spec.nodeSelector", one_term=True)
    if spec.devices is not None and spec.shared_counters is not None:
        e.add("spec", "Invalid value: only one of `sharedCounters` or `devices` is allowed")
    devices = spec.devices or []
    limit = LIMITS["devices_per_slice"]
    if any(_uses_counters_or_taints(d) for d in devices):
        limit = LIMITS["devices_per_slice_with_taints_or_counters"]
    if not e.too_many("spec.devices", devices, limit):
        names: set[str] = set()
        for i, device in enumerate(devices):
            dp = _index("spec.devices", i)
            _validate_device(e, device, dp, per_device_nodes=bool(spec.per_device_node_selection))
            if device.name in names:
                e.add(_field(dp, "name"), f"Duplicate value: {device.name!r}")
            names.add(device.name)
    counter_sets = spec.shared_counters or []
    if not e.too_many("spec.sharedCounters", counter_sets, LIMITS["counter_sets_per_slice"]):
        set_names: set[str] = set()
        for i, counter_set in enumerate(counter_sets):
            cp = _index("spec.sharedCounters", i)
            if not counter_set.name:
                e.required(_field(cp, "name"))
            else:
                e.names(_field(cp, "name"), counter_set.name, dns_label_errors)
            if counter_set.name in set_names:
                e.add(_field(cp, "name"), f"Duplicate value: {counter_set.name!r}")
            set_names.add(counter_set.name)
            _validate_counters(e, counter_set.counters, _field(cp, "counters"), required=True)


def _validate_counters(
    e: _Errors, counters: dict[str, r.Counter], path: str, *, required: bool
) -> None:
    if required and not counters:
        e.required(path)
    if e.too_many(path, counters, LIMITS["counters_per_counter_set"]):
        return
    for name in counters:
        e.names(_key(path, name), name, dns_label_errors)


def _validate_device(e: _Errors, device: r.Device, path: str, *, per_device_nodes: bool) -> None:
    if not device.name:
        e.required(_field(path, "name"))
    else:
        e.names(_field(path, "name"), device.name, dns_label_errors)
    attributes = device.attributes or {}
    capacity = device.capacity or {}
    combined = len(attributes) + len(capacity)
    if combined > LIMITS["attributes_and_capacities_per_device"]:
        e.add(
            path,
            f"Too many: {combined}: the total number of attributes and capacities must not exceed "
            f"{LIMITS['attributes_and_capacities_per_device']}",
        )
    values = 0
    for name, attribute in attributes.items():
        ap = _key(_field(path, "attributes"), name)
        e.names(ap, name, device_qualified_name_errors)
        values += _validate_attribute(e, attribute, ap)
    if values > LIMITS["attribute_values_per_device"]:
        e.add(
            _field(path, "attributes"),
            f"Too many: {values}: must have at most {LIMITS['attribute_values_per_device']} "
            "attribute values",
        )
    for name, cap in capacity.items():
        cp = _key(_field(path, "capacity"), name)
        e.names(cp, name, device_qualified_name_errors)
        if cap.request_policy is not None:
            if not device.allow_multiple_allocations:
                e.add(
                    _field(cp, "requestPolicy"),
                    "Forbidden: allowMultipleAllocations must be true",
                )
            else:
                _validate_request_policy(
                    e, cap.request_policy, cap.value, _field(cp, "requestPolicy")
                )
    consumptions = device.consumes_counters or []
    cc_path = _field(path, "consumesCounters")
    if not e.too_many(cc_path, consumptions, LIMITS["counter_consumptions_per_device"]):
        seen: set[str] = set()
        for i, consumption in enumerate(consumptions):
            cp = _index(cc_path, i)
            if not consumption.counter_set:
                e.required(_field(cp, "counterSet"))
            else:
                e.names(_field(cp, "counterSet"), consumption.counter_set, dns_label_errors)
            if consumption.counter_set in seen:
                e.add(_field(cp, "counterSet"), f"Duplicate value: {consumption.counter_set!r}")
            seen.add(consumption.counter_set)
            _validate_counters(e, consumption.counters, _field(cp, "counters"), required=True)
    if per_device_nodes:
        node_fields = []
        if device.node_name is not None:
            if device.node_name:
                node_fields.append("nodeName")
                e.names(_field(path, "nodeName"), device.node_name, dns_subdomain_errors)
            else:
                e.add(_field(path, "nodeName"), "Invalid value: must not be empty")
        if device.node_selector is not None:
            node_fields.append("nodeSelector")
            _validate_node_selector(
                e, device.node_selector, _field(path, "nodeSelector"), one_term=False
            )
        if device.all_nodes is not None:
            if device.all_nodes:
                node_fields.append("allNodes")
            else:
                e.add(
                    _field(path, "allNodes"),
                    "Invalid value: false: must be either unset or set to true",
                )
        if len(node_fields) != 1:
            e.add(
                path,
                "Invalid value: exactly one of `nodeName`, `nodeSelector`, or `allNodes` is "
                "required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec",
            )
    elif (
        device.node_name is not None
        or device.node_selector is not None
        or device.all_nodes is not None
    ):
        e.add(
            path,
            "Invalid value: `nodeName`, `nodeSelector` and `allNodes` can only be set if "
            "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
        )
    taints = device.taints or []
    if not e.too_many(_field(path, "taints"), taints, LIMITS["taints_per_device"]):
        for i, taint in enumerate(taints):
            tp = _index(_field(path, "taints"), i)
            if not taint.key:
                e.required(_field(tp, "key"))
            else:
                e.names(_field(tp, "key"), taint.key, qualified_name_errors)
            if taint.value:
                e.names(_field(tp, "value"), taint.value, label_value_errors)
            if not taint.effect:
                e.required(_field(tp, "effect"))
            elif taint.effect not in TAINT_EFFECTS:
                e.not_supported(_field(tp, "effect"), taint.effect, TAINT_EFFECTS)
    _validate_binding_parameters(
        e, device.binding_conditions, device.binding_failure_conditions, path
    )


def _validate_binding_parameters(
    e: _Errors, conditions: list[str] | None, failure_conditions: list[str] | None, path: str
) -> None:
    conditions = conditions or []
    failure_conditions = failure_conditions or []
    bc_path = _field(path, "bindingConditions")
    bf_path = _field(path, "bindingFailureConditions")
    for field_path, items in ((bc_path, conditions), (bf_path, failure_conditions)):
        if not e.too_many(field_path, items, LIMITS["binding_conditions"]):
            for i, condition in enumerate(items):
                e.names(_index(field_path, i), condition, qualified_name_errors)
    seen: set[str] = set()
    for i, condition in enumerate(conditions):
        if condition in seen:
            e.add(_index(bc_path, i), f"Duplicate value: {condition!r}")
        seen.add(condition)
    seen_failures: set[str] = set()
    for i, condition in enumerate(failure_conditions):
        if condition in seen_failures:
            e.add(_index(bf_path, i), f"Duplicate value: {condition!r}")
        seen_failures.add(condition)
        if condition in seen:
            e.add(
                _index(bf_path, i),
                f"Invalid value: {condition!r}: bindingFailureConditions must not overlap with "
                "bindingConditions",
            )
    if failure_conditions and not conditions:
        e.add(
            bc_path, "Invalid value: bindingConditions are required to use bindingFailureConditions"
        )
    if conditions and not failure_conditions:
        e.add(
            bf_path, "Invalid value: bindingFailureConditions are required to use bindingConditions"
        )


def _validate_attribute(e: _Errors, attribute: r.DeviceAttribute, path: str) -> int:
    """Validate one attribute and return how many values it holds."""
    members = {
        "int": attribute.int_,
        "bool": attribute.bool_,
        "string": attribute.string,
        "version": attribute.version,
        "ints": attribute.ints,
        "bools": attribute.bools,
        "strings": attribute.strings,
        "versions": attribute.versions,
    }
    present = [name for name, value in members.items() if value is not None]
    if not present:
        e.add(path, "Required value: exactly one value must be specified")
        return 0
    if len(present) > 1:
        e.add(path, f"Invalid value: exactly one value must be specified, got {', '.join(present)}")
        return len(present)
    ints = [("int", attribute.int_)] if attribute.int_ is not None else []
    ints += [(f"ints[{i}]", n) for i, n in enumerate(attribute.ints or [])]
    for name, number in ints:
        if not -(1 << 63) <= number < (1 << 63):
            e.add(_field(path, name), f"Invalid value: {number}: does not fit in an int64")
    max_len = LIMITS["attribute_string_length"]
    strings: list[tuple[str, str]] = []
    if attribute.string is not None:
        strings.append(("string", attribute.string))
    for i, s in enumerate(attribute.strings or []):
        strings.append((f"strings[{i}]", s))
    for name, value in strings:
        if len(value) > max_len:
            e.add(_field(path, name), f"Too long: may not be more than {max_len} bytes")
    versions: list[tuple[str, str]] = []
    if attribute.version is not None:
        versions.append(("version", attribute.version))
    for i, v in enumerate(attribute.versions or []):
        versions.append((f"versions[{i}]", v))
    for name, value in versions:
        if len(value) > max_len:
            e.add(_field(path, name), f"Too long: may not be more than {max_len} bytes")
        if not _SEMVER.match(value):
            e.add(
                _field(path, name),
                f"Invalid value: {value!r}: must be a string compatible with semver.org spec 2.0.0",
            )
    chosen = members[present[0]]
    return len(chosen) if isinstance(chosen, list) else 1


def _validate_request_policy(
    e: _Errors, policy: r.CapacityRequestPolicy, capacity: Quantity, path: str
) -> None:
    if policy.valid_values and policy.valid_range is not None:
        e.add(
            path,
            'Forbidden: exactly one policy can be specified, cannot specify "validValues" and '
            '"validRange" at the same time',
        )
        return
    default = policy.default
    if policy.valid_values:
        vp = _field(path, "validValues")
        if default is None:
            e.add(_field(path, "default"), "Required value: required when validValues is defined")
            return
        values = policy.valid_values
        for i in range(len(values) - 1):
            if values[i] > values[i + 1]:
                e.add(
                    _index(vp, i + 1),
                    f"Invalid value: {str(values[i + 1])!r}: values must be sorted in ascending "
                    "order",
                )
        if e.too_many(vp, values, LIMITS["valid_values"]):
            return
        seen: set[int] = set()
        for i, value in enumerate(values):
            if value > capacity:
                e.add(
                    _index(vp, i),
                    f"Invalid value: {str(value)!r}: option is larger than capacity value: "
                    f"{capacity}",
                )
            if value.value_ceil() in seen:
                e.add(_index(vp, i), f"Duplicate value: {str(value)!r}")
            seen.add(value.value_ceil())
        if default not in values:
            e.add(
                vp,
                f"Invalid value: {str(default)!r}: default value is not valid according to the "
                "requestPolicy",
            )
    elif policy.valid_range is not None:
        rng = policy.valid_range
        rp = _field(path, "validRange")
        if default is None:
            e.add(_field(path, "default"), "Required value: required when validRange is defined")
            return
        if "min" not in rng.model_fields_set:
            e.add(_field(rp, "min"), "Required value: required when validRange is defined")
            return
        if rng.min > capacity:
            e.add(
                _field(rp, "min"),
                f"Invalid value: {str(rng.min)!r}: min is larger than capacity value: {capacity}",
            )
        if default < rng.min:
            e.add(
                _field(rp, "min"),
                f"Invalid value: {str(default)!r}: default is less than min: {rng.min}",
            )
        if rng.max is not None:
            if rng.min > rng.max:
                e.add(
                    _field(rp, "max"),
                    f"Invalid value: {str(rng.min)!r}: min is larger than max: {rng.max}",
                )
            if rng.max > capacity:
                e.add(
                    _field(rp, "max"),
                    f"Invalid value: {str(rng.max)!r}: max is larger than capacity value: "
                    f"{capacity}",
                )
            if default > rng.max:
                e.add(
                    _field(rp, "max"),
                    f"Invalid value: {str(default)!r}: default is more than max: {rng.max}",
                )
        if rng.step is not None:
            if rng.min + rng.step > capacity:
                e.add(
                    _field(rp, "step"),
                    f"Invalid value: {str(rng.step)!r}: one step {rng.min + rng.step} is larger "
                    f"than capacity value: {capacity}",
                )
            step = rng.step.value_ceil()
            for checked in (default, rng.max):
                if checked is None:
                    continue
                if step == 0 or (checked.value_ceil() - rng.min.value_ceil()) % step != 0:
                    e.add(
                        _field(rp, "step"),
                        f"Invalid value: {str(checked)!r}: value is not a multiple of a given step "
                        f"({rng.step}) from ({rng.min})",
                    )


# ---------------------------------------------------------------------------- ComputeDomain
def _unknown_fields(e: _Errors, model: ApiModel | None, path: str) -> None:
    """Report fields the CRD schema does not have (the apiserver would drop them)."""
    if model is None:
        return
    for key in model.model_extra or {}:
        e.add(_field(path, key), f"unknown field {key!r}")


def _validate_compute_domain(e: _Errors, obj: nv.ComputeDomain) -> None:
    _validate_meta(e, obj.metadata, "metadata", namespaced=True)
    spec = obj.spec
    _unknown_fields(e, spec, "spec")
    if spec.channel is not None:
        _unknown_fields(e, spec.channel, "spec.channel")
        _unknown_fields(
            e, spec.channel.resource_claim_template, "spec.channel.resourceClaimTemplate"
        )
    if spec.num_nodes < 0:
        e.add(
            "spec.numNodes", f"Invalid value: {spec.num_nodes}: must be greater than or equal to 0"
        )
    if spec.channel is None:
        e.required("spec.channel")
    else:
        template = spec.channel.resource_claim_template.name
        if not template:
            e.required("spec.channel.resourceClaimTemplate.name")
        else:
            e.names("spec.channel.resourceClaimTemplate.name", template, dns_subdomain_errors)
        mode = spec.channel.allocation_mode
        if mode is not None and mode not in nv.CHANNEL_ALLOCATION_MODES:
            e.not_supported("spec.channel.allocationMode", mode, nv.CHANNEL_ALLOCATION_MODES)
    status = obj.status
    if status.status and status.status not in nv.READINESS:
        e.not_supported("status.status", status.status, nv.READINESS)
    names: set[str] = set()
    for i, node in enumerate(status.nodes or []):
        np = _index("status.nodes", i)
        if not node.name:
            e.required(_field(np, "name"))
        if node.name in names:
            e.add(_field(np, "name"), f"Duplicate value: {node.name!r}")
        names.add(node.name)
        if node.status is not None and node.status not in nv.READINESS:
            e.not_supported(_field(np, "status"), node.status, nv.READINESS)
        if node.ip_address:
            _check_ip(e, node.ip_address, _field(np, "ipAddress"))


def _check_ip(e: _Errors, value: str, path: str) -> None:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        e.add(path, f"Invalid value: {value!r}: must be a valid IP address")


def _validate_compute_domain_clique(e: _Errors, obj: nv.ComputeDomainClique) -> None:
    _validate_meta(e, obj.metadata, "metadata", namespaced=True)
    names: set[str] = set()
    for i, daemon in enumerate(obj.daemons or []):
        dp = _index("daemons", i)
        if not daemon.node_name:
            e.required(_field(dp, "nodeName"))
        if daemon.node_name in names:
            e.add(_field(dp, "nodeName"), f"Duplicate value: {daemon.node_name!r}")
        names.add(daemon.node_name)
        if daemon.status is not None and daemon.status not in nv.READINESS:
            e.not_supported(_field(dp, "status"), daemon.status, nv.READINESS)
        if daemon.ip_address:
            _check_ip(e, daemon.ip_address, _field(dp, "ipAddress"))


# ---------------------------------------------------------------------------- dispatch
_VALIDATORS: Final[dict[type[Any], Callable[[_Errors, Any], None]]] = {
    r.DeviceClass: _validate_device_class,
    r.ResourceSlice: _validate_resource_slice,
    r.ResourceClaim: _validate_resource_claim,
    r.ResourceClaimTemplate: _validate_resource_claim_template,
    nv.ComputeDomain: _validate_compute_domain,
    nv.ComputeDomainClique: _validate_compute_domain_clique,
}


def _wrap_device(device: r.Device) -> r.ResourceSlice:
    per_device = bool(device.node_name or device.node_selector is not None or device.all_nodes)
    spec = r.ResourceSliceSpec(
        driver="example.com",
        pool=r.ResourcePool(name="pool", generation=0, resource_slice_count=1),
        devices=[device],
    )
    if per_device:
        spec.per_device_node_selection = True
    else:
        spec.all_nodes = True
    return r.ResourceSlice(metadata=ObjectMeta(name="slice"), spec=spec)


def _wrap_claim(devices: r.DeviceClaim) -> r.ResourceClaim:
    return r.ResourceClaim(
        metadata=ObjectMeta(name="claim"), spec=r.ResourceClaimSpec(devices=devices)
    )


# Nested types are validated inside a minimal valid parent; only their own errors are kept.
_NESTED: Final[dict[type[Any], tuple[Callable[[Any], ApiObject], str]]] = {
    r.ResourceSliceSpec: (
        lambda spec: r.ResourceSlice(metadata=ObjectMeta(name="slice"), spec=spec),
        "spec",
    ),
    r.Device: (_wrap_device, "spec.devices[0]"),
    r.DeviceClassSpec: (
        lambda spec: r.DeviceClass(metadata=ObjectMeta(name="class"), spec=spec),
        "spec",
    ),
    r.ResourceClaimSpec: (
        lambda spec: r.ResourceClaim(metadata=ObjectMeta(name="claim"), spec=spec),
        "spec",
    ),
    r.DeviceClaim: (_wrap_claim, "spec.devices"),
    r.DeviceRequest: (
        lambda request: _wrap_claim(r.DeviceClaim(requests=[request])),
        "spec.devices.requests[0]",
    ),
}


def _nested_errors(obj: ApiModel) -> list[ValidationError] | None:
    entry = _NESTED.get(type(obj))
    if entry is None:
        return None
    wrap, prefix = entry
    ref = ObjectRef(kind=type(obj).__name__)
    found = []
    for error in validation_errors(wrap(obj)):
        if error.path == prefix or error.path.startswith((prefix + ".", prefix + "[")):
            path = error.path[len(prefix) :].lstrip(".")
            found.append(ValidationError(path, error.message, object_ref=ref))
    return found


def _object_ref(obj: ApiModel) -> ObjectRef:
    if isinstance(obj, ApiObject):
        return obj.object_ref()
    kind = getattr(obj, "KIND", "") or type(obj).__name__
    return ObjectRef(kind=kind)


def validation_errors(obj: ApiModel) -> list[ValidationError]:
    """Every rule ``obj`` breaks (empty when valid), each with its field path."""
    ref = _object_ref(obj)
    if isinstance(obj, nv._OpaqueConfig):
        try:
            obj.validate()
        except ValidationError as exc:
            return [ValidationError(exc.path, exc.message, object_ref=ref)]
        return []
    items: Iterable[tuple[str, ApiObject]]
    items_attr = getattr(obj, "items", None)
    if isinstance(obj, ApiObject) and isinstance(items_attr, list):
        items = [(f"items[{i}]", item) for i, item in enumerate(items_attr)]
        errors: list[ValidationError] = []
        for prefix, item in items:
            errors += [
                err.with_object(item.object_ref(), prefix=prefix) for err in validation_errors(item)
            ]
        return errors
    validator = _VALIDATORS.get(type(obj))
    if validator is None:
        nested = _nested_errors(obj)
        if nested is not None:
            return nested
        raise TypeError(f"no API validation for {type(obj).__name__} on its own")
    collected = _Errors()
    validator(collected, obj)
    return [ValidationError(path, message, object_ref=ref) for path, message in collected.items]


def validate(obj: ApiModel) -> None:
    """Raise the first :class:`ValidationError` the kube-apiserver would report for ``obj``."""
    errors = validation_errors(obj)
    if errors:
        raise errors[0]
