"""Builders shared by the ComputeDomain tests (imported by name; pytest's ``pythonpath``)."""

from __future__ import annotations

from typing import Any

DRIVER_NS = "dra-driver"


def domain_body(
    name: str = "cd1",
    namespace: str = "team-a",
    *,
    num_nodes: int = 2,
    template: str = "imex-channel-0",
    mode: str | None = None,
) -> dict[str, Any]:
    """A ComputeDomain as a user writes it."""
    channel: dict[str, Any] = {"resourceClaimTemplate": {"name": template}}
    if mode is not None:
        channel["allocationMode"] = mode
    return {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"numNodes": num_nodes, "channel": channel},
    }
