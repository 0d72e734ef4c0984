"""A :class:`~dra_allocator.cluster.Cluster` from a conformance-notation case (test support)."""

from __future__ import annotations

from typing import Any

from allocation_builders import case_objects
from dra_allocator.cel_engine import CelEngine
from dra_allocator.cluster import Cluster
from dra_allocator.model import ClaimInfo, parse_objects
from dra_allocator.nodes import NodeInfo
from dra_allocator.selectors import SelectorEngine


def case_cluster(
    case: dict[str, Any], *, engine: SelectorEngine | None = None, **options: Any
) -> tuple[Cluster, list[ClaimInfo]]:
    """The case's classes, slices, nodes and claims (those allocated hold their devices) as
    a Cluster, with a fresh :class:`CelEngine` unless ``engine`` is given; and every claim
    of the case. ``options`` are the Cluster's other keywords (features, timeout_s...)."""
    classes, slices, claims, nodes = parse_objects(case_objects(case))
    cluster = Cluster(
        classes=classes,
        slices=slices,
        claims=claims,
        nodes=[NodeInfo.from_dict(n) for n in nodes],
        engine=engine or CelEngine(),
        **options,
    )
    return cluster, claims
