"""``resource.nvidia.com/v1beta1``: opaque device configs and the ComputeDomain CRDs.

Wire compatible with NVIDIA's k8s-dra-driver-gpu, so users' manifests work unchanged:

* ``GpuConfig``, ``MigDeviceConfig``, ``VfioDeviceConfig`` (driver ``gpu.nvidia.com``) and
  ``ComputeDomainChannelConfig``, ``ComputeDomainDaemonConfig`` (driver
  ``compute-domain.nvidia.com``) travel inside ``opaque.parameters`` of claims and classes.
  They are strict: an unknown field is an error naming it. :func:`decode_opaque_config`
  turns parameters into one of them.
* ``ComputeDomain`` and ``ComputeDomainClique`` are custom resources; their CRD manifests are
  generated from these models by :mod:`dra_api_types.crds`. They parse leniently (a newer
  driver's fields stored on the server survive); API validation rejects unknown spec fields,
  as the apiserver's structural schema would prune them.

Every config has ``normalize()`` (returns a copy with the driver's defaults filled in) and
``validate()`` (raises :class:`~dra_api_types.errors.ValidationError` with the field path).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar, Final, Self

from pydantic import Field

from ._model import ApiModel, ApiObject, StrictApiModel, apply_validation
from .errors import ObjectRef, UnknownKindError, ValidationError
from .field_walk import StrictFieldError, model_unknown_fields
from .meta_v1 import ListMeta, ObjectMeta
from .quantity import Quantity

GROUP: Final = "resource.nvidia.com"
VERSION: Final = "v1beta1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

GPU_DRIVER: Final = "gpu.nvidia.com"
COMPUTE_DOMAIN_DRIVER: Final = "compute-domain.nvidia.com"

TIME_SLICING: Final = "TimeSlicing"
MPS: Final = "MPS"
SHARING_STRATEGIES: Final = (TIME_SLICING, MPS)
#: Time-slice intervals and the value ``nvidia-smi compute-policy --set-timeslice`` takes.
TIME_SLICE_INTERVALS: Final = {"Default": 0, "Short": 1, "Medium": 2, "Long": 3}
IOMMU_BACKEND_POLICIES: Final = ("LegacyOnly", "PreferIommuFD")
CHANNEL_ALLOCATION_MODES: Final = ("Single", "All")
READINESS: Final = ("Ready", "NotReady")

_UUID_KEY = re.compile(r"^(GPU|MIG)-[0-9a-fA-F-]+$")

__all__ = [
    "API_VERSION",
    "COMPUTE_DOMAIN_DRIVER",
    "GPU_DRIVER",
    "ComputeDomain",
    "ComputeDomainChannelConfig",
    "ComputeDomainChannelSpec",
    "ComputeDomainClique",
    "ComputeDomainCliqueList",
    "ComputeDomainDaemonConfig",
    "ComputeDomainDaemonInfo",
    "ComputeDomainList",
    "ComputeDomainNode",
    "ComputeDomainResourceClaimTemplate",
    "ComputeDomainSpec",
    "ComputeDomainStatus",
    "GpuConfig",
    "GpuSharing",
    "IommuConfig",
    "MigDeviceConfig",
    "MigDeviceSharing",
    "MpsConfig",
    "OpaqueConfig",
    "TimeSlicingConfig",
    "VfioDeviceConfig",
    "decode_opaque_config",
]


def _fail(path: str, message: str) -> ValidationError:
    return ValidationError(path, message)


def _check_enum(value: str | None, allowed: tuple[str, ...], path: str) -> None:
    if value not in allowed:
        shown = ", ".join(f'"{a}"' for a in allowed)
        raise _fail(path, f"Unsupported value: {value!r}: supported values: {shown}")


# ---------------------------------------------------------------------------- sharing
class TimeSlicingConfig(StrictApiModel):
    """CUDA time-slicing settings; ``interval`` is Default, Short, Medium or Long."""

    interval: str | None = None

    def validate_config(self, path: str = "") -> None:
        """Raise ValidationError if the interval is not one of the four names."""
        if self.interval is not None:
            _check_enum(self.interval, tuple(TIME_SLICE_INTERVALS), _join(path, "interval"))

    def interval_value(self) -> int:
        """The integer ``nvidia-smi compute-policy --set-timeslice`` takes (Default = 0)."""
        return TIME_SLICE_INTERVALS[self.interval or "Default"]


class MpsConfig(StrictApiModel):
    """Settings of the MPS control daemon started for a shared GPU."""

    default_active_thread_percentage: int | None = None
    default_pinned_device_memory_limit: Quantity | None = None
    default_per_device_pinned_memory_limit: dict[str, Quantity] | None = None
    # NVIDIA's v0.5.0: the daemon runs with -M, serving clients of any uid (Volta and newer).
    multi_user: bool | None = None

    def validate_config(self, path: str = "") -> None:
        """Percentage in 0..100, limits not negative, per-device keys a UUID or an index."""
        pct = self.default_active_thread_percentage
        if pct is not None and not 0 <= pct <= 100:
            raise _fail(
                _join(path, "defaultActiveThreadPercentage"),
                f"must be between 0 and 100 (inclusive), got {pct}",
            )
        limit = self.default_pinned_device_memory_limit
        if limit is not None and limit.sign() < 0:
            raise _fail(_join(path, "defaultPinnedDeviceMemoryLimit"), "must not be negative")
        for key, value in (self.default_per_device_pinned_memory_limit or {}).items():
            key_path = f'{_join(path, "defaultPerDevicePinnedMemoryLimit")}["{key}"]'
            if not (key.isdigit() or _UUID_KEY.match(key)):
                raise _fail(key_path, "key must be a device index or a GPU/MIG UUID")
            if value.sign() < 0:
                raise _fail(key_path, "must not be negative")

    def pinned_memory_limits(self, uuids: list[str]) -> dict[str, str]:
        """Per-device limits for the allocated devices, as the MPS daemon takes them.

        The default limit applies to every device, then per-device entries (keyed by UUID
        or by index into ``uuids``) override it. Values are whole megabytes (``"1024M"``).
        Raises ValidationError for an unknown device or a limit below 1 MiB.
        """
        limits: dict[str, str] = {}
        path = "defaultPerDevicePinnedMemoryLimit"
        if self.default_pinned_device_memory_limit is not None and uuids:
            mb = self.default_pinned_device_memory_limit.value_ceil() // (1024 * 1024)
            if mb <= 0:
                raise _fail("defaultPinnedDeviceMemoryLimit", "value set too low (< 1Mi)")
            limits = dict.fromkeys(uuids, f"{mb}M")
        for key, value in (self.default_per_device_pinned_memory_limit or {}).items():
            if key in uuids:
                uuid = key
            elif key.isdigit() and int(key) < len(uuids):
                uuid = uuids[int(key)]
            else:
                raise _fail(f'{path}["{key}"]', "invalid device: not an allocated UUID or index")
            mb = value.value_ceil() // (1024 * 1024)
            if mb <= 0:
                raise _fail(f'{path}["{key}"]', "value set too low (< 1Mi)")
            limits[uuid] = f"{mb}M"
        return limits


class GpuSharing(StrictApiModel):
    """How a full GPU is shared: TimeSlicing (with timeSlicingConfig) or MPS (mpsConfig)."""

    strategy: str = ""
    time_slicing_config: TimeSlicingConfig | None = None
    mps_config: MpsConfig | None = None

    def validate_config(self, path: str = "") -> None:
        """Strategy known, and only the settings of the chosen strategy present."""
        _check_enum(self.strategy, SHARING_STRATEGIES, _join(path, "strategy"))
        if self.strategy == TIME_SLICING:
            if self.mps_config is not None:
                raise _fail(
                    _join(path, "mpsConfig"), "cannot use mpsConfig with the 'TimeSlicing' strategy"
                )
            if self.time_slicing_config is not None:
                self.time_slicing_config.validate_config(_join(path, "timeSlicingConfig"))
        else:
            if self.time_slicing_config is not None:
                raise _fail(
                    _join(path, "timeSlicingConfig"),
                    "cannot use timeSlicingConfig with the 'MPS' strategy",
                )
            if self.mps_config is not None:
                self.mps_config.validate_config(_join(path, "mpsConfig"))

    def is_time_slicing(self) -> bool:
        """True for the TimeSlicing strategy."""
        return self.strategy == TIME_SLICING

    def is_mps(self) -> bool:
        """True for the MPS strategy."""
        return self.strategy == MPS


class MigDeviceSharing(StrictApiModel):
    """How a MIG device is shared: TimeSlicing (no settings) or MPS (mpsConfig)."""

    strategy: str = ""
    mps_config: MpsConfig | None = None

    def validate_config(self, path: str = "") -> None:
        """Strategy known; mpsConfig only with MPS."""
        _check_enum(self.strategy, SHARING_STRATEGIES, _join(path, "strategy"))
        if self.mps_config is not None:
            if self.strategy != MPS:
                raise _fail(
                    _join(path, "mpsConfig"), "cannot use mpsConfig with the 'TimeSlicing' strategy"
                )
            self.mps_config.validate_config(_join(path, "mpsConfig"))

    def is_time_slicing(self) -> bool:
        """True for the TimeSlicing strategy."""
        return self.strategy == TIME_SLICING

    def is_mps(self) -> bool:
        """True for the MPS strategy."""
        return self.strategy == MPS


class IommuConfig(StrictApiModel):
    """IOMMU backend of a passthrough GPU (Go type ``IOMMUConfig``)."""

    backend_policy: str = ""
    enable_api_device: bool | None = Field(default=None, alias="enableAPIDevice")

    def validate_config(self, path: str = "") -> None:
        """backendPolicy is LegacyOnly or PreferIommuFD."""
        _check_enum(self.backend_policy, IOMMU_BACKEND_POLICIES, _join(path, "backendPolicy"))


# ---------------------------------------------------------------------------- opaque configs
class _OpaqueConfig(StrictApiModel):
    """Common part of the opaque configs: apiVersion and kind are required and checked."""

    KIND: ClassVar[str] = ""
    DRIVER: ClassVar[str] = GPU_DRIVER

    api_version: str = API_VERSION
    kind: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The config as it appears in ``opaque.parameters``."""
        body = super().to_dict()
        body.pop("apiVersion", None)
        body.pop("kind", None)
        return {"apiVersion": self.api_version, "kind": self.kind or self.KIND, **body}

    def validate(self) -> None:  # type: ignore[override]
        """Raise :class:`ValidationError` (with the field path) if the config is invalid."""
        if self.api_version != API_VERSION:
            raise _fail("apiVersion", f"must be {API_VERSION!r}, got {self.api_version!r}")
        if (self.kind or self.KIND) != self.KIND:
            raise _fail("kind", f"must be {self.KIND!r}, got {self.kind!r}")
        self._validate_body()

    def _validate_body(self) -> None:
        return None

    def normalize(self) -> Self:
        """A copy with the defaults NVIDIA's driver fills in before using the config."""
        normalized = self.model_copy(deep=True)
        normalized.kind = self.KIND
        normalized._fill_defaults()
        return normalized

    def _fill_defaults(self) -> None:
        return None


