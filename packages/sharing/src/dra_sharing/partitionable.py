"""Dynamic MIG as partitionable devices (KEP-4815): counters per GPU, a device per placement.

For every MIG-capable GPU (NVIDIA #1092: a GPU that cannot do MIG publishes no counters)
this module shapes, without I/O:

- one counter set ``gpu-<minor>-counter-set`` holding ``multiprocessors``, ``copy-engines``,
  ``decoders``, ``encoders``, ``jpeg-engines``, ``ofa-engines``, ``memory`` and
  ``memory-slice-<i>`` = 1 for each memory slice;
- one device per valid placement of every GPU-instance profile, named as static MIG devices
  are (``gpu-<minor>-mig-<profile>-<profileId>-<start>``), consuming its profile's engines and
  memory plus the ``memory-slice-*`` range it covers;
- the full GPU ``gpu-<minor>``, consuming every counter, so it and any MIG placement exclude
  each other, and two overlapping placements exclude each other through the memory slices.

An engine counter holds the largest amount any one profile can use in total (its count times
its instance limit, or the whole-GPU profile), so the memory slices decide placement and the
engine counters stop only what the hardware stops too (two ``+me`` instances on A100, whose
only optical-flow engine they share).

Slice layout: Kubernetes 1.35+ takes counter sets in a slice of their own, referenced by
device slices of the same pool (NVIDIA's split layout: G+1 slices); 1.34 wants each GPU's
counter set in the slice of its devices (combined layout).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dra_nvlib import GpuInfo, MigProfile

__all__ = [
    "MigOffer",
    "counter_set_json",
    "counter_set_name",
    "dynamic_mig_device_name",
    "full_gpu_capacity",
    "full_gpu_consumption",
    "mig_offers",
    "partitionable",
    "split_layout",
]

_MIB = 1024 * 1024
_ENGINES = (
    ("multiprocessors", "multiprocessor_count"),
    ("copy-engines", "copy_engine_count"),
    ("decoders", "decoder_count"),
    ("encoders", "encoder_count"),
    ("jpeg-engines", "jpeg_count"),
    ("ofa-engines", "ofa_count"),
)


def partitionable(gpu: GpuInfo) -> bool:
    """True when the GPU can do MIG and reports its profiles (else: no counters, #1092)."""
    return gpu.mig_capable and bool(gpu.mig_profiles) and not gpu.lost


def counter_set_name(gpu: GpuInfo) -> str:
    """``gpu-<minor>-counter-set``."""
    return f"gpu-{gpu.minor}-counter-set"


def dynamic_mig_device_name(minor: int, profile_name: str, profile_id: int, start: int) -> str:
    """``gpu-<minor>-mig-<profile>-<profileId>-<start>``: dots dropped, other separators
    dashes (``1g.10gb+me`` -> ``1g10gb-me``), the name static MIG devices get too."""
    profile = re.sub(r"[^a-z0-9]+", "-", profile_name.lower().replace(".", "")).strip("-")
    return f"gpu-{minor}-mig-{profile}-{profile_id}-{start}"


def _memory_slices(gpu: GpuInfo) -> int:
    return max((p.start + p.size for prof in gpu.mig_profiles for p in prof.placements), default=0)


def _totals(gpu: GpuInfo) -> dict[str, int]:
    totals: dict[str, int] = {}
    for counter, attr in _ENGINES:
        totals[counter] = max(
            (int(getattr(p, attr)) * p.instance_count for p in gpu.mig_profiles), default=0
        )
    totals["memory"] = max(
        max((p.memory_bytes // _MIB) * p.instance_count for p in gpu.mig_profiles),
        (gpu.memory_bytes or 0) // _MIB,
    )
    return totals


def _mem(mib: int) -> str:
    return f"{mib}Mi"


def counter_set_json(gpu: GpuInfo) -> dict[str, Any]:
    """The GPU's ``CounterSet`` (``sharedCounters`` entry)."""
    totals = _totals(gpu)
    counters: dict[str, Any] = {
        name: {"value": _mem(v) if name == "memory" else str(v)} for name, v in totals.items()
    }
    for i in range(_memory_slices(gpu)):
        counters[f"memory-slice-{i}"] = {"value": "1"}
    return {"name": counter_set_name(gpu), "counters": counters}


@dataclass(frozen=True)
class MigOffer:
    """One placement of one profile that may be created at prepare."""

    gpu: GpuInfo
    profile: MigProfile
    start: int

    @property
    def name(self) -> str:
        """The device name."""
        return dynamic_mig_device_name(
            self.gpu.minor, self.profile.name, self.profile.profile_id, self.start
        )

    @property
    def memory_slices(self) -> range:
        """The memory slices the placement covers."""
        return range(self.start, self.start + self.profile.memory_slices)

    def consumption(self) -> dict[str, Any]:
        """The ``consumesCounters`` entry of the device."""
        counters: dict[str, Any] = {
            name: {"value": str(int(getattr(self.profile, attr)))} for name, attr in _ENGINES
        }
        counters["memory"] = {"value": _mem(self.profile.memory_bytes // _MIB)}
        for i in self.memory_slices:
            counters[f"memory-slice-{i}"] = {"value": "1"}
        return {"counterSet": counter_set_name(self.gpu), "counters": counters}

    def capacity(self) -> dict[str, Any]:
        """The device's capacity: engines, memory and one ``memorySlice<i>`` per slice."""
        p = self.profile
        cap: dict[str, Any] = {
            "copyEngines": {"value": str(p.copy_engine_count)},
            "decoders": {"value": str(p.decoder_count)},
            "encoders": {"value": str(p.encoder_count)},
            "jpegEngines": {"value": str(p.jpeg_count)},
            "memory": {"value": _mem(p.memory_bytes // _MIB)},
            "multiprocessors": {"value": str(p.multiprocessor_count)},
            "ofaEngines": {"value": str(p.ofa_count)},
        }
        for i in self.memory_slices:
            cap[f"memorySlice{i}"] = {"value": "1"}
        return dict(sorted(cap.items()))


def mig_offers(gpu: GpuInfo) -> list[MigOffer]:
    """Every placement of every profile, by start then profile size (deterministic)."""
    if not partitionable(gpu):
        return []
    offers = [MigOffer(gpu, prof, pl.start) for prof in gpu.mig_profiles for pl in prof.placements]
    return sorted(offers, key=lambda o: (o.start, o.profile.memory_slices, o.profile.profile_id))


def full_gpu_consumption(gpu: GpuInfo) -> dict[str, Any]:
    """The full GPU's ``consumesCounters`` entry: all of every counter."""
    return {"counterSet": counter_set_name(gpu), "counters": counter_set_json(gpu)["counters"]}


def full_gpu_capacity(gpu: GpuInfo) -> dict[str, Any]:
    """The full GPU's capacity in dynamic MIG mode: per-dimension maxima over the profiles."""
    # Unified-memory GPUs report no total: the whole-GPU profile's memory stands for it.
    total = gpu.memory_bytes or max(p.memory_bytes for p in gpu.mig_profiles)
    cap: dict[str, Any] = {"memory": {"value": _mem(total // _MIB)}}
    for key, attr in (
        ("multiprocessors", "multiprocessor_count"),
        ("copyEngines", "copy_engine_count"),
        ("decoders", "decoder_count"),
        ("encoders", "encoder_count"),
        ("jpegEngines", "jpeg_count"),
        ("ofaEngines", "ofa_count"),
    ):
        cap[key] = {"value": str(max(int(getattr(p, attr)) for p in gpu.mig_profiles))}
    return dict(sorted(cap.items()))


def split_layout(
    per_gpu: Sequence[tuple[dict[str, Any] | None, list[dict[str, Any]]]], *, split: bool
) -> list[dict[str, Any]]:
    """Slice bodies (``sharedCounters``/``devices``) of the pool from per-GPU
    ``(counterSet or None, devices)``.

    ``split`` (Kubernetes 1.35+): one slice with every counter set, then one device slice per
    GPU. Otherwise (1.34): one slice per GPU holding its counter set and devices.
    """
    bodies: list[dict[str, Any]] = []
    if split:
        sets = [cs for cs, _ in per_gpu if cs is not None]
        if sets:
            bodies.append({"sharedCounters": sets})
        bodies.extend({"devices": devices} for _, devices in per_gpu)
        return bodies
    for cs, devices in per_gpu:
        body: dict[str, Any] = {"devices": devices}
        if cs is not None:
            body["sharedCounters"] = [cs]
        bodies.append(body)
    return bodies
