"""Built-in GPU models for the fake backend: NVML strings and numbers of real parts.

Names and totals are what NVML (and so ``nvidia-smi``) reports on those parts. MIG rows follow
``nvidia-smi mig -lgip`` (profile id, instance count, memory, SMs, engines) and NVIDIA's MIG
user guide "Supported MIG Profiles" tables; placements are in memory slices (8 per GPU on
every 7-compute-slice part). Sources per model are in each table's comment.
"""

from __future__ import annotations

from dataclasses import dataclass

from dra_nvlib.facts import AddressingMode, Architecture, Brand, CudaComputeCapability

MIB = 1024 * 1024

# NVML_GPU_INSTANCE_PROFILE_* indices (what nvmlDeviceGetGpuInstanceProfileInfo takes).
NVML_GI_1_SLICE = 0
NVML_GI_2_SLICE = 1
NVML_GI_3_SLICE = 2
NVML_GI_4_SLICE = 3
NVML_GI_7_SLICE = 4
NVML_GI_1_SLICE_REV1 = 7
NVML_GI_1_SLICE_REV2 = 9


@dataclass(frozen=True)
class MigProfileSpec:
    """One GPU-instance profile row: ``placement_starts`` share the size ``memory_slices``."""

    name: str
    profile_id: int
    nvml_profile: int
    slice_count: int
    instance_count: int
    memory_mib: int
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg: int
    ofa: int
    memory_slices: int
    placement_starts: tuple[int, ...]


@dataclass(frozen=True)
class GpuModel:
    """A GPU part as NVML describes it."""

    key: str
    product_name: str
    brand: Brand
    architecture: Architecture
    compute_capability: CudaComputeCapability
    memory_mib: int
    pci_device_id: int
    mig_profiles: tuple[MigProfileSpec, ...] = ()
    compute_slices: int = 0
    memory_slices: int = 0
    fabric_capable: bool = False
    addressing_mode: AddressingMode | None = AddressingMode.NONE

    @property
    def mig_capable(self) -> bool:
        """True when the part supports MIG at all."""
        return bool(self.mig_profiles)


