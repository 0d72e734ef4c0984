"""The structured allocator (kube-scheduler semantics) and its diagnostics.

Public API::

    from dra_allocator import CelEngine, Cluster, NodeInfo, Snapshot, parse_objects

    classes, slices, claims, nodes = parse_objects(objects)   # v1 JSON dicts
    snapshot = Snapshot(classes, slices, claims, [NodeInfo.from_dict(n) for n in nodes])
    cluster = Cluster.from_snapshot(snapshot, engine=CelEngine())
    outcome = cluster.allocate(pending_claims)                # nodes tried in name order
    if outcome.allocated:
        cluster.commit(pending_claims, outcome.allocated)
"""

from .allocator import Allocated, Allocator, Unsatisfiable
from .cel_engine import CelEngine
from .cluster import Cluster, ClusterOutcome
from .errors import (
    AllocationError,
    AllocationTimeoutError,
    CapacityRequestError,
    ConstraintError,
    FeatureDisabledError,
    InvalidPoolError,
    SelectorError,
    TooManyDevicesError,
    UnknownDeviceClassError,
    UnsupportedRequestError,
)
from .explain import ClaimDiagnosis, NodeDiagnosis, diagnose
from .features import GATE_NAMES, Features
from .model import (
    ClaimInfo,
    ClassInfo,
    DeviceInfo,
    SliceInfo,
    parse_claim,
    parse_class,
    parse_objects,
    parse_slice,
)
from .nodes import NodeInfo
from .snapshot import Snapshot
from .state import AllocatedState

__all__ = [
    "GATE_NAMES",
    "Allocated",
    "AllocatedState",
    "AllocationError",
    "AllocationTimeoutError",
    "Allocator",
    "CapacityRequestError",
    "CelEngine",
    "ClaimDiagnosis",
    "ClaimInfo",
    "ClassInfo",
    "Cluster",
    "ClusterOutcome",
    "ConstraintError",
    "DeviceInfo",
    "FeatureDisabledError",
    "Features",
    "InvalidPoolError",
    "NodeDiagnosis",
    "NodeInfo",
    "SelectorError",
    "SliceInfo",
    "Snapshot",
    "TooManyDevicesError",
    "UnknownDeviceClassError",
    "Unsatisfiable",
    "UnsupportedRequestError",
    "diagnose",
    "parse_claim",
    "parse_class",
    "parse_objects",
    "parse_slice",
]
