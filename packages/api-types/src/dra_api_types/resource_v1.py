"""Models of every kind and nested type of ``resource.k8s.io/v1`` (Kubernetes 1.34-1.37).

Class names are the Go type names of ``k8s.io/api/resource/v1``; attributes are snake_case
with the API's camelCase names as aliases (``share_id`` <-> ``shareID``; Python keywords get a
trailing underscore: ``DeviceAttribute.int_`` <-> ``int``). Every model is lenient (unknown
fields are kept); the kube-apiserver's rules live in :mod:`dra_api_types.validation`.

The schema is that of the Kubernetes 1.37.2 API server (checked against its OpenAPI
document); 1.34 and 1.35 objects are subsets. 1.37 added ``DeviceTaintRule`` to v1 (GA),
list attributes ``DeviceAttribute.ints/bools/strings/versions`` (KEP-5491),
``Device.nodeAllocatableResources`` (KEP-5517; 1.36's alpha ``nodeAllocatableResourceMappings``
was renamed), derived attributes on requests, counter-consumption compatibility groups,
``ResourceSliceSpec.partitionTypeAttribute`` and ``skipNodeOperations``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from ._model import ApiModel, ApiObject
from .meta_v1 import (
    Condition,
    ListMeta,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ObjectMeta,
    OwnerReference,
)
from .quantity import Quantity
from .semver import Version

GROUP = "resource.k8s.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"

__all__ = [
    "API_VERSION",
    "AllocatedDeviceStatus",
    "AllocationResult",
    "CELDeviceSelector",
    "CapacityRequestPolicy",
    "CapacityRequestPolicyRange",
    "CapacityRequirements",
    "Condition",
    "Counter",
    "CounterSet",
    "Device",
    "DeviceAllocationConfiguration",
    "DeviceAllocationResult",
    "DeviceAttribute",
    "DeviceCapacity",
    "DeviceClaim",
    "DeviceClaimConfiguration",
    "DeviceClass",
    "DeviceClassConfiguration",
    "DeviceClassList",
    "DeviceClassSpec",
    "DeviceConfiguration",
    "DeviceConstraint",
    "DeviceCounterConsumption",
    "DeviceDerivedAttribute",
    "DeviceRequest",
    "DeviceRequestAllocationResult",
    "DeviceSelector",
    "DeviceSubRequest",
    "DeviceTaint",
    "DeviceTaintRule",
    "DeviceTaintRuleList",
    "DeviceTaintRuleSpec",
    "DeviceTaintRuleStatus",
    "DeviceTaintSelector",
    "DeviceToleration",
    "ExactDeviceRequest",
    "ListMeta",
    "NetworkDeviceData",
    "NodeAllocatableMapping",
    "NodeAllocatableOverhead",
    "NodeAllocatableResource",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "ObjectMeta",
    "OpaqueDeviceConfiguration",
    "OwnerReference",
    "ResourceClaim",
    "ResourceClaimConsumerReference",
    "ResourceClaimList",
    "ResourceClaimSpec",
    "ResourceClaimStatus",
    "ResourceClaimTemplate",
    "ResourceClaimTemplateList",
    "ResourceClaimTemplateSpec",
    "ResourcePool",
    "ResourceSlice",
    "ResourceSliceList",
    "ResourceSliceSpec",
]


# ---------------------------------------------------------------------------- selectors/config
class CELDeviceSelector(ApiModel):
    """A CEL expression over ``device`` that must evaluate to true."""

    expression: str = ""


class DeviceSelector(ApiModel):
    """One selector; exactly one member must be set (today only ``cel``)."""

    cel: CELDeviceSelector | None = None


class OpaqueDeviceConfiguration(ApiModel):
    """Driver-specific parameters (any JSON object with apiVersion/kind for our driver)."""

    driver: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)


class DeviceConfiguration(ApiModel):
    """Embedded by the *Configuration types: exactly one source of configuration."""

    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClassConfiguration(DeviceConfiguration):
    """Configuration a DeviceClass applies to every device it selects."""


class DeviceClaimConfiguration(DeviceConfiguration):
    """Configuration for some (``requests``) or all requests of a claim."""

    requests: list[str] | None = None


class DeviceAllocationConfiguration(DeviceConfiguration):
    """Configuration copied into the allocation result, from a class or from the claim."""

    source: str = ""
    requests: list[str] | None = None


# ---------------------------------------------------------------------------- DeviceClass
class DeviceClassSpec(ApiModel):
    """Selectors and configuration shared by every claim that names the class."""

    selectors: list[DeviceSelector] | None = None
    config: list[DeviceClassConfiguration] | None = None
    extended_resource_name: str | None = None


class DeviceClass(ApiObject):
    """A class of devices (cluster scoped), e.g. ``gpu.nvidia.com``."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "DeviceClass"
    PLURAL: ClassVar[str] = "deviceclasses"
    NAMESPACED: ClassVar[bool] = False

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DeviceClassSpec = Field(default_factory=DeviceClassSpec)


