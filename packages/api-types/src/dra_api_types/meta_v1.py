"""The parts of ``meta/v1`` and ``core/v1`` that resource.k8s.io objects embed."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ._model import ApiModel

__all__ = [
    "Condition",
    "ListMeta",
    "ManagedFieldsEntry",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "ObjectMeta",
    "OwnerReference",
    "ShardInfo",
]


class OwnerReference(ApiModel):
    """An object this one depends on; the garbage collector deletes it with its owner."""

    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ManagedFieldsEntry(ApiModel):
    """Server-side-apply bookkeeping; kept as read so updates do not disturb it."""

    manager: str | None = None
    operation: str | None = None
    api_version: str | None = None
    time: str | None = None
    fields_type: str | None = None
    fields_v1: dict[str, Any] | None = None
    subresource: str | None = None


class ObjectMeta(ApiModel):
    """Standard object metadata. Timestamps stay RFC 3339 strings, exactly as read."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    self_link: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None
    managed_fields: list[ManagedFieldsEntry] | None = None


class ShardInfo(ApiModel):
    """The shard selector a sharded list response was filtered by (1.37 alpha)."""

    selector: str = ""


class ListMeta(ApiModel):
    """Metadata of a list response."""

    self_link: str | None = None
    resource_version: str | None = None
    continue_: str | None = Field(default=None, alias="continue")
    remaining_item_count: int | None = None
    shard_info: ShardInfo | None = None


class Condition(ApiModel):
    """A ``metav1.Condition`` as used in AllocatedDeviceStatus."""

    type: str = ""
    status: str = ""
    observed_generation: int | None = None
    last_transition_time: str = ""
    reason: str = ""
    message: str = ""


class NodeSelectorRequirement(ApiModel):
    """``key operator values``: In, NotIn, Exists, DoesNotExist, Gt, Lt."""

    key: str = ""
    operator: str = ""
    values: list[str] | None = None


class NodeSelectorTerm(ApiModel):
    """A conjunction of requirements on node labels and fields."""

    match_expressions: list[NodeSelectorRequirement] | None = None
    match_fields: list[NodeSelectorRequirement] | None = None


class NodeSelector(ApiModel):
    """A disjunction of node selector terms."""

    node_selector_terms: list[NodeSelectorTerm] = Field(default_factory=list)
