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
from ._resource_v1_devices import (
    API_VERSION,
    CapacityRequestPolicy,
    CapacityRequestPolicyRange,
    Counter,
    CounterSet,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceCounterConsumption,
    DeviceTaint,
    NodeAllocatableMapping,
    NodeAllocatableOverhead,
    NodeAllocatableResource,
    ResourcePool,
    ResourceSlice,
    ResourceSliceList,
    ResourceSliceSpec,
)
from ._resource_v1_devices import (
    GROUP as GROUP,
)
from ._resource_v1_devices import (
    VERSION as VERSION,
)
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
