"""Warming the webhook up before it serves: what the first reviews would otherwise pay.

Two costs fall on the first review that needs them, not on the import: the CEL parser a
selector warning check builds on first use (about 0.2 s, longer on a busy node), and the
validator of each opaque config kind (``dra_api_types`` models are built on first use, tens
of ms each). On a fresh replica the API server's first reviews waited for them, and reviews
arriving meanwhile queued behind the GIL: the scale benchmark's webhook p99 was those first
calls. :func:`warm_up` reviews one sample of each before the server binds its port, so the
pod is not Ready (and gets no review) until they are built.

Pure logic: the samples are decoded JSON; the verdicts are discarded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from dra_api_types.nvidia_v1beta1 import (
    API_VERSION,
    COMPUTE_DOMAIN_DRIVER,
    GPU_DRIVER,
    OPAQUE_KINDS,
)

from .admission import ADMISSION_API_VERSION, RESOURCE_GROUP, review

__all__ = ["SAMPLE_SELECTOR", "warm_up", "warm_up_reviews"]

#: A selector on a published attribute: its check parses CEL (what builds the parser).
SAMPLE_SELECTOR: Final = f"device.attributes['{GPU_DRIVER}'].productName == 'NVIDIA H100'"


#: A domain UID for the ComputeDomain configs' required ``domainID``.
_SAMPLE_DOMAIN: Final = "00000000-0000-0000-0000-000000000000"


def _config(kind: str) -> dict[str, Any]:
    parameters: dict[str, Any] = {"apiVersion": API_VERSION, "kind": kind}
    driver = GPU_DRIVER
    if kind.startswith("ComputeDomain"):
        # A valid sample, so its review runs the whole path (a refusal stops early).
        driver = COMPUTE_DOMAIN_DRIVER
        parameters["domainID"] = _SAMPLE_DOMAIN
    return {"requests": ["gpu"], "opaque": {"driver": driver, "parameters": parameters}}


def warm_up_reviews() -> list[dict[str, Any]]:
    """AdmissionReviews of ResourceClaims: one with a CEL selector, and one per opaque config
    kind of this project's drivers (each alone, so one refused config hides no other)."""
    reviews = []
    for index, kind in enumerate((None, *sorted(OPAQUE_KINDS))):
        request: dict[str, Any] = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
        devices: dict[str, Any] = {"requests": [request]}
        if kind is None:
            request["exactly"]["selectors"] = [{"cel": {"expression": SAMPLE_SELECTOR}}]
        else:
            devices["config"] = [_config(kind)]
        claim = {
            "apiVersion": f"{RESOURCE_GROUP}/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": f"warm-up-{index}", "namespace": "default"},
            "spec": {"devices": devices},
        }
        reviews.append(
            {
                "apiVersion": ADMISSION_API_VERSION,
                "kind": "AdmissionReview",
                "request": {
                    "uid": f"warm-up-{index}",
                    "resource": {
                        "group": RESOURCE_GROUP,
                        "version": "v1",
                        "resource": "resourceclaims",
                    },
                    "operation": "CREATE",
                    "namespace": "default",
                    "name": f"warm-up-{index}",
                    "object": claim,
                },
            }
        )
    return reviews


def warm_up(gates: Mapping[str, bool]) -> int:
    """Review every :func:`warm_up_reviews` sample under ``gates``; return how many."""
    samples = warm_up_reviews()
    for sample in samples:
        review(sample, gates=gates)
    return len(samples)