class GpuConfig(_OpaqueConfig):
    """Configuration of full GPUs (``sharing``); without ``sharing`` a GPU is not shared."""

    KIND: ClassVar[str] = "GpuConfig"

    kind: str = "GpuConfig"
    sharing: GpuSharing | None = None

    def _validate_body(self) -> None:
        if self.sharing is not None:
            self.sharing.validate_config("sharing")

    def _fill_defaults(self) -> None:
        # NVIDIA's Normalize (main): no sharing stays no sharing.
        if self.sharing is None:
            return
        if self.sharing.strategy == TIME_SLICING and self.sharing.time_slicing_config is None:
            self.sharing.time_slicing_config = TimeSlicingConfig(interval="Default")
        elif (
            self.sharing.time_slicing_config is not None
            and self.sharing.time_slicing_config.interval is None
        ):
            self.sharing.time_slicing_config.interval = "Default"
        if self.sharing.strategy == MPS and self.sharing.mps_config is None:
            self.sharing.mps_config = MpsConfig()


class MigDeviceConfig(_OpaqueConfig):
    """Configuration of MIG devices (``sharing``); without ``sharing`` a device is not shared."""

    KIND: ClassVar[str] = "MigDeviceConfig"

    kind: str = "MigDeviceConfig"
    sharing: MigDeviceSharing | None = None

    def _validate_body(self) -> None:
        if self.sharing is not None:
            self.sharing.validate_config("sharing")

    def _fill_defaults(self) -> None:
        if self.sharing is None:
            return
        if self.sharing.strategy == MPS and self.sharing.mps_config is None:
            self.sharing.mps_config = MpsConfig()


