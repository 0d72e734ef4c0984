"""The driver-agnostic core of a DRA kubelet plugin, shared by the GPU and the compute-domain
plugin.

A driver implements :class:`Driver` (identity, ``plan``, ``prepare``, ``unprepare``,
``recover``, ``device_type``, ``device_identity``) with its own plan type, and runs it with
:class:`PluginRunner`, which composes it with the :class:`ClaimEngine` (and, where the
driver needs them, a :class:`RetryPolicy` and :class:`ClaimHooks`); the core owns
registration, the DRA and health gRPC services, the checkpoint (with the driver's
``driver_state``), the CDI spec files, the node lock, the slice publisher, metrics, logs,
feature gates and device-node creation. Nothing here imports a driver, ``dra_nvlib`` or
``dra_sharing``. See the package README.

Public API (the modules hold the rest)::

    from dra_kubelet_core import (
        Driver, DriverIdentity, ClaimPlan, ClaimEdits, PrepareContext,  # the driver API
        RetryPolicy, ClaimHooks,                 # what a driver passes to the engine
        ClaimEngine, PluginRunner, CommonSettings,
        CDIKind, ContainerEdits, DeviceNode, Mount, Hook,
        AllocatedDevice, PreparedClaim, PreparedDevice, ClaimState, DeviceIdentity,
        ClaimRef, PluginError, ClaimError, ConfigurationError,
        HealthHub, configure_logging,
    )
"""

from __future__ import annotations

from dra_kubelet_core.allocated import AllocatedDevice
from dra_kubelet_core.allocation_info import DeviceIdentity
from dra_kubelet_core.cdi import CDIKind, ContainerEdits, DeviceNode, Hook, Mount
from dra_kubelet_core.checkpoint import ClaimState, PreparedClaim, PreparedDevice
from dra_kubelet_core.driver import (
    ClaimEdits,
    ClaimHooks,
    ClaimPlan,
    Driver,
    DriverIdentity,
    PrepareContext,
    RetryPolicy,
)
from dra_kubelet_core.errors import ClaimError, ClaimRef, ConfigurationError, PluginError
from dra_kubelet_core.health import HealthHub
from dra_kubelet_core.logs import configure_logging
from dra_kubelet_core.runner import PluginRunner
from dra_kubelet_core.settings import CommonSettings
from dra_kubelet_core.state import ClaimEngine

__all__ = [
    "AllocatedDevice",
    "CDIKind",
    "ClaimEdits",
    "ClaimEngine",
    "ClaimError",
    "ClaimHooks",
    "ClaimPlan",
    "ClaimRef",
    "ClaimState",
    "CommonSettings",
    "ConfigurationError",
    "ContainerEdits",
    "DeviceIdentity",
    "DeviceNode",
    "Driver",
    "DriverIdentity",
    "HealthHub",
    "Hook",
    "Mount",
    "PluginError",
    "PluginRunner",
    "PrepareContext",
    "PreparedClaim",
    "PreparedDevice",
    "RetryPolicy",
    "configure_logging",
]
