"""Device taints versus request tolerations."""

from __future__ import annotations

from collections.abc import Sequence

from .model import DeviceInfo, Taint, Toleration

BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def untolerated_taint(dev: DeviceInfo, tolerations: Sequence[Toleration]) -> Taint | None:
    """The first taint that prevents allocation, if any (effect None and unknown ignored)."""
    for taint in dev.taints:
        if taint.effect in BLOCKING_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None
