"""Consumable GPU shares (NVIDIA's ``--consumable-shares``): how a shared GPU is published.

With a mode set, every full GPU and MIG device is published with
``allowMultipleAllocations: true`` and capacities the scheduler counts, so several claims land
on one device and the scheduler, not the node, enforces the limit (KEP-5075):

- ``memory``: ``memory`` gets a request policy with ``default`` = all of it (rounded down to
  1 MiB), ``min`` 1Mi, ``step`` 1Mi. A claim that asks for no memory takes the whole device;
  claims asking for ``4Gi`` each share it up to its size.
- ``unlimited``: ``memory`` policy ``default`` 0, ``min`` 0, ``step`` 1Mi, ``max`` all of it.
  Claims asking for nothing take nothing, so any number share the device.
- an integer N: the ``unlimited`` memory policy plus a ``shares`` capacity of N with policy
  ``default`` 1, ``min`` 1, ``max`` N, ``step`` 1: up to N one-share claims per device (the
  native form of the seed article's ``maxSharableGPU: 4``).

Pure: parsing and shaping only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["ConsumableMode", "ConsumableShares", "ConsumableSharesError", "parse_consumable_shares"]

_MIB = 1024 * 1024


class ConsumableSharesError(ValueError):
    """The ``--consumable-shares`` value is not ``memory``, ``unlimited`` or a positive integer."""

    def __init__(self, value: str) -> None:
        super().__init__(
            f"--consumable-shares: {value!r} is not one of memory, unlimited, disabled "
            "or a positive integer"
        )
        self.value = value


class ConsumableMode(StrEnum):
    """How shares are counted."""

    DISABLED = "disabled"
    MEMORY = "memory"
    UNLIMITED = "unlimited"
    SHARES = "shares"


@dataclass(frozen=True)
class ConsumableShares:
    """The parsed setting; ``shares`` is N in the integer mode."""

    mode: ConsumableMode = ConsumableMode.DISABLED
    shares: int = 0

    @property
    def enabled(self) -> bool:
        """True when devices are published shareable."""
        return self.mode is not ConsumableMode.DISABLED

    def __str__(self) -> str:
        return str(self.shares) if self.mode is ConsumableMode.SHARES else self.mode.value

    def shape_device(self, device: dict[str, Any], memory_bytes: int | None) -> dict[str, Any]:
        """``device`` (ResourceSlice device JSON) with the sharing fields of this mode.

        A device whose memory is not reported (``None``: unified-memory GPUs) gets no memory
        policy; the ``shares`` capacity and multiple allocations still apply.
        """
        if not self.enabled:
            return device
        capacity: dict[str, Any] = dict(device.get("capacity") or {})
        if memory_bytes is not None:
            total = f"{memory_bytes // _MIB}Mi"
            if self.mode is ConsumableMode.MEMORY:
                policy: dict[str, Any] = {
                    "default": total,
                    "validRange": {"min": "1Mi", "max": total, "step": "1Mi"},
                }
            else:
                policy = {"default": "0", "validRange": {"min": "0", "max": total, "step": "1Mi"}}
            capacity["memory"] = {"value": total, "requestPolicy": policy}
        if self.mode is ConsumableMode.SHARES:
            n = str(self.shares)
            capacity["shares"] = {
                "value": n,
                "requestPolicy": {
                    "default": "1",
                    "validRange": {"min": "1", "max": n, "step": "1"},
                },
            }
        out = dict(device)
        if capacity:
            out["capacity"] = dict(sorted(capacity.items()))
        out["allowMultipleAllocations"] = True
        return out


def parse_consumable_shares(value: str | None) -> ConsumableShares:
    """``""``/``disabled`` -> off; ``memory``; ``unlimited``; ``N`` (N >= 1).

    Raises:
        ConsumableSharesError: any other value.
    """
    text = (value or "").strip()
    if text.lower() in ("", "disabled"):
        return ConsumableShares()
    if text.lower() == "memory":
        return ConsumableShares(ConsumableMode.MEMORY)
    if text.lower() == "unlimited":
        return ConsumableShares(ConsumableMode.UNLIMITED)
    if text.isdigit() and int(text) >= 1:
        return ConsumableShares(ConsumableMode.SHARES, int(text))
    raise ConsumableSharesError(text)
