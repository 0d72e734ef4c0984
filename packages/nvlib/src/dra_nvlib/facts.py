"""Immutable facts a backend reports about a node's GPUs.

Enum values are NVML's own numeric codes, so the NVML backend converts without a lookup table
and the fake stores the same numbers. Memory is always in bytes; PCI addresses are in the
extended BDF form sysfs uses (``0000:07:00.0``, lower case).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ComputeMode(enum.IntEnum):
    """NVML compute mode (``nvmlComputeMode_t``)."""

    DEFAULT = 0
    EXCLUSIVE_THREAD = 1  # removed from drivers; kept so a reported value always maps
    PROHIBITED = 2
    EXCLUSIVE_PROCESS = 3


class TimeSliceLevel(enum.IntEnum):
    """Time-slice length as ``nvidia-smi compute-policy --set-timeslice`` takes it."""

    DEFAULT = 0
    SHORT = 1
    MEDIUM = 2
    LONG = 3


class Brand(enum.IntEnum):
    """NVML brand (``nvmlBrandType_t``), for the brands our profiles use and a catch-all."""

    UNKNOWN = 0
    QUADRO = 1
    TESLA = 2
    NVS = 3
    GRID = 4
    GEFORCE = 5
    TITAN = 6
    NVIDIA_VAPPS = 7
    NVIDIA_VPC = 8
    NVIDIA_VCS = 9
    NVIDIA_VWS = 10
    NVIDIA_CLOUD_GAMING = 11
    QUADRO_RTX = 12
    NVIDIA_RTX = 13
    NVIDIA = 14
    GEFORCE_RTX = 15
    TITAN_RTX = 16

    @classmethod
    def from_nvml(cls, value: int) -> Brand:
        """Map an NVML brand code; codes newer than this table become ``UNKNOWN``."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class Architecture(enum.IntEnum):
    """NVML device architecture (``nvmlDeviceArchitecture_t``)."""

    KEPLER = 2
    MAXWELL = 3
    PASCAL = 4
    VOLTA = 5
    TURING = 6
    AMPERE = 7
    ADA = 8
    HOPPER = 9
    BLACKWELL = 10
    RUBIN = 13
    UNKNOWN = 0xFFFFFFFF

    @classmethod
    def from_nvml(cls, value: int) -> Architecture:
        """Map an NVML architecture code; unknown codes become ``UNKNOWN``."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN

    @property
    def display_name(self) -> str:
        """Name as NVIDIA's tools print it ("Ampere", "Ada Lovelace", ...)."""
        return _ARCH_NAMES[self]


_ARCH_NAMES = {
    Architecture.KEPLER: "Kepler",
    Architecture.MAXWELL: "Maxwell",
    Architecture.PASCAL: "Pascal",
    Architecture.VOLTA: "Volta",
    Architecture.TURING: "Turing",
    Architecture.AMPERE: "Ampere",
    Architecture.ADA: "Ada Lovelace",
    Architecture.HOPPER: "Hopper",
    Architecture.BLACKWELL: "Blackwell",
    Architecture.RUBIN: "Rubin",
    Architecture.UNKNOWN: "Unknown",
}


class AddressingMode(enum.IntEnum):
    """NVML device addressing mode (``nvmlDeviceAddressingModeType_t``)."""

    NONE = 0
    HMM = 1
    ATS = 2


class FabricState(enum.IntEnum):
    """NVLink fabric registration state (``nvmlGpuFabricState_t``)."""

    NOT_SUPPORTED = 0
    NOT_STARTED = 1
    IN_PROGRESS = 2
    COMPLETED = 3


class HealthEventKind(enum.Enum):
    """What a health event reports."""

    XID = "xid"
    ECC_SINGLE_BIT = "ecc-single-bit"
    ECC_DOUBLE_BIT = "ecc-double-bit"
    GPU_LOST = "gpu-lost"


