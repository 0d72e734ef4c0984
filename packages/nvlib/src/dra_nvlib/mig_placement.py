"""Pure MIG capacity rules: may a GPU instance of a profile be created at a placement?

These are the rules the hardware applies, checked in the order NVML reports them:
the profile must exist, the start must be one of the profile's placements, the profile's
instance count must not be exhausted, the memory slices must be free, and the GPU's compute
slices must suffice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from dra_nvlib.facts import MigPlacement
from dra_nvlib.profiles import GpuModel, MigProfileSpec


class Refusal(Enum):
    """Why a creation is refused (mapped to exceptions by the backend)."""

    UNKNOWN_PROFILE = "unknown-profile"
    BAD_PLACEMENT = "bad-placement"
    PROFILE_EXHAUSTED = "profile-exhausted"
    OVERLAP = "overlap"
    NO_COMPUTE_SLICES = "no-compute-slices"


@dataclass(frozen=True)
class ExistingInstance:
    """A GPU instance already on the GPU."""

    profile_id: int
    placement: MigPlacement


def profile_spec(model: GpuModel, profile_id: int) -> MigProfileSpec | None:
    """The model's profile row with this id, or ``None``."""
    for spec in model.mig_profiles:
        if spec.profile_id == profile_id:
            return spec
    return None


def check_create(
    model: GpuModel,
    existing: Iterable[ExistingInstance],
    *,
    profile_id: int,
    start: int,
) -> tuple[Refusal, str] | None:
    """``None`` when the instance fits, else the refusal and a human explanation."""
    spec = profile_spec(model, profile_id)
    if spec is None:
        return Refusal.UNKNOWN_PROFILE, f"{model.key} has no GPU instance profile id {profile_id}"
    if start not in spec.placement_starts:
        starts = ",".join(str(s) for s in spec.placement_starts)
        return (
            Refusal.BAD_PLACEMENT,
            f"profile {spec.name} (id {profile_id}) cannot start at {start}; "
            f"valid starts: {starts}",
        )
    current = list(existing)
    same = sum(1 for inst in current if inst.profile_id == profile_id)
    if same >= spec.instance_count:
        return (
            Refusal.PROFILE_EXHAUSTED,
            f"profile {spec.name} allows {spec.instance_count} instance(s), {same} exist",
        )
    wanted = MigPlacement(start, spec.memory_slices)
    for inst in current:
        if inst.placement.overlaps(wanted):
            other = profile_spec(model, inst.profile_id)
            other_name = other.name if other else str(inst.profile_id)
            return (
                Refusal.OVERLAP,
                f"placement {start}:{spec.memory_slices} of {spec.name} overlaps {other_name} "
                f"at {inst.placement.start}:{inst.placement.size}",
            )
    used = sum(
        (s.slice_count if (s := profile_spec(model, inst.profile_id)) else 0) for inst in current
    )
    if used + spec.slice_count > model.compute_slices:
        return (
            Refusal.NO_COMPUTE_SLICES,
            f"{spec.name} needs {spec.slice_count} compute slice(s); "
            f"{model.compute_slices - used} of {model.compute_slices} free",
        )
    return None
