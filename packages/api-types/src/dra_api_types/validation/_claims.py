"""The kube-apiserver's rules for DeviceClass, ResourceClaim and ResourceClaimTemplate."""

from __future__ import annotations

import ipaddress
import json

from .. import resource_v1 as r
from ..names import (
    dns_label_errors,
    dns_subdomain_errors,
    fully_qualified_name_errors,
    label_value_errors,
    qualified_name_errors,
    uid_errors,
)
from ._common import (
    CONFIG_SOURCES,
    LIMITS,
    _Errors,
    _field,
    _index,
    _key,
    _validate_allocation_mode,
    _validate_binding_parameters,
    _validate_capacity_requests,
    _validate_driver,
    _validate_meta,
    _validate_node_selector,
    _validate_opaque,
    _validate_pool_name,
    _validate_selectors,
    _validate_tolerations,
)


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