class VfioDeviceConfig(_OpaqueConfig):
    """Configuration of GPUs passed through with vfio-pci (``iommu``)."""

    KIND: ClassVar[str] = "VfioDeviceConfig"

    kind: str = "VfioDeviceConfig"
    iommu: IommuConfig | None = None

    def _validate_body(self) -> None:
        if self.iommu is not None:
            self.iommu.validate_config("iommu")

    def _fill_defaults(self) -> None:
        if self.iommu is None:
            self.iommu = IommuConfig(backend_policy="LegacyOnly")
        if not self.iommu.backend_policy:
            self.iommu.backend_policy = "LegacyOnly"
        if self.iommu.enable_api_device is None:
            # NVIDIA's Normalize: the API device node only when asked for.
            self.iommu.enable_api_device = False


class ComputeDomainChannelConfig(_OpaqueConfig):
    """Config the ComputeDomain controller puts on channel claims (IMEX channels)."""

    KIND: ClassVar[str] = "ComputeDomainChannelConfig"
    DRIVER: ClassVar[str] = COMPUTE_DOMAIN_DRIVER

    kind: str = "ComputeDomainChannelConfig"
    domain_id: str = Field(default="", alias="domainID")
    allocation_mode: str | None = None

    def _validate_body(self) -> None:
        if not self.domain_id:
            raise _fail("domainID", "required value")
        if self.allocation_mode is not None:
            _check_enum(self.allocation_mode, CHANNEL_ALLOCATION_MODES, "allocationMode")

    def _fill_defaults(self) -> None:
        if self.allocation_mode is None:
            self.allocation_mode = "Single"


