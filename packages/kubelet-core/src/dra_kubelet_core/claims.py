"""What the gRPC layer needs from the driver core: claim references in, per-claim outcomes out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from dra_kubelet_core.checkpoint import PreparedDevice
from dra_kubelet_core.errors import ClaimRef

__all__ = ["ClaimDriver", "PrepareOutcome", "UnprepareOutcome"]


@dataclass(frozen=True)
class PrepareOutcome:
    """Result of preparing one claim: its devices, or an error message for the kubelet
    (``retryable`` when the kubelet's retry may succeed without a change to the claim)."""

    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""
    reason: str = ""
    retryable: bool = False


@dataclass(frozen=True)
class UnprepareOutcome:
    """Result of unpreparing one claim: empty ``error`` on success."""

    error: str = ""
    reason: str = ""


class ClaimDriver(Protocol):
    """Prepares and unprepares claims; never raises for a single bad claim."""

    async def prepare_claims(self, claims: Sequence[ClaimRef]) -> dict[str, PrepareOutcome]:
        """Prepare every claim; the result has one entry per claim UID."""
        ...

    async def unprepare_claims(self, claims: Sequence[ClaimRef]) -> dict[str, UnprepareOutcome]:
        """Unprepare every claim; unknown claims succeed."""
        ...
