"""What an MPS control daemon is: its ID, its stored spec and its host directories (pure)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dra_sharing.errors import SharingApplyError
from dra_sharing.resolve import MpsSettings

__all__ = ["MpsDaemonSpec", "MpsDirs", "MpsSpecError", "mps_daemon_id"]


class MpsSpecError(SharingApplyError):
    """A daemon's stored ``spec.json`` is missing or malformed (names the daemon and field)."""


def mps_daemon_id(claim_uid: str, device_uuids: Sequence[str]) -> str:
    """``<claimUID>-<first 5 hex of sha256(sorted UUIDs joined by ",")>``."""
    digest = hashlib.sha256(",".join(sorted(device_uuids)).encode()).hexdigest()
    return f"{claim_uid}-{digest[:5]}"


@dataclass(frozen=True)
class MpsDaemonSpec:
    """What to start: the daemon's ID, the GPUs whose compute mode it needs, the devices it
    serves (``CUDA_VISIBLE_DEVICES``) and its settings."""

    daemon_id: str
    gpu_uuids: tuple[str, ...]
    device_uuids: tuple[str, ...]
    settings: MpsSettings

    def to_json(self) -> dict[str, object]:
        """The spec as stored next to the daemon."""
        return {
            "id": self.daemon_id,
            "gpuUUIDs": list(self.gpu_uuids),
            "deviceUUIDs": list(self.device_uuids),
            "activeThreadPercentage": self.settings.active_thread_percentage,
            "pinnedMemoryLimits": dict(self.settings.pinned_memory_limits),
            "multiUser": self.settings.multi_user,
        }

    @classmethod
    def from_json(cls, doc: object, *, daemon_id: str) -> MpsDaemonSpec:
        """The spec stored next to daemon ``daemon_id`` (the inverse of :meth:`to_json`).

        Raises:
            MpsSpecError: not an object, or a field of the wrong type (named).
        """

        def bad(field: str, why: str) -> MpsSpecError:
            return MpsSpecError(
                gpu=daemon_id, operation="read MPS daemon spec", message=f"{field}: {why}"
            )

        if not isinstance(doc, dict):
            raise bad("spec.json", "not a JSON object")
        if doc.get("id") != daemon_id:
            raise bad("id", f"{doc.get('id')!r} is not the daemon's directory {daemon_id!r}")

        def uuids(field: str) -> tuple[str, ...]:
            value = doc.get(field)
            if not isinstance(value, list) or not all(isinstance(u, str) for u in value):
                raise bad(field, "not a list of UUID strings")
            return tuple(value)

        pct = doc.get("activeThreadPercentage")
        if pct is not None and (isinstance(pct, bool) or not isinstance(pct, int)):
            raise bad("activeThreadPercentage", f"{pct!r} is not an integer")
        limits = doc.get("pinnedMemoryLimits", {})
        if not isinstance(limits, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in limits.items()
        ):
            raise bad("pinnedMemoryLimits", "not a map of UUID to limit strings")
        multi = doc.get("multiUser", False)
        if not isinstance(multi, bool):
            raise bad("multiUser", f"{multi!r} is not a boolean")
        return cls(
            daemon_id=daemon_id,
            gpu_uuids=uuids("gpuUUIDs"),
            device_uuids=uuids("deviceUUIDs"),
            settings=MpsSettings(
                active_thread_percentage=pct, pinned_memory_limits=limits, multi_user=multi
            ),
        )


@dataclass(frozen=True)
class MpsDirs:
    """The host directories of one daemon."""

    root: Path

    @property
    def pipe(self) -> Path:
        """CUDA_MPS_PIPE_DIRECTORY."""
        return self.root / "pipe"

    @property
    def log(self) -> Path:
        """CUDA_MPS_LOG_DIRECTORY."""
        return self.root / "log"

    @property
    def shm(self) -> Path:
        """The daemon's shared memory directory."""
        return self.root / "shm"

    @property
    def client(self) -> Path:
        """The fake ``nvidia-cuda-mps-control`` client script (fake launcher only)."""
        return self.root / "nvidia-cuda-mps-control"
