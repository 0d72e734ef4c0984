"""Which claims are allocated and which wait, by the DeviceClass of their requests.

``resource_class`` is the class a request names (for a prioritized list: of the
subrequest that was allocated, or of every subrequest while pending). A claim whose
requests name several classes is counted once under each.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from dra_allocator.model import ClaimInfo

#: Label value when a claim names no class (no requests, or a request not understood).
NO_CLASS = ""


class ClaimSeries(NamedTuple):
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
    results = [] if claim.allocation is None else claim.allocation.devices.results or []
    return [by_request.get(r.request, NO_CLASS) for r in results]


def _unique(values: Iterable[str]) -> list[str]:
    out = sorted(set(values))
    return out or [NO_CLASS]


def is_deleting(claim: ClaimInfo) -> bool:
    """Whether the claim has a deletion timestamp (it no longer waits for anything)."""
    return bool(claim.obj.metadata.deletion_timestamp)


def _one_claim(claim: ClaimInfo) -> tuple[bool, list[ClaimSeries]]:
    if claim.allocation is not None:
        classes = _unique(_allocated_classes(claim))
        return True, [ClaimSeries(claim.namespace, claim.name, c) for c in classes]
    if is_deleting(claim):
        return False, []
    classes = _unique(_requested_classes(claim))
    return False, [ClaimSeries(claim.namespace, claim.name, c) for c in classes]


class SeriesCache:
    """Each claim's series, kept while the same parsed claim object comes back.

    The controller's view hands out the same ClaimInfo until the claim changes, so a
    reconcile after one change recomputes one claim's series.
    """

    def __init__(self) -> None:
        """An empty cache."""
        self._by_key: dict[str, tuple[ClaimInfo, bool, list[ClaimSeries]]] = {}

    def series(self, claim: ClaimInfo) -> tuple[bool, list[ClaimSeries]]:
        """(allocated?, series) of one claim."""
        cached = self._by_key.get(claim.key)
        if cached is not None and cached[0] is claim:
            return cached[1], cached[2]
        allocated, series = _one_claim(claim)
        self._by_key[claim.key] = (claim, allocated, series)
        return allocated, series

    def retain(self, keys: set[str]) -> None:
        """Forget claims that are gone (memory stays bounded by the live claims)."""
        if len(self._by_key) > len(keys):
            self._by_key = {k: v for k, v in self._by_key.items() if k in keys}


def claim_series(
    claims: Iterable[ClaimInfo], cache: SeriesCache | None = None
) -> tuple[list[ClaimSeries], list[ClaimSeries]]:
    """(allocated, pending) series: one per claim and class."""
    cache = cache if cache is not None else SeriesCache()
    allocated: list[ClaimSeries] = []
    pending: list[ClaimSeries] = []
    keys = set()
    for claim in claims:
        keys.add(claim.key)
        is_allocated, series = cache.series(claim)
        (allocated if is_allocated else pending).extend(series)
    cache.retain(keys)
    return allocated, pending