def _seven_slice_table(
    *,
    mem: tuple[int, int, int, int, int, int, int],
    sms: tuple[int, int, int, int, int, int, int],
    ce: tuple[int, int, int, int, int, int, int],
    dec: tuple[int, int, int, int, int, int, int],
    jpeg: tuple[int, int, int, int, int, int, int],
    ofa: tuple[int, int, int, int, int, int, int],
    names: tuple[str, str, str, str, str, str, str],
) -> tuple[MigProfileSpec, ...]:
    """The 7-compute/8-memory-slice layout shared by A100, H100, H200, GH200 and GB200.

    Rows in order: 1g, 1g+me, 1g (2 memory slices), 2g, 3g, 4g, 7g. Profile ids, NVML indices,
    instance counts and placements are the same on all these parts; only sizes and engine
    counts differ.
    """
    layout = (
        # profile_id, nvml index, compute slices, instances, memory slices, starts
        (19, NVML_GI_1_SLICE, 1, 7, 1, (0, 1, 2, 3, 4, 5, 6)),
        (20, NVML_GI_1_SLICE_REV1, 1, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
        (15, NVML_GI_1_SLICE_REV2, 1, 4, 2, (0, 2, 4, 6)),
        (14, NVML_GI_2_SLICE, 2, 3, 2, (0, 2, 4)),
        (9, NVML_GI_3_SLICE, 3, 2, 4, (0, 4)),
        (5, NVML_GI_4_SLICE, 4, 1, 4, (0,)),
        (0, NVML_GI_7_SLICE, 7, 1, 8, (0,)),
    )
    rows = []
    for i, (pid, idx, slices, count, mslices, starts) in enumerate(layout):
        rows.append(
            MigProfileSpec(
                name=names[i],
                profile_id=pid,
                nvml_profile=idx,
                slice_count=slices,
                instance_count=count,
                memory_mib=mem[i],
                multiprocessors=sms[i],
                copy_engines=ce[i],
                decoders=dec[i],
                encoders=0,
                jpeg=jpeg[i],
                ofa=ofa[i],
                memory_slices=mslices,
                placement_starts=starts,
            )
        )
    return tuple(rows)


# A100-SXM4-40GB: MIG user guide A100 table; sizes from `mig -lgip` (4.75/9.62/19.50/39.25 GiB).
_A100_40GB = _seven_slice_table(
    names=("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    mem=(4864, 4864, 9856, 9856, 19968, 19968, 40192),
    sms=(14, 14, 14, 28, 42, 56, 98),
    ce=(1, 1, 1, 2, 3, 4, 7),
    dec=(0, 1, 1, 1, 2, 2, 5),
    jpeg=(0, 1, 0, 0, 0, 0, 1),
    ofa=(0, 1, 0, 0, 0, 0, 1),
)

# A100-SXM4-80GB: same geometry, names scaled per the guide; `mig -lgip` 9.50/19.50/39.25/79.25.
_A100_80GB = _seven_slice_table(
    names=("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    mem=(9728, 9728, 19968, 19968, 40192, 40192, 81152),
    sms=(14, 14, 14, 28, 42, 56, 98),
    ce=(1, 1, 1, 2, 3, 4, 7),
    dec=(0, 1, 1, 1, 2, 2, 5),
    jpeg=(0, 1, 0, 0, 0, 0, 1),
    ofa=(0, 1, 0, 0, 0, 0, 1),
)

# H100 80GB HBM3 (SXM5): MIG user guide H100 table (NVDEC/NVJPG per slice, OFA only with
# +me and 7g); SMs and sizes from `mig -lgip` on SXM5 (9.75/19.62/39.50/79.25 GiB).
_H100_80GB = _seven_slice_table(
    names=("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    mem=(9984, 9984, 20096, 20096, 40448, 40448, 81152),
    sms=(16, 16, 26, 32, 60, 64, 132),
    ce=(1, 1, 1, 2, 3, 4, 8),
    dec=(1, 1, 1, 2, 3, 4, 7),
    jpeg=(1, 1, 1, 2, 3, 4, 7),
    ofa=(0, 1, 0, 0, 0, 0, 1),
)

# H200 (141 GB): the guide's H200 table has H100's engine layout with 1g.18gb .. 7g.141gb names;
# sizes are H100's scaled to the 141 GB board and rounded to 128 MiB (no -lgip listing at hand).
_H200_141GB = _seven_slice_table(
    names=("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    mem=(17536, 17536, 35328, 35328, 71296, 71296, 142976),
    sms=(16, 16, 26, 32, 60, 64, 132),
    ce=(1, 1, 1, 2, 3, 4, 8),
    dec=(1, 1, 1, 2, 3, 4, 7),
    jpeg=(1, 1, 1, 2, 3, 4, 7),
    ofa=(0, 1, 0, 0, 0, 0, 1),
)

# GH200 96GB HBM3 (Grace Hopper): the MIG user guide's GH200 table (H100's engine layout,
# 1g.12gb .. 7g.96gb names); sizes and SMs from `mig -lgip` on a GH200
# (11.00/23.00/46.50/93.00 GiB; 16/26/32/60/64/132 SMs).
_GH200_96GB = _seven_slice_table(
    names=("1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"),
    mem=(11264, 11264, 23552, 23552, 47616, 47616, 95232),
    sms=(16, 16, 26, 32, 60, 64, 132),
    ce=(1, 1, 1, 2, 3, 4, 8),
    dec=(1, 1, 1, 2, 3, 4, 7),
    jpeg=(1, 1, 1, 2, 3, 4, 7),
    ofa=(0, 1, 0, 0, 0, 0, 1),
)

# GB200: the guide has no GB200 table; names are the GPU Operator mig-parted ones (1g.23gb,
# 2g.47gb, 3g.93gb...); engine counts are B200's; sizes keep H100's ratio of profile to board
# memory, rounded to 128 MiB, so every profile fits the 189471 MiB board.
_GB200 = _seven_slice_table(
    names=("1g.23gb", "1g.23gb+me", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"),
    mem=(23168, 23168, 46592, 46592, 93952, 93952, 188416),
    sms=(18, 18, 18, 36, 54, 72, 126),
    ce=(2, 2, 2, 3, 6, 8, 16),
    dec=(1, 1, 1, 1, 1, 1, 1),
    jpeg=(1, 1, 1, 1, 1, 1, 1),
    ofa=(0, 1, 0, 0, 0, 0, 1),
)

_ALL = (
    GpuModel(
        key="A100-40GB",
        product_name="NVIDIA A100-SXM4-40GB",
        brand=Brand.NVIDIA,
        architecture=Architecture.AMPERE,
        compute_capability=CudaComputeCapability(8, 0),
        memory_mib=40960,
        pci_device_id=0x20B010DE,
        mig_profiles=_A100_40GB,
        compute_slices=7,
        memory_slices=8,
    ),
    GpuModel(
        key="A100-80GB",
        product_name="NVIDIA A100-SXM4-80GB",
        brand=Brand.NVIDIA,
        architecture=Architecture.AMPERE,
        compute_capability=CudaComputeCapability(8, 0),
        memory_mib=81920,
        pci_device_id=0x20B210DE,
        mig_profiles=_A100_80GB,
        compute_slices=7,
        memory_slices=8,
    ),
    GpuModel(
        key="H100-80GB",
        product_name="NVIDIA H100 80GB HBM3",
        brand=Brand.NVIDIA,
        architecture=Architecture.HOPPER,
        compute_capability=CudaComputeCapability(9, 0),
        memory_mib=81559,
        pci_device_id=0x233010DE,
        mig_profiles=_H100_80GB,
        compute_slices=7,
        memory_slices=8,
    ),
    GpuModel(
        key="H200",
        product_name="NVIDIA H200",
        brand=Brand.NVIDIA,
        architecture=Architecture.HOPPER,
        compute_capability=CudaComputeCapability(9, 0),
        memory_mib=143771,
        pci_device_id=0x233510DE,
        mig_profiles=_H200_141GB,
        compute_slices=7,
        memory_slices=8,
    ),
    GpuModel(
        key="GH200-96GB",
        product_name="NVIDIA GH200 96GB HBM3",
        brand=Brand.NVIDIA,
        architecture=Architecture.HOPPER,
        compute_capability=CudaComputeCapability(9, 0),
        memory_mib=97871,
        pci_device_id=0x234210DE,
        mig_profiles=_GH200_96GB,
        compute_slices=7,
        memory_slices=8,
        addressing_mode=AddressingMode.ATS,
    ),
    GpuModel(
        key="GB200",
        product_name="NVIDIA GB200",
        brand=Brand.NVIDIA,
        architecture=Architecture.BLACKWELL,
        compute_capability=CudaComputeCapability(10, 0),
        memory_mib=189471,
        pci_device_id=0x294110DE,
        mig_profiles=_GB200,
        compute_slices=7,
        memory_slices=8,
        fabric_capable=True,
        addressing_mode=AddressingMode.ATS,
    ),
    GpuModel(
        key="L4",
        product_name="NVIDIA L4",
        brand=Brand.NVIDIA,
        architecture=Architecture.ADA,
        compute_capability=CudaComputeCapability(8, 9),
        memory_mib=23034,
        pci_device_id=0x27B810DE,
    ),
    GpuModel(
        key="T4",
        product_name="Tesla T4",
        brand=Brand.NVIDIA,
        architecture=Architecture.TURING,
        compute_capability=CudaComputeCapability(7, 5),
        memory_mib=15360,
        pci_device_id=0x1EB810DE,
        addressing_mode=None,
    ),
    GpuModel(
        key="V100-16GB",
        product_name="Tesla V100-SXM2-16GB",
        brand=Brand.NVIDIA,
        architecture=Architecture.VOLTA,
        compute_capability=CudaComputeCapability(7, 0),
        memory_mib=16160,
        pci_device_id=0x1DB110DE,
        addressing_mode=None,
    ),
)

#: Built-in models by key ("A100-40GB", "H100-80GB", ...).
GPU_MODELS: dict[str, GpuModel] = {m.key: m for m in _ALL}

# Spellings users reach for; every alias is matched case-insensitively.
_ALIASES = {
    "A100": "A100-40GB",
    "A100-SXM4-40GB": "A100-40GB",
    "A100-SXM4-80GB": "A100-80GB",
    "H100": "H100-80GB",
    "H100-SXM5-80GB": "H100-80GB",
    "H200-141GB": "H200",
    "GH200": "GH200-96GB",
    "GH200-96GB-HBM3": "GH200-96GB",
    "GB200-186GB": "GB200",
    "V100": "V100-16GB",
    "V100-SXM2-16GB": "V100-16GB",
}


def find_model(name: str) -> GpuModel | None:
    """Look a model up by key or alias, case-insensitively; ``None`` when unknown."""
    wanted = name.strip().upper()
    for key, model in GPU_MODELS.items():
        if key.upper() == wanted:
            return model
    for alias, key in _ALIASES.items():
        if alias.upper() == wanted:
            return GPU_MODELS[key]
    return None
