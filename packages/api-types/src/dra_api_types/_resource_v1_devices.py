"""The device side of ``resource.k8s.io/v1``: ResourceSlice and what a published device carries.

Attributes, capacities and their request policies, counters, taints and node-allocatable
mappings. :mod:`dra_api_types.resource_v1` re-exports every class; import them from there.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from ._model import ApiModel, ApiObject
from .meta_v1 import ListMeta, NodeSelector, ObjectMeta
from .quantity import Quantity
from .semver import Version

GROUP = "resource.k8s.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"

__all__ = [
    "API_VERSION",
    "GROUP",
    "VERSION",
    "CapacityRequestPolicy",
    "CapacityRequestPolicyRange",
    "Counter",
    "CounterSet",
    "Device",
    "DeviceAttribute",
    "DeviceCapacity",
    "DeviceCounterConsumption",
    "DeviceTaint",
    "NodeAllocatableMapping",
    "NodeAllocatableOverhead",
    "NodeAllocatableResource",
    "ResourcePool",
    "ResourceSlice",
    "ResourceSliceList",
    "ResourceSliceSpec",
]


class ResourcePool(ApiModel):
    """The pool a slice belongs to; a pool may span ``resource_slice_count`` slices."""

    name: str = ""
    generation: int = 0
    resource_slice_count: int = 0


class DeviceAttribute(ApiModel):
    """One attribute value: exactly one of int, bool, string, version (or a 1.36 list)."""

    int_: int | None = Field(default=None, alias="int")
    bool_: bool | None = Field(default=None, alias="bool")
    string: str | None = None
    version: str | None = None
    # Kubernetes 1.36 alpha (KEP-5491): list-valued attributes.
    ints: list[int] | None = None
    bools: list[bool] | None = None
    strings: list[str] | None = None
    versions: list[str] | None = None

    def as_version(self) -> Version | None:
        """The ``version`` member parsed as a semantic version (None if not a version)."""
        return None if self.version is None else Version.parse(self.version)

    @property
    def value(self) -> int | bool | str | list[int] | list[bool] | list[str] | None:
        """Whichever member is set (None if none is)."""
        for candidate in (
            self.int_,
            self.bool_,
            self.string,
            self.version,
            self.ints,
            self.bools,
            self.strings,
            self.versions,
        ):
            if candidate is not None:
                return candidate
        return None


class CapacityRequestPolicyRange(ApiModel):
    """Requests must lie in [min, max] and be min + k*step."""

    min: Quantity = Field(default_factory=Quantity)
    max: Quantity | None = None
    step: Quantity | None = None


class CapacityRequestPolicy(ApiModel):
    """How a shareable device's capacity may be requested."""

    default: Quantity | None = None
    valid_values: list[Quantity] | None = None
    valid_range: CapacityRequestPolicyRange | None = None


class DeviceCapacity(ApiModel):
    """An amount of something a device has (``memory: 80Gi``)."""

    value: Quantity = Field(default_factory=Quantity)
    request_policy: CapacityRequestPolicy | None = None


class Counter(ApiModel):
    """An amount of a shared counter."""

    value: Quantity = Field(default_factory=Quantity)


class CounterSet(ApiModel):
    """Named counters devices draw from (e.g. the memory slices of a MIG-capable GPU)."""

    name: str = ""
    counters: dict[str, Counter] = Field(default_factory=dict)


class DeviceCounterConsumption(ApiModel):
    """What a device draws from one counter set when allocated."""

    counter_set: str = ""
    counters: dict[str, Counter] = Field(default_factory=dict)
    # 1.37 alpha: devices drawing on one counter set co-allocate only if they share a group.
    compatibility_groups: list[str] | None = None


class DeviceTaint(ApiModel):
    """A taint on a device; only claims tolerating it get the device."""

    key: str = ""
    value: str | None = None
    effect: str = ""
    time_added: str | None = None


class NodeAllocatableMapping(ApiModel):
    """How an allocation translates into a node-allocatable quantity (KEP-5517).

    Either per allocated device (``deviceMultiplier``) or per consumed capacity
    (``capacityKey`` and ``capacityMultiplier``).
    """

    capacity_key: str | None = None
    capacity_multiplier: Quantity | None = None
    device_multiplier: Quantity | None = None


class NodeAllocatableOverhead(ApiModel):
    """Extra node-allocatable resources an allocation costs, per pod and/or per container."""

    per_container: Quantity | None = None
    per_pod: Quantity | None = None


class NodeAllocatableResource(ApiModel):
    """The node resource (``cpu``, ``memory``, ...) a device's allocation accounts for."""

    mapping: NodeAllocatableMapping | None = None
    overhead: NodeAllocatableOverhead | None = None


class Device(ApiModel):
    """One device in a ResourceSlice."""

    name: str = ""
    attributes: dict[str, DeviceAttribute] | None = None
    capacity: dict[str, DeviceCapacity] | None = None
    consumes_counters: list[DeviceCounterConsumption] | None = None
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    taints: list[DeviceTaint] | None = None
    binds_to_node: bool | None = None
    binding_conditions: list[str] | None = None
    binding_failure_conditions: list[str] | None = None
    allow_multiple_allocations: bool | None = None
    # Kubernetes 1.37 alpha (KEP-5517).
    node_allocatable_resources: dict[str, NodeAllocatableResource] | None = None


class ResourceSliceSpec(ApiModel):
    """The devices of one pool (or part of it) published by one driver."""

    driver: str = ""
    pool: ResourcePool = Field(default_factory=ResourcePool)
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    devices: list[Device] | None = None
    shared_counters: list[CounterSet] | None = None
    # 1.37: the string attribute naming each partitionable device's partition type.
    partition_type_attribute: str | None = None
    # 1.37: node-local gRPC operations (e.g. prepare) the kubelet may skip for these devices.
    skip_node_operations: list[str] | None = None


class ResourceSlice(ApiObject):
    """Devices a driver publishes (cluster scoped)."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "ResourceSlice"
    PLURAL: ClassVar[str] = "resourceslices"
    NAMESPACED: ClassVar[bool] = False

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceSliceSpec = Field(default_factory=ResourceSliceSpec)


class ResourceSliceList(ApiObject):
    """A list of ResourceSlices."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "ResourceSliceList"
    PLURAL: ClassVar[str] = "resourceslices"
    NAMESPACED: ClassVar[bool] = False

    api_version: str | None = None
    kind: str | None = None
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[ResourceSlice] = Field(default_factory=list)
