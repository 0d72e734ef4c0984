"""The structured allocator: the kube-scheduler's first-fit backtracking search.

For one node and the claims of one pod, devices are tried in a fixed order (pools by
(driver, pool), slices by name, devices in slice order), one request after the other,
one claim after the other. Within a request only combinations are tried (each further
device comes after the previous one), across requests and claims every order. The first
complete solution wins. Every tentative pick updates counters, capacity and constraints,
and every rejected or backtracked pick rolls all of them back.

:class:`Allocator` runs one :class:`dra_allocator.search.Search` per node; the search works
on the state of :mod:`dra_allocator.search_state` (the preamble, device checks, results).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .counters import CounterSets
from .features import Features
from .model import ClaimInfo, ClassInfo
from .nodes import NodeInfo
from .pools import Pool
from .search import ALL_COUNTERS_CRASH_UNTIL, ALL_SUBREQUEST_RESET_UNTIL, DONE, FAIL, Search
from .search_state import MAX_RESULTS
from .selectors import SelectorEngine
from .state import AllocatedState

__all__ = [
    "ALL_COUNTERS_CRASH_UNTIL",
    "ALL_SUBREQUEST_RESET_UNTIL",
    "DEFAULT_TIMEOUT_S",
    "MAX_RESULTS",
    "PERMUTATIONS_UNTIL",
    "Allocated",
    "Allocator",
    "Outcome",
    "Unsatisfiable",
]

# Up to this minor release upstream searches permutations, not combinations, per request.
PERMUTATIONS_UNTIL = 35
DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Allocated:
    """Every claim got devices: one ``status.allocation`` (v1 JSON) per claim."""

    node: str
    allocations: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Unsatisfiable:
    """No solution on this node. Not an error: another node may work."""

    node: str
    invalid_pools: list[str] = field(default_factory=list)


Outcome = Allocated | Unsatisfiable


class Allocator:
    """Allocates claims on a node from pools, like the kube-scheduler's allocator.

    The instance is reusable across nodes and calls; selector results are cached on the
    devices themselves.
    """

    def __init__(
        self,
        *,
        classes: Mapping[str, ClassInfo],
        engine: SelectorEngine,
        features: Features | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.classes = classes
        self.engine = engine
        self.features = features or Features()
        self.timeout_s = timeout_s
        # Keyed by pool ID (by pool name at 1.35), across nodes, as upstream's allocator.
        self.counter_cache: dict[object, tuple[int, CounterSets, bool]] = {}
        self.last_invocations = 0
        # False for 1.35, whose allocator tries every permutation within a request (so a
        # shareable device can serve one request twice; 1.36 added the start position),
        # and to measure that search as a baseline.
        self.combinations_only = self.features.kube_minor > PERMUTATIONS_UNTIL

    def validate(self, claims: Sequence[ClaimInfo]) -> None:
        """Raise the node-independent input errors (unknown class, disabled feature...).

        The scheduler raises these on every node; checking them once up front keeps them
        errors even when every node is skipped as full.
        """
        Search(self, claims, NodeInfo(name=""), [], AllocatedState()).validate()

    def allocate(
        self,
        claims: Sequence[ClaimInfo],
        *,
        node: NodeInfo,
        pools: Sequence[Pool],
        state: AllocatedState,
        skip_hopeless: bool = False,
    ) -> Outcome:
        """Find devices for all claims on the node, or report that there are none.

        ``skip_hopeless``: do not search when the node is provably short of devices and the
        search could meet no error (``kubectl dra explain`` asks about every node; the same
        outcome, except that a search that would run out of time is unsatisfiable).

        Raises ``AllocationError`` subclasses for input the scheduler rejects too.
        """
        search = Search(self, claims, node, pools, state)
        search.validate()
        hopeless = skip_hopeless and search.short_of_devices()
        result = FAIL if hopeless else search.run()
        self.last_invocations = search.invocations
        if result != DONE:
            return Unsatisfiable(
                node=node.name,
                invalid_pools=[f"{p}: {p.invalid_reason}" for p in pools if p.invalid],
            )
        return Allocated(node=node.name, allocations=search.build_results())
