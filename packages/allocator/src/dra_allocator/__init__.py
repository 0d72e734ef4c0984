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

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

# Each name is imported from its module on first use, not here: a program that needs one
# light module (kubectl dra's parser reads ``features``; ``errors`` for what it catches)
# would otherwise import the allocator, the models and the CEL compiler before it can parse
# its flags, and ``kubectl dra explain`` starts the cluster's lists while those load.
_MODULE_OF = {
    "Allocated": "allocator",
    "Allocator": "allocator",
    "Unsatisfiable": "allocator",
    "CelEngine": "cel_engine",
    "Cluster": "cluster",
    "ClusterOutcome": "cluster",
    "AllocationError": "errors",
    "AllocationTimeoutError": "errors",
    "CapacityRequestError": "errors",
    "ConstraintError": "errors",
    "FeatureDisabledError": "errors",
    "InvalidPoolError": "errors",
    "SelectorError": "errors",
    "TooManyDevicesError": "errors",
    "UnknownDeviceClassError": "errors",
    "UnsupportedRequestError": "errors",
    "ClaimDiagnosis": "explain",
    "NodeDiagnosis": "explain",
    "diagnose": "explain",
    "GATE_NAMES": "features",
    "Features": "features",
    "ClaimInfo": "model",
    "ClassInfo": "model",
    "DeviceInfo": "model",
    "SliceInfo": "model",
    "parse_claim": "model",
    "parse_class": "model",
    "parse_objects": "model",
    "parse_slice": "model",
    "NodeInfo": "nodes",
    "Snapshot": "snapshot",
    "AllocatedState": "state",
}


def __getattr__(name: str) -> object:
    """The public name from its module, imported on first use (PEP 562)."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
