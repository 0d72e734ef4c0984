"""An NvidiaGPUConfig's parameters as v1 CEL selectors and an opaque GpuConfig (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from dra_api_types.errors import VersionError
from dra_api_types.legacy import LegacyGpuConfigSpec
from dra_api_types.nvidia_v1beta1 import API_VERSION as NVIDIA_CONFIG_API
from dra_api_types.nvidia_v1beta1 import GPU_DRIVER
from dra_api_types.semver import Version

from .errors import MigrationError
from .time_slicing import DurationError, nearest_interval

ATTRS: Final = f"device.attributes['{GPU_DRIVER}']"
CAPACITY: Final = f"device.capacity['{GPU_DRIVER}']"
SHARING_STRATEGIES: Final = {"TimeSlicing": "TimeSlicing", "MPS": "MPS"}


@dataclass(slots=True)
class GpuRequirements:
    """What one NvidiaGPUConfig becomes: selectors, an optional opaque config, and why."""

    selectors: list[str] = field(default_factory=list)
    opaque_parameters: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def device_type_selector(mig: bool | None) -> str:
    """The selector every migrated class starts with: this driver, full GPUs or MIG."""
    kind = "mig" if mig else "gpu"
    return f"device.driver == '{GPU_DRIVER}' && {ATTRS}.type == '{kind}'"


def _compute_capability(raw: str | float | int, *, ref: str, path: str) -> str:
    text = str(raw)
    parts = text.split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise MigrationError(
            f"{text!r} is not a compute capability like '8.0'", object_ref=ref, field=path
        )
    padded = ".".join([str(int(p)) for p in parts] + ["0"] * (3 - len(parts)))
    try:
        Version.parse(padded)
    except VersionError as exc:  # pragma: no cover - digits always parse
        raise MigrationError(str(exc), object_ref=ref, field=path) from exc
    return padded


def gpu_requirements(spec: LegacyGpuConfigSpec, *, ref: str, path: str) -> GpuRequirements:
    """Translate an NvidiaGPUConfig spec; raises :class:`MigrationError` naming the field."""
    out = GpuRequirements(selectors=[device_type_selector(spec.mig)])
    if spec.mig is None:
        out.notes.append("mig not set: full GPUs (type 'gpu'), as the classic driver gave")
    else:
        out.notes.append(
            f"mig: {str(spec.mig).lower()} -> device type {'mig' if spec.mig else 'gpu'}"
        )
    if spec.memory is not None:
        out.selectors.append(f"{CAPACITY}.memory.compareTo(quantity('{spec.memory}')) >= 0")
        out.notes.append(f"memory: {spec.memory} -> at least {spec.memory} of GPU memory")
    if spec.compute_capability is not None:
        version = _compute_capability(
            spec.compute_capability, ref=ref, path=f"{path}.computeCapability"
        )
        out.selectors.append(f"{ATTRS}.cudaComputeCapability.compareTo(semver('{version}')) >= 0")
        out.notes.append(
            f"computeCapability: {spec.compute_capability} -> cudaComputeCapability >= "
            f"{version} (a minimum, so newer GPUs qualify)"
        )
    if spec.sharing is not None:
        out.opaque_parameters = _sharing(spec, ref=ref, path=f"{path}.sharing", notes=out.notes)
    shares = spec.max_sharable_gpu()
    if shares is not None:
        if shares < 1:
            raise MigrationError(
                f"must be at least 1, got {shares}",
                object_ref=ref,
                field=f"{path}.sharing.maxSharableGPU",
            )
        out.notes.append(
            f"maxSharableGPU: {shares} -> consumable GPU shares: publish GPUs with "
            f"{shares} shares (chart value consumableShares={shares}, kubelet plugin flag "
            f"--consumable-shares={shares}); each claim then consumes 1 of a GPU's "
            f"{shares} shares by default"
        )
    return out


def _sharing(spec: LegacyGpuConfigSpec, *, ref: str, path: str, notes: list[str]) -> dict[str, Any]:
    sharing = spec.sharing
    assert sharing is not None
    strategy = SHARING_STRATEGIES.get(sharing.strategy)
    if strategy is None:
        raise MigrationError(
            f"unsupported strategy {sharing.strategy!r} (TimeSlicing or MPS)",
            object_ref=ref,
            field=f"{path}.strategy",
        )
    body: dict[str, Any] = {"strategy": strategy}
    if sharing.time_slicing_config is not None:
        if strategy != "TimeSlicing":
            raise MigrationError(
                "only with strategy TimeSlicing", object_ref=ref, field=f"{path}.timeSlicingConfig"
            )
        interval = sharing.time_slicing_config.interval
        if interval is not None and spec.mig:
            raise MigrationError(
                "MIG devices have no time-slice interval (MigDeviceConfig has none)",
                object_ref=ref,
                field=f"{path}.timeSlicingConfig.interval",
            )
        if interval is not None:
            try:
                name, why = nearest_interval(interval)
            except DurationError as exc:
                raise MigrationError(
                    str(exc), object_ref=ref, field=f"{path}.timeSlicingConfig.interval"
                ) from exc
            body["timeSlicingConfig"] = {"interval": name}
            notes.append(why)
    gate = "TimeSlicingSettings" if strategy == "TimeSlicing" else "MPSSupport"
    kind = "MigDeviceConfig" if spec.mig else "GpuConfig"
    notes.append(
        f"sharing: {strategy} -> opaque {kind} in the DeviceClass config, applied to every "
        f"device of the class (NVIDIA's kubelet plugin applies it only with its feature "
        f"gate {gate}=true)"
    )
    return {"apiVersion": NVIDIA_CONFIG_API, "kind": kind, "sharing": body}
