"""Which claims are allocated and which wait, by the DeviceClass of their requests.

``resource_class`` is the class a request names (for a prioritized list: of the
subrequest that was allocated, or of every subrequest while pending). A claim whose
requests name several classes is counted once under each.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from dra_allocator.claim_changes import ClaimChanges
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
    """Each claim's series, and all of them by side, kept between reconciles.

    The controller's view hands out the same ClaimInfo until the claim changes, so a
    reconcile after one change recomputes one claim's series. Given the snapshot's
    :class:`~dra_allocator.claim_changes.ClaimChanges` that follow the last claims seen,
    only the changed claims are looked at; else every claim, compared by identity.
    """

    def __init__(self) -> None:
        """An empty cache."""
        self._by_key: dict[str, tuple[ClaimInfo, bool, list[ClaimSeries]]] = {}
        # The last claims' series by side, in their claims' order, and the claims' snapshot.
        self._sides: tuple[list[ClaimSeries], list[ClaimSeries]] | None = None
        self._serial: int | None = None

    def _series(self, claim: ClaimInfo) -> tuple[bool, list[ClaimSeries]]:
        """(allocated?, series) of one claim."""
        cached = self._by_key.get(claim.key)
        if cached is not None and cached[0] is claim:
            return cached[1], cached[2]
        allocated, series = _one_claim(claim)
        self._by_key[claim.key] = (claim, allocated, series)
        return allocated, series

    def _retain(self, keys: set[str]) -> None:
        """Forget claims that are gone (memory stays bounded by the live claims)."""
        if len(self._by_key) > len(keys):
            self._by_key = {k: v for k, v in self._by_key.items() if k in keys}

    def sides(
        self, claims: Iterable[ClaimInfo], changes: ClaimChanges | None = None
    ) -> tuple[list[ClaimSeries], list[ClaimSeries]]:
        """(allocated, pending) series of ``claims``, the claims of the snapshot ``changes``
        describes (when given)."""
        if changes is not None and self._sides is not None and changes.follows(self._serial):
            if changes.changed:
                for before, after in changes.changed:
                    if after is not None:
                        self._series(after)
                    elif before is not None:
                        self._by_key.pop(before.key, None)
                self._sides = self._flatten()
        else:
            keys = set()
            for claim in claims:
                keys.add(claim.key)
                self._series(claim)
            self._retain(keys)
            self._sides = self._flatten()
        self._serial = changes.serial if changes is not None else None
        return list(self._sides[0]), list(self._sides[1])

    def _flatten(self) -> tuple[list[ClaimSeries], list[ClaimSeries]]:
        entries = self._by_key.values()
        allocated = [s for _, is_allocated, ss in entries if is_allocated for s in ss]
        pending = [s for _, is_allocated, ss in entries if not is_allocated for s in ss]
        return allocated, pending


def claim_series(
    claims: Iterable[ClaimInfo],
    cache: SeriesCache | None = None,
    changes: ClaimChanges | None = None,
) -> tuple[list[ClaimSeries], list[ClaimSeries]]:
    """(allocated, pending) series: one per claim and class. With ``cache``, the claims'
    series are kept for the next call, updated by ``changes`` when they follow its last."""
    cache = cache if cache is not None else SeriesCache()
    return cache.sides(claims, changes)
