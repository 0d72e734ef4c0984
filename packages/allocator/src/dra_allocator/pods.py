"""Pods as the allocator reads them: parsed once at the edge into api-types' lenient
:class:`~dra_api_types.Pod`, and the names of the ResourceClaims a pod uses.

Everything past the edge (placement, extended resources, templates, explain, ``kubectl dra
allocate``) works on the typed Pod. Pure logic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dra_api_types import Pod, ValidationError

from .errors import AllocationError

__all__ = ["pod_claim_names", "read_pod"]


def read_pod(data: Mapping[str, Any], *, where: str, field: str = "") -> Pod:
    """A v1 Pod's model, parsed leniently (unknown fields kept, no API validation).

    ``field`` is where the pod sits in the object named by ``where`` (``spec.template`` for
    a workload's pods); errors name the field below it.

    Raises:
        AllocationError: a field the model types has the wrong type (naming the field).
    """
    try:
        return Pod.from_dict(data)
    except ValidationError as exc:
        path = f"{field}.{exc.path}" if field and exc.path else field or exc.path
        raise AllocationError(f"cannot parse: {exc}", object_ref=where, field=path) from exc


def pod_claim_names(pod: Pod) -> list[str]:
    """Names of the ResourceClaims a pod uses (templates resolved through its status)."""
    generated = {s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses or []}
    names = []
    for ref in pod.spec.resource_claims or []:
        if ref.resource_claim_name:
            names.append(ref.resource_claim_name)
        else:
            made = generated.get(ref.name or "")
            if made:
                names.append(made)
    return names
