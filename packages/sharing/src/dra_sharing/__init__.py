"""GPU sharing for the ``gpu.nvidia.com`` DRA driver: time-slicing, MPS, consumable shares,
static and dynamic MIG.

The kubelet plugin resolves a claim's configs into a plan and hands it to the manager::

    from dra_nvlib import DeviceLibConfig, open_device_lib
    from dra_sharing import (
        SharedDevice, SharingGates, SharingManager, TimeSlicer, resolve_sharing,
    )

    lib = open_device_lib(DeviceLibConfig(backend="fake", node_name="n1", fake_fleet="2xA100"))
    plan = resolve_sharing("ns/claim", devices, SharingGates(time_slicing=True))
    manager = SharingManager(time_slicer=TimeSlicer(lib), mps=None, dynamic_mig=None)
    state = manager.prepare(claim_uid, plan, others=[])   # checkpoint state.to_json()
    manager.unprepare(state, others=[])
"""

from dra_sharing.claim_state import (
    ClaimSharingState,
    CreatedMig,
    MpsDaemonRecord,
    StateDecodeError,
    in_use_time_slices,
)
from dra_sharing.consumable import (
    ConsumableMode,
    ConsumableShares,
    ConsumableSharesError,
    parse_consumable_shares,
)
from dra_sharing.dynamic_mig import DynamicMig, MigRequest
from dra_sharing.errors import (
    SharingApplyError,
    SharingConfigError,
    SharingError,
    SharingGateError,
)
from dra_sharing.manager import RecoveryReport, SharingManager
from dra_sharing.mps import (
    CONTAINER_PIPE_DIR,
    FakeMpsLauncher,
    MpsDaemonManager,
    MpsDaemonSpec,
    MpsDirs,
    MpsEdits,
    MpsLauncher,
    MpsSpecError,
    NvidiaMpsLauncher,
    mps_daemon_id,
)
from dra_sharing.partitionable import (
    MigOffer,
    counter_set_json,
    counter_set_name,
    dynamic_mig_device_name,
    full_gpu_capacity,
    full_gpu_consumption,
    mig_offers,
    partitionable,
    split_layout,
)
from dra_sharing.resolve import (
    MpsSettings,
    SharedDevice,
    SharingGates,
    SharingGroup,
    SharingPlan,
    Strategy,
    resolve_sharing,
    time_slice_level,
)
from dra_sharing.timeslice import TimeSlicer, levels_to_reset

__all__ = [
    "CONTAINER_PIPE_DIR",
    "ClaimSharingState",
    "ConsumableMode",
    "ConsumableShares",
    "ConsumableSharesError",
    "CreatedMig",
    "DynamicMig",
    "FakeMpsLauncher",
    "MigOffer",
    "MigRequest",
    "MpsDaemonManager",
    "MpsDaemonRecord",
    "MpsDaemonSpec",
    "MpsDirs",
    "MpsEdits",
    "MpsLauncher",
    "MpsSettings",
    "MpsSpecError",
    "NvidiaMpsLauncher",
    "RecoveryReport",
    "SharedDevice",
    "SharingApplyError",
    "SharingConfigError",
    "SharingError",
    "SharingGateError",
    "SharingGates",
    "SharingGroup",
    "SharingManager",
    "SharingPlan",
    "StateDecodeError",
    "Strategy",
    "TimeSlicer",
    "counter_set_json",
    "counter_set_name",
    "dynamic_mig_device_name",
    "full_gpu_capacity",
    "full_gpu_consumption",
    "in_use_time_slices",
    "levels_to_reset",
    "mig_offers",
    "mps_daemon_id",
    "parse_consumable_shares",
    "partitionable",
    "resolve_sharing",
    "split_layout",
    "time_slice_level",
]