@dataclass(frozen=True, order=True)
class CudaComputeCapability:
    """CUDA compute capability, e.g. 9.0 for Hopper."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True)
class MigModeState:
    """MIG mode: ``current`` is in effect; ``pending`` takes effect after a GPU reset."""

    current: bool
    pending: bool


@dataclass(frozen=True, order=True)
class MigPlacement:
    """Where a GPU instance sits: ``start`` and ``size`` count memory slices."""

    start: int
    size: int

    @property
    def slices(self) -> range:
        """The memory-slice indices this placement occupies."""
        return range(self.start, self.start + self.size)

    def overlaps(self, other: MigPlacement) -> bool:
        """True when the two placements share a memory slice."""
        return self.start < other.start + other.size and other.start < self.start + self.size


@dataclass(frozen=True)
class MigProfile:
    """A GPU-instance profile a MIG-capable GPU supports (one row of ``nvidia-smi mig -lgip``).

    ``profile_id`` is the id NVML and ``nvidia-smi mig -cgi`` take (19 for A100 1g.5gb);
    ``nvml_profile`` is the ``NVML_GPU_INSTANCE_PROFILE_*`` index it was queried with.
    ``memory_bytes`` is NVML's ``memorySizeMB`` in bytes. ``placements`` lists every start
    NVML allows regardless of what is occupied now.
    """

    name: str
    profile_id: int
    nvml_profile: int
    slice_count: int
    instance_count: int
    memory_bytes: int
    memory_slices: int
    multiprocessor_count: int
    copy_engine_count: int
    decoder_count: int
    encoder_count: int
    jpeg_count: int
    ofa_count: int
    placements: tuple[MigPlacement, ...]


@dataclass(frozen=True)
class MigDevice:
    """An existing MIG device: one GPU instance with its (full-size) compute instance."""

    uuid: str
    parent_uuid: str
    parent_index: int
    index: int
    gi_id: int
    ci_id: int
    profile_id: int
    profile_name: str
    placement: MigPlacement
    memory_bytes: int
    multiprocessor_count: int


@dataclass(frozen=True)
class FabricInfo:
    """NVLink fabric facts (``nvmlGpuFabricInfo``): cluster UUID, clique id, state, status.

    ``status`` is the NVML return code of the registration ("0" means success);
    ``cluster_uuid`` is in canonical 8-4-4-4-12 hex form.
    """

    cluster_uuid: str
    clique_id: int
    state: FabricState
    status: int
    health_mask: int = 0


@dataclass(frozen=True)
class DriverInfo:
    """Node-wide driver facts."""

    driver_version: str
    cuda_driver_version: str
    nvml_version: str


@dataclass(frozen=True)
class GpuInfo:
    """Everything a backend knows about one physical GPU.

    Optional fields are ``None`` when the GPU or driver does not report them (NVML
    ``NOT_SUPPORTED``), so callers branch on a value instead of catching exceptions.
    """

    index: int
    minor: int
    uuid: str
    product_name: str
    brand: Brand
    architecture: Architecture
    cuda_compute_capability: CudaComputeCapability
    driver_version: str
    cuda_driver_version: str
    memory_bytes: int | None
    pci_bus_id: str
    pcie_root: str | None
    addressing_mode: AddressingMode | None
    mig_capable: bool
    mig_mode: MigModeState
    mig_profiles: tuple[MigProfile, ...]
    mig_devices: tuple[MigDevice, ...]
    compute_mode: ComputeMode
    fabric: FabricInfo | None
    time_slice: TimeSliceLevel | None = None
    lost: bool = False
    # sysfs numa_node of the PCI device; None where the platform has no NUMA (-1).
    numa_node: int | None = None
    # ``nvmlDeviceGetModuleId``: the GPU's module on its baseboard, as Fabric Manager names
    # partition members (from 1); None where NVML does not report one.
    module_id: int | None = None

    def mig_profile(self, name_or_id: str | int) -> MigProfile:
        """Return the profile with this name ("1g.5gb") or profile id (19); KeyError if none."""
        for profile in self.mig_profiles:
            if name_or_id in (profile.name, profile.profile_id):
                return profile
        raise KeyError(f"GPU {self.uuid} has no MIG profile {name_or_id!r}")


@dataclass(frozen=True)
class HealthEvent:
    """One health event. ``xid`` is set for XID events; ``mig_uuid`` when NVML names a MIG
    device (GI/CI ids other than the whole GPU)."""

    kind: HealthEventKind
    gpu_uuid: str
    xid: int | None = None
    gi_id: int | None = None
    ci_id: int | None = None
    mig_uuid: str | None = None
    description: str = ""