class DeviceClassList(ApiObject):
    """A list of DeviceClasses."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "DeviceClassList"
    PLURAL: ClassVar[str] = "deviceclasses"
    NAMESPACED: ClassVar[bool] = False

    api_version: str | None = None
    kind: str | None = None
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[DeviceClass] = Field(default_factory=list)


# ---------------------------------------------------------------------------- ResourceSlice
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


# ---------------------------------------------------------------------------- ResourceClaim
class DeviceToleration(ApiModel):
    """Tolerates a device taint (``operator`` defaults to ``Equal``)."""

    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


class CapacityRequirements(ApiModel):
    """How much of a shareable device's capacity a request takes."""

    requests: dict[str, Quantity] | None = None


class DeviceDerivedAttribute(ApiModel):
    """A virtual attribute computed by CEL per candidate device (1.37 alpha), for constraints."""

    name: str
    expression: str


class ExactDeviceRequest(ApiModel):
    """Devices of one class, all matching the selectors."""

    device_class_name: str = ""
    selectors: list[DeviceSelector] | None = None
    allocation_mode: str | None = None
    count: int | None = None
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] | None = None
    capacity: CapacityRequirements | None = None
    derived_attributes: list[DeviceDerivedAttribute] | None = None


class DeviceSubRequest(ApiModel):
    """One alternative of a ``firstAvailable`` request."""

    name: str = ""
    device_class_name: str = ""
    selectors: list[DeviceSelector] | None = None
    allocation_mode: str | None = None
    count: int | None = None
    tolerations: list[DeviceToleration] | None = None
    capacity: CapacityRequirements | None = None
    derived_attributes: list[DeviceDerivedAttribute] | None = None


class DeviceRequest(ApiModel):
    """A named request: exactly one of ``exactly`` and ``first_available``."""

    name: str = ""
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] | None = None


class DeviceConstraint(ApiModel):
    """A constraint across the devices of some (or all) requests."""

    requests: list[str] | None = None
    match_attribute: str | None = None
    distinct_attribute: str | None = None


class DeviceClaim(ApiModel):
    """What a claim asks for: requests, constraints and configuration."""

    requests: list[DeviceRequest] | None = None
    constraints: list[DeviceConstraint] | None = None
    config: list[DeviceClaimConfiguration] | None = None


class ResourceClaimSpec(ApiModel):
    """The spec of a ResourceClaim (immutable once created)."""

    devices: DeviceClaim = Field(default_factory=DeviceClaim)


class DeviceRequestAllocationResult(ApiModel):
    """One allocated device, for one request (or ``request/subrequest``)."""

    request: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] | None = None
    binding_conditions: list[str] | None = None
    binding_failure_conditions: list[str] | None = None
    share_id: str | None = Field(default=None, alias="shareID")
    consumed_capacity: dict[str, Quantity] | None = None
    skip_node_operations: list[str] | None = None


class DeviceAllocationResult(ApiModel):
    """The allocated devices and the configuration that applies to them."""

    results: list[DeviceRequestAllocationResult] | None = None
    config: list[DeviceAllocationConfiguration] | None = None


class AllocationResult(ApiModel):
    """Where and what the scheduler allocated for a claim."""

    devices: DeviceAllocationResult = Field(default_factory=DeviceAllocationResult)
    node_selector: NodeSelector | None = None
    allocation_timestamp: str | None = None


