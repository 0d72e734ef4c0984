"""Which pod holds which device: the rows of ``nvidia_dra_device_allocation_info`` (pure).

dcgm-exporter finds a GPU's pod through the kubelet's PodResources API, which reports a DRA
device by claim, pool and name but not by GPU UUID, so its ``DCGM_FI_*`` series of a
DRA-allocated GPU carry no pod. The plugin knows both sides: one row per (prepared device,
pod the claim is reserved for), labelled to join dcgm-exporter's series on ``UUID`` (the
GPU's, for a MIG device its parent's) and ``GPU_I_ID`` (the MIG GPU instance; empty for a
full GPU, as dcgm-exporter leaves it). The rows are computed from the checkpoint, so they
are the same after a restart and disappear with the claim's unprepare. The ``container``
label is added when the series are scraped, from the kubelet (:mod:`.pod_containers`): the
containers of a pod are not known yet when its claims are prepared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dra_api_types import ResourceClaim

from dra_kubelet_core.checkpoint import (
    Checkpoint,
    ClaimState,
    PodRef,
    PreparedClaim,
    PreparedDevice,
)

__all__ = [
    "ALLOCATION_INFO_LABELS",
    "AllocationInfo",
    "DeviceIdentity",
    "allocation_rows",
    "reserved_pods",
]


@dataclass(frozen=True, slots=True)
class DeviceIdentity:
    """A prepared device in dcgm-exporter's terms (what a driver reports; see
    :meth:`~dra_kubelet_core.driver.Driver.device_identity`)."""

    #: ``UUID``: the GPU's UUID; for a MIG device the parent GPU's.
    uuid: str
    #: ``gpu``: the GPU's index on the node ('' when unknown).
    index: str = ""
    #: ``GPU_I_ID``: the MIG GPU instance id ('' for a full GPU or when unknown).
    gpu_instance_id: str = ""
    #: ``mig_uuid``: the MIG device's own UUID ('' for a full GPU).
    mig_uuid: str = ""


#: The label names, in the order of :meth:`AllocationInfo.values`.
ALLOCATION_INFO_LABELS = (
    "node",
    "driver",
    "namespace",
    "pod",
    "pod_uid",
    "container",
    "claim",
    "claim_uid",
    "request",
    "device",
    "UUID",
    "gpu",
    "GPU_I_ID",
    "mig_uuid",
)


@dataclass(frozen=True, slots=True)
class AllocationInfo:
    """One series of ``nvidia_dra_device_allocation_info``."""

    node: str
    driver: str
    namespace: str
    pod: str
    pod_uid: str
    claim: str
    claim_uid: str
    request: str
    device: str
    identity: DeviceIdentity
    #: A container of the pod that uses the claim ('' when unknown: :mod:`.pod_containers`).
    container: str = ""

    def values(self) -> list[str]:
        """Label values in the order of :data:`ALLOCATION_INFO_LABELS`."""
        i = self.identity
        return [
            self.node, self.driver, self.namespace, self.pod, self.pod_uid, self.container,
            self.claim, self.claim_uid, self.request, self.device, i.uuid, i.index,
            i.gpu_instance_id, i.mig_uuid,
        ]  # fmt: skip


def allocation_rows(
    checkpoint: Checkpoint,
    *,
    node: str,
    driver: str,
    identify: Callable[[PreparedClaim, PreparedDevice], DeviceIdentity | None],
) -> list[AllocationInfo]:
    """The rows of every completely prepared claim, one per device and pod (a claim
    reserved for no pod recorded: one row with an empty pod). A device ``identify`` does
    not know as a GPU (a channel, a device this node no longer publishes) has no row."""
    rows: list[AllocationInfo] = []
    for claim in sorted(checkpoint.claims.values(), key=lambda c: c.uid):
        if claim.state != ClaimState.PREPARE_COMPLETED:
            continue
        for device in claim.devices:
            identity = identify(claim, device)
            if identity is None:
                continue
            for pod in claim.pods or (None,):
                rows.append(
                    AllocationInfo(
                        node=node,
                        driver=driver,
                        namespace=claim.namespace,
                        pod=pod.name if pod is not None else "",
                        pod_uid=pod.uid if pod is not None else "",
                        claim=claim.name,
                        claim_uid=claim.uid,
                        request=",".join(device.request_names),
                        device=device.device_name,
                        identity=identity,
                    )
                )
    return rows


def reserved_pods(claim: ResourceClaim) -> tuple[PodRef, ...]:
    """The pods in the claim's ``status.reservedFor`` (other consumers left out)."""
    refs = claim.status.reserved_for or []
    return tuple(
        PodRef(name=r.name, uid=r.uid)
        for r in refs
        if r.resource == "pods" and not r.api_group and r.name
    )
