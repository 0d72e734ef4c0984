"""The allocation controller (``dra-allocation-controller``).

Informer caches of claims, slices, classes, DeviceTaintRules, pods and nodes feed one
reconcile loop: the seed article's metrics (``kube_resourceclaim_allocated``,
``kube_resourceclaim_pending``, ``node_dra_resource_available``) and, for pods the
scheduler could not place, ``DRAUnsatisfiable`` Events from the allocator's diagnosis.
"""

from .availability import AvailableSeries, free_devices
from .claim_series import ClaimSeries, claim_series
from .controller import AllocationController, Settings
from .event_text import unsatisfiable_message
from .metrics import ClusterSeries, ControllerMetrics

__all__ = [
    "AllocationController",
    "AvailableSeries",
    "ClaimSeries",
    "ClusterSeries",
    "ControllerMetrics",
    "Settings",
    "claim_series",
    "free_devices",
    "unsatisfiable_message",
]