class ComputeDomainDaemonConfig(_OpaqueConfig):
    """Config the ComputeDomain controller puts on IMEX daemon claims."""

    KIND: ClassVar[str] = "ComputeDomainDaemonConfig"
    DRIVER: ClassVar[str] = COMPUTE_DOMAIN_DRIVER

    kind: str = "ComputeDomainDaemonConfig"
    domain_id: str = Field(default="", alias="domainID")

    def _validate_body(self) -> None:
        if not self.domain_id:
            raise _fail("domainID", "required value")


OpaqueConfig = (
    GpuConfig
    | MigDeviceConfig
    | VfioDeviceConfig
    | ComputeDomainChannelConfig
    | ComputeDomainDaemonConfig
)

OPAQUE_KINDS: Final[dict[str, type[_OpaqueConfig]]] = {
    cls.KIND: cls
    for cls in (
        GpuConfig,
        MigDeviceConfig,
        VfioDeviceConfig,
        ComputeDomainChannelConfig,
        ComputeDomainDaemonConfig,
    )
}


def decode_opaque_config(parameters: Mapping[str, Any], *, validate: bool = True) -> OpaqueConfig:
    """Decode ``opaque.parameters`` into the typed config its apiVersion/kind names.

    Strict and case-sensitive, as NVIDIA's driver decodes them (apimachinery's strict JSON
    serializer): an unknown apiVersion, kind or field raises
    :class:`~dra_api_types.errors.ValidationError` naming it, the config's kind and the
    field's full path; a key that differs from a field's JSON name only in case
    (``mps_config``, ``Sharing``) is unknown too. With ``validate=True`` (the default) the
    config's rules are checked as NVIDIA's driver checks them: on the config with its
    defaults filled in (``iommu: {}`` passes, its backend policy defaulted). The returned
    config is the one written, not normalized.
    """
    if not isinstance(parameters, Mapping):
        raise _fail("", f"opaque parameters must be an object, got {type(parameters).__name__}")
    api_version = parameters.get("apiVersion")
    kind = parameters.get("kind")
    if api_version != API_VERSION:
        raise UnknownKindError(
            "apiVersion", f"unsupported apiVersion {api_version!r} (expected {API_VERSION!r})"
        )
    cls = OPAQUE_KINDS.get(str(kind))
    if cls is None:
        known = ", ".join(sorted(OPAQUE_KINDS))
        raise UnknownKindError("kind", f"unknown kind {kind!r} in {API_VERSION} (known: {known})")
    ref = ObjectRef(kind=cls.KIND, api_version=API_VERSION)
    unknown = model_unknown_fields(parameters, cls)
    if unknown:
        raise _unknown_field(unknown[0], ref)
    config = cls.from_dict(parameters)
    if validate:
        try:
            config.normalize().validate()
        except ValidationError as exc:
            raise exc.with_object(ref) from None
    assert isinstance(
        config,
        GpuConfig
        | MigDeviceConfig
        | VfioDeviceConfig
        | ComputeDomainChannelConfig
        | ComputeDomainDaemonConfig,
    )
    return config


def _unknown_field(error: StrictFieldError, ref: ObjectRef) -> ValidationError:
    """The error for a field NVIDIA's case-sensitive strict decoder does not know, worded as
    the package words unknown fields (the path names where it is)."""
    parent, _, name = error.path.rpartition(".")
    message = f"unknown field {name!r}"
    if error.meant is not None:
        meant = error.meant.removeprefix(f"{parent}.") if parent else error.meant
        message += f" (did you mean {meant!r}?)"
    return ValidationError(error.path, message, object_ref=ref)


