"""The CRD schema's rules for ComputeDomain and ComputeDomainClique (our own group)."""

from __future__ import annotations

import ipaddress

from .. import nvidia_v1beta1 as nv
from .._model import ApiModel
from ..names import (
    dns_subdomain_errors,
)
from ._common import (
    _Errors,
    _field,
    _index,
    _validate_meta,
)


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
