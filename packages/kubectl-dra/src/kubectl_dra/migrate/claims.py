"""Classic ResourceClaims and ResourceClaimTemplates to ``resource.k8s.io/v1`` (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from dra_api_types.legacy import (
    LegacyResourceClaim,
    LegacyResourceClaimSpec,
    LegacyResourceClaimTemplate,
    NvidiaGpuConfig,
)
from dra_api_types.nvidia_v1beta1 import GPU_DRIVER

from .classes import V1, kept_metadata, resolve_parameters
from .errors import MigrationError
from .gpu_config import gpu_requirements

REQUEST_NAME: Final = "gpu"
ALLOCATION_MODES: Final = {
    "WaitForFirstConsumer": "allocationMode WaitForFirstConsumer dropped: v1 claims are "
    "always allocated when the first pod using them is scheduled",
    "Immediate": "allocationMode Immediate dropped: v1 has no immediate allocation; the "
    "claim is allocated when the first pod using it is scheduled",
}


def claim_spec(
    spec: LegacyResourceClaimSpec,
    configs: Mapping[tuple[str, str], NvidiaGpuConfig],
    *,
    ref: str,
    path: str,
    namespace: str | None,
    known_classes: frozenset[str],
) -> tuple[dict[str, Any], list[str]]:
    """The v1 claim spec (one ``exactly`` request named ``gpu``) and the notes."""
    if not spec.resource_class_name:
        raise MigrationError("required value", object_ref=ref, field=f"{path}.resourceClassName")
    notes = [
        f"resourceClassName {spec.resource_class_name} -> request {REQUEST_NAME!r} with "
        f"exactly.deviceClassName {spec.resource_class_name}"
    ]
    if spec.resource_class_name not in known_classes:
        notes.append(
            f"DeviceClass {spec.resource_class_name} is not in the input: it must exist "
            "in the cluster"
        )
    if spec.allocation_mode is not None:
        why = ALLOCATION_MODES.get(spec.allocation_mode)
        if why is None:
            raise MigrationError(
                f"unknown value {spec.allocation_mode!r} (WaitForFirstConsumer or Immediate)",
                object_ref=ref,
                field=f"{path}.allocationMode",
            )
        notes.append(why)
    exactly: dict[str, Any] = {"deviceClassName": spec.resource_class_name}
    devices: dict[str, Any] = {"requests": [{"name": REQUEST_NAME, "exactly": exactly}]}
    if spec.parameters_ref is not None:
        config, ref_notes = resolve_parameters(
            spec.parameters_ref,
            configs,
            ref=ref,
            path=f"{path}.parametersRef",
            namespace=namespace,
        )
        notes.extend(ref_notes)
        req = gpu_requirements(
            config.spec, ref=f"NvidiaGPUConfig {config.metadata.name}", path="spec"
        )
        # The class already picks the device type; the claim adds only what narrows it.
        exactly["selectors"] = [{"cel": {"expression": e}} for e in req.selectors[1:]]
        if not exactly["selectors"]:
            del exactly["selectors"]
        if req.opaque_parameters is not None:
            devices["config"] = [
                {
                    "requests": [REQUEST_NAME],
                    "opaque": {"driver": GPU_DRIVER, "parameters": req.opaque_parameters},
                }
            ]
        notes.extend(f"from NvidiaGPUConfig {config.metadata.name}: {n}" for n in req.notes)
    return {"devices": devices}, notes


def convert_claim(
    claim: LegacyResourceClaim,
    configs: Mapping[tuple[str, str], NvidiaGpuConfig],
    *,
    ref: str,
    known_classes: frozenset[str],
) -> tuple[dict[str, Any], list[str]]:
    """A classic ResourceClaim as a v1 ResourceClaim of the same name."""
    spec, notes = claim_spec(
        claim.spec,
        configs,
        ref=ref,
        path="spec",
        namespace=claim.metadata.namespace,
        known_classes=known_classes,
    )
    if claim.status:
        notes.append("status dropped: the v1 claim is allocated anew")
    meta = kept_metadata(claim.metadata, namespaced=True)
    return {"apiVersion": V1, "kind": "ResourceClaim", "metadata": meta, "spec": spec}, [
        f"ResourceClaim -> {V1} ResourceClaim",
        *notes,
    ]


def convert_claim_template(
    tmpl: LegacyResourceClaimTemplate,
    configs: Mapping[tuple[str, str], NvidiaGpuConfig],
    *,
    ref: str,
    known_classes: frozenset[str],
) -> tuple[dict[str, Any], list[str]]:
    """A classic ResourceClaimTemplate as a v1 ResourceClaimTemplate of the same name."""
    spec, notes = claim_spec(
        tmpl.spec.spec,
        configs,
        ref=ref,
        path="spec.spec",
        namespace=tmpl.metadata.namespace,
        known_classes=known_classes,
    )
    outer: dict[str, Any] = {}
    if tmpl.spec.metadata is not None:
        inner_meta = {
            k: v for k, v in tmpl.spec.metadata.to_dict().items() if k in ("labels", "annotations")
        }
        if inner_meta:
            outer["metadata"] = inner_meta
    outer["spec"] = spec
    meta = kept_metadata(tmpl.metadata, namespaced=True)
    return {"apiVersion": V1, "kind": "ResourceClaimTemplate", "metadata": meta, "spec": outer}, [
        f"ResourceClaimTemplate -> {V1} ResourceClaimTemplate",
        *notes,
    ]