class ResourceClaimConsumerReference(ApiModel):
    """A pod (or other consumer) the claim is reserved for."""

    api_group: str | None = None
    resource: str = ""
    name: str = ""
    uid: str = ""


class NetworkDeviceData(ApiModel):
    """Network details a driver reports for an allocated device."""

    interface_name: str | None = None
    ips: list[str] | None = None
    hardware_address: str | None = None


class AllocatedDeviceStatus(ApiModel):
    """Status a driver reports for one allocated device."""

    driver: str = ""
    pool: str = ""
    device: str = ""
    share_id: str | None = Field(default=None, alias="shareID")
    conditions: list[Condition] | None = None
    data: dict[str, Any] | None = None
    network_data: NetworkDeviceData | None = None


class ResourceClaimStatus(ApiModel):
    """Allocation, reservations and device status of a claim."""

    allocation: AllocationResult | None = None
    reserved_for: list[ResourceClaimConsumerReference] | None = None
    devices: list[AllocatedDeviceStatus] | None = None


class ResourceClaim(ApiObject):
    """A request for devices (namespaced)."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "ResourceClaim"
    PLURAL: ClassVar[str] = "resourceclaims"
    NAMESPACED: ClassVar[bool] = True

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus = Field(default_factory=ResourceClaimStatus)


class ResourceClaimList(ApiObject):
    """A list of ResourceClaims."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "ResourceClaimList"
    PLURAL: ClassVar[str] = "resourceclaims"
    NAMESPACED: ClassVar[bool] = True

    api_version: str | None = None
    kind: str | None = None
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[ResourceClaim] = Field(default_factory=list)


class ResourceClaimTemplateSpec(ApiModel):
    """Metadata and spec of the claims created from a template."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(ApiObject):
    """A template from which a claim is created per pod (namespaced)."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "ResourceClaimTemplate"
    PLURAL: ClassVar[str] = "resourceclaimtemplates"
    NAMESPACED: ClassVar[bool] = True

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceClaimTemplateSpec = Field(default_factory=ResourceClaimTemplateSpec)


class ResourceClaimTemplateList(ApiObject):
    """A list of ResourceClaimTemplates."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "ResourceClaimTemplateList"
    PLURAL: ClassVar[str] = "resourceclaimtemplates"
    NAMESPACED: ClassVar[bool] = True

    api_version: str | None = None
    kind: str | None = None
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[ResourceClaimTemplate] = Field(default_factory=list)


# ---------------------------------------------------------------------------- DeviceTaintRule


class DeviceTaintSelector(ApiModel):
    """Which devices a DeviceTaintRule taints: each field that is set must match."""

    device: str | None = None
    driver: str | None = None
    pool: str | None = None


class DeviceTaintRuleSpec(ApiModel):
    """The devices to taint and the taint."""

    device_selector: DeviceTaintSelector | None = None
    taint: DeviceTaint


class DeviceTaintRuleStatus(ApiModel):
    """Eviction progress of a DeviceTaintRule (condition ``EvictionInProgress``)."""

    conditions: list[Condition] | None = None


class DeviceTaintRule(ApiObject):
    """Taints devices without touching their slices (GA in 1.37; cluster scoped)."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "DeviceTaintRule"
    PLURAL: ClassVar[str] = "devicetaintrules"
    NAMESPACED: ClassVar[bool] = False

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DeviceTaintRuleSpec
    status: DeviceTaintRuleStatus | None = None


class DeviceTaintRuleList(ApiObject):
    """A list of DeviceTaintRules."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "DeviceTaintRuleList"
    PLURAL: ClassVar[str] = "devicetaintrules"
    NAMESPACED: ClassVar[bool] = False

    api_version: str | None = None
    kind: str | None = None
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[DeviceTaintRule]


KINDS: dict[str, type[ApiObject]] = {
    cls.KIND: cls
    for cls in (
        DeviceClass,
        DeviceClassList,
        ResourceSlice,
        ResourceSliceList,
        ResourceClaim,
        ResourceClaimList,
        ResourceClaimTemplate,
        ResourceClaimTemplateList,
        DeviceTaintRule,
        DeviceTaintRuleList,
    )
}