# ---------------------------------------------------------------------------- CRDs
class ComputeDomainResourceClaimTemplate(ApiModel):
    """The ResourceClaimTemplate the controller creates for the domain's channels."""

    name: str = ""


class ComputeDomainChannelSpec(ApiModel):
    """The channel (IMEX) part of a ComputeDomain."""

    resource_claim_template: ComputeDomainResourceClaimTemplate = Field(
        default_factory=ComputeDomainResourceClaimTemplate
    )
    allocation_mode: str | None = Field(
        default=None,
        json_schema_extra={"enum": list(CHANNEL_ALLOCATION_MODES), "default": "Single"},
    )


class ComputeDomainSpec(ApiModel):
    """Spec of a ComputeDomain (immutable once created)."""

    num_nodes: int = Field(default=0, json_schema_extra={"minimum": 0})
    channel: ComputeDomainChannelSpec | None = None


class ComputeDomainNode(ApiModel):
    """One node's IMEX daemon in a ComputeDomain's status."""

    name: str = ""
    ip_address: str = ""
    clique_id: str = Field(default="", alias="cliqueID")
    index: int = 0
    status: str | None = Field(
        default=None, json_schema_extra={"enum": list(READINESS), "default": "NotReady"}
    )


class ComputeDomainStatus(ApiModel):
    """Global readiness of a ComputeDomain and its nodes."""

    status: str = Field(
        default="", json_schema_extra={"enum": list(READINESS), "default": "NotReady"}
    )
    nodes: list[ComputeDomainNode] | None = None


class ComputeDomain(ApiObject):
    """A set of nodes joined into one IMEX domain for a multi-node NVLink workload."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "ComputeDomain"
    PLURAL: ClassVar[str] = "computedomains"
    NAMESPACED: ClassVar[bool] = True

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ComputeDomainSpec = Field(default_factory=ComputeDomainSpec)
    status: ComputeDomainStatus = Field(default_factory=ComputeDomainStatus)

    def normalize(self) -> Self:
        """A copy with the CRD defaults applied (channel.allocationMode Single)."""
        normalized = self.model_copy(deep=True)
        if normalized.spec.channel is not None and normalized.spec.channel.allocation_mode is None:
            normalized.spec.channel.allocation_mode = "Single"
        return normalized

    def validate(self) -> None:  # type: ignore[override]
        """Raise ValidationError (field path, object) if the ComputeDomain is invalid."""
        apply_validation(self)


class ComputeDomainList(ApiObject):
    """A list of ComputeDomains."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "ComputeDomainList"
    PLURAL: ClassVar[str] = "computedomains"
    NAMESPACED: ClassVar[bool] = True

    api_version: str | None = None
    kind: str | None = None
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[ComputeDomain] = Field(default_factory=list)


class ComputeDomainDaemonInfo(ApiModel):
    """One IMEX daemon of a clique."""

    node_name: str = ""
    ip_address: str = ""
    clique_id: str = Field(default="", alias="cliqueID")
    index: int = 0
    status: str | None = Field(
        default=None, json_schema_extra={"enum": list(READINESS), "default": "NotReady"}
    )


class ComputeDomainClique(ApiObject):
    """The daemons of one NVLink clique of a ComputeDomain (``<domainUID>.<cliqueID>``)."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "ComputeDomainClique"
    PLURAL: ClassVar[str] = "computedomaincliques"
    NAMESPACED: ClassVar[bool] = True

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    daemons: list[ComputeDomainDaemonInfo] | None = None

    def normalize(self) -> Self:
        """A copy with daemon status defaulted to NotReady."""
        normalized = self.model_copy(deep=True)
        for daemon in normalized.daemons or []:
            if daemon.status is None:
                daemon.status = "NotReady"
        return normalized

    def validate(self) -> None:  # type: ignore[override]
        """Raise ValidationError (field path, object) if the clique is invalid."""
        apply_validation(self)


class ComputeDomainCliqueList(ApiObject):
    """A list of ComputeDomainCliques."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "ComputeDomainCliqueList"
    PLURAL: ClassVar[str] = "computedomaincliques"
    NAMESPACED: ClassVar[bool] = True

    api_version: str | None = None
    kind: str | None = None
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[ComputeDomainClique] = Field(default_factory=list)


KINDS: dict[str, type[ApiObject]] = {
    cls.KIND: cls
    for cls in (ComputeDomain, ComputeDomainList, ComputeDomainClique, ComputeDomainCliqueList)
}


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name
