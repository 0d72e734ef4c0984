"""A static MIG layout for a fake GPU: ``7x1g.12gb`` or ``3g.48gb/2x1g.12gb`` (pure).

What ``nvidia-smi mig -cgi ... -C`` or mig-parted's ``mig-devices`` would leave on a GPU before
the driver starts: GPU instances (each with its full compute instance) of the named profiles.
Placements are chosen as the device layer would accept them, largest profiles first, each at
the lowest free start of its table, so a layout that fits the hardware always lands and the
same layout always lands at the same placements. A layout that does not fit is refused with
the rule the hardware would apply (:func:`dra_nvlib.mig_placement.check_create`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dra_nvlib.facts import MigPlacement
from dra_nvlib.mig_placement import ExistingInstance, check_create
from dra_nvlib.profiles import GpuModel, MigProfileSpec

__all__ = [
    "LAYOUT_SEPARATOR",
    "MigLayoutError",
    "MigLayoutItem",
    "PlannedInstance",
    "format_mig_layout",
    "parse_mig_layout",
    "plan_layout",
]

#: Separator of a layout's items (``,`` and ``:`` already separate fleet items and options).
LAYOUT_SEPARATOR = "/"

_ITEM = re.compile(r"^(?:(?P<count>\d+)\s*[xX]\s*)?(?P<profile>\d+g\.\d+gb(?:\+me)?)$")


class MigLayoutError(ValueError):
    """A layout that cannot be read, names a profile the model lacks, or does not fit."""


@dataclass(frozen=True)
class MigLayoutItem:
    """``count`` GPU instances of the profile named ``profile`` (``1g.12gb``)."""

    profile: str
    count: int

    def __str__(self) -> str:
        return f"{self.count}x{self.profile}"


@dataclass(frozen=True)
class PlannedInstance:
    """One GPU instance of the layout: its profile and placement start."""

    profile_id: int
    start: int


def parse_mig_layout(text: str) -> tuple[MigLayoutItem, ...]:
    """``7x1g.12gb`` or ``3g.48gb/2x1g.12gb`` (a count defaults to 1; the same profile named
    twice adds up); raises MigLayoutError naming the bad item."""
    counts: dict[str, int] = {}
    for raw in text.split(LAYOUT_SEPARATOR):
        match = _ITEM.match(raw.strip())
        if match is None:
            raise MigLayoutError(
                f"MIG layout item {raw.strip()!r} is not [COUNTx]PROFILE (e.g. 7x1g.12gb)"
            )
        count = int(match["count"]) if match["count"] else 1
        if count < 1:
            raise MigLayoutError(f"MIG layout item {raw.strip()!r}: count must be at least 1")
        profile = match["profile"]
        counts[profile] = counts.get(profile, 0) + count
    return tuple(MigLayoutItem(profile, count) for profile, count in counts.items())


def format_mig_layout(items: tuple[MigLayoutItem, ...]) -> str:
    """The layout in one spelling (``7x1g.12gb``), for a fleet's canonical spec."""
    return LAYOUT_SEPARATOR.join(str(item) for item in items)


def _spec_named(model: GpuModel, name: str) -> MigProfileSpec:
    for spec in model.mig_profiles:
        if spec.name == name:
            return spec
    known = ", ".join(s.name for s in model.mig_profiles)
    raise MigLayoutError(f"{model.key} has no MIG profile {name!r} (its profiles: {known})")


def plan_layout(model: GpuModel, items: tuple[MigLayoutItem, ...]) -> tuple[PlannedInstance, ...]:
    """Placements for every instance of ``items`` on an empty GPU of ``model``, in creation
    order; raises MigLayoutError when a profile is unknown or the layout does not fit."""
    wanted = [(_spec_named(model, item.profile), item.count) for item in items]
    # Largest first: small instances placed early would split the memory slices big ones need.
    wanted.sort(key=lambda w: (-w[0].memory_slices, -w[0].slice_count))
    placed: list[ExistingInstance] = []
    plan: list[PlannedInstance] = []
    for spec, count in wanted:
        for n in range(count):
            reasons: list[str] = []
            for start in spec.placement_starts:
                refusal = check_create(model, placed, profile_id=spec.profile_id, start=start)
                if refusal is None:
                    placed.append(
                        ExistingInstance(spec.profile_id, MigPlacement(start, spec.memory_slices))
                    )
                    plan.append(PlannedInstance(spec.profile_id, start))
                    break
                reasons.append(refusal[1])
            else:
                raise MigLayoutError(
                    f"{spec.name} instance {n + 1} of {count} does not fit on {model.key}: "
                    f"{reasons[-1]}"
                )
    return tuple(plan)
