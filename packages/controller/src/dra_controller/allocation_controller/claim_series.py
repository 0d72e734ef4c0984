"""Which claims are allocated and which wait, by the DeviceClass of their requests.

``resource_class`` is the class a request names (for a prioritized list: of the
subrequest that was allocated, or of every subrequest while pending). A claim whose
requests name several classes is counted once under each.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..allocation.model import ClaimInfo

#: Label value when a claim names no class (no requests, or a request not understood).
NO_CLASS = ""


@dataclass(frozen=True, slots=True)
class ClaimSeries:
    """One series of ``kube_resourceclaim_allocated`` or ``kube_resourceclaim_pending``."""

    namespace: str
    name: str
    resource_class: str


def _requested_classes(claim: ClaimInfo) -> list[str]:
    classes: list[str] = []
    for req in claim.requests:
        specs = list(req.first_available) or ([req.exact] if req.exact else [])
        classes.extend(s.class_name for s in specs)
    return classes


def _allocated_classes(claim: ClaimInfo) -> list[str]:
    by_request = {}
    for req in claim.requests:
        for spec in list(req.first_available) or ([req.exact] if req.exact else []):
            by_request[spec.full_name] = spec.class_name
    results = ((claim.allocation or {}).get("devices") or {}).get("results") or []
    return [by_request.get(str(r.get("request")), NO_CLASS) for r in results]


def _unique(values: Iterable[str]) -> list[str]:
    out = sorted(set(values))
    return out or [NO_CLASS]


def is_deleting(claim: ClaimInfo) -> bool:
    """Whether the claim has a deletion timestamp (it no longer waits for anything)."""
    return bool((claim.raw.get("metadata") or {}).get("deletionTimestamp"))


def claim_series(claims: Iterable[ClaimInfo]) -> tuple[list[ClaimSeries], list[ClaimSeries]]:
    """(allocated, pending) series: one per claim and class."""
    allocated: list[ClaimSeries] = []
    pending: list[ClaimSeries] = []
    for claim in claims:
        if claim.allocation is not None:
            for cls in _unique(_allocated_classes(claim)):
                allocated.append(ClaimSeries(claim.namespace, claim.name, cls))
        elif not is_deleting(claim):
            for cls in _unique(_requested_classes(claim)):
                pending.append(ClaimSeries(claim.namespace, claim.name, cls))
    return allocated, pending
