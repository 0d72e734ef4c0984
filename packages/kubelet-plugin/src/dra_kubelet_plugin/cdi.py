"""The GPU plugin's CDI names: vendor ``k8s.gpu.nvidia.com``, class ``claim``.

One transient spec per claim, ``k8s.gpu.nvidia.com-claim_<claimUID>.json``, kind
``k8s.gpu.nvidia.com/claim``, so the CDI device ID the kubelet hands to the runtime is
``k8s.gpu.nvidia.com/claim=<claimUID>-<deviceName>``. The spec model and its rendering are
the core's (:mod:`dra_kubelet_core.cdi`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dra_api_types import GPU_DRIVER
from dra_kubelet_core.cdi import CDIKind, CDISpec, ContainerEdits

__all__ = [
    "CDI_CLASS",
    "CDI_KIND",
    "CDI_VENDOR",
    "GPU_CDI",
    "cdi_device_id",
    "claim_spec_file_name",
    "claim_uid_from_spec_file_name",
    "render_claim_spec",
]

CDI_VENDOR = f"k8s.{GPU_DRIVER}"
CDI_CLASS = "claim"
GPU_CDI = CDIKind(vendor=CDI_VENDOR, class_=CDI_CLASS)
CDI_KIND = GPU_CDI.kind


def cdi_device_id(claim_uid: str, device_name: str) -> str:
    """Return the fully qualified CDI device ID of a GPU plugin device."""
    return GPU_CDI.device_id(claim_uid, device_name)


def claim_spec_file_name(claim_uid: str) -> str:
    """Return the file name of a claim's transient GPU spec."""
    return GPU_CDI.spec_file_name(claim_uid)


def claim_uid_from_spec_file_name(name: str) -> str | None:
    """Return the claim UID of a spec file written by the GPU plugin, else ``None``."""
    return GPU_CDI.claim_uid_from_spec_file_name(name)


def render_claim_spec(
    *,
    claim_uid: str,
    devices: Sequence[tuple[str, ContainerEdits]],
    common: Iterable[ContainerEdits] = (),
) -> CDISpec:
    """Build the GPU spec of one claim (see :meth:`CDIKind.render_claim_spec`)."""
    return GPU_CDI.render_claim_spec(claim_uid=claim_uid, devices=devices, common=common)
