"""Pieces every rule set uses: limits, the error collector, metadata and shared checks."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence, Sized
from typing import Final

from .. import nvidia_v1beta1 as nv
from .. import resource_v1 as r
from ..errors import ValidationError
from ..meta_v1 import NodeSelector, ObjectMeta, OwnerReference
from ..names import (
    device_qualified_name_errors,
    dns_label_errors,
    dns_subdomain_errors,
    label_value_errors,
    qualified_name_errors,
)

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
