"""The plugin's checkpoint: which claims are prepared on this node, with which devices.

File format (JSON, one object)::

    {
      "checksum": "sha256:<hex>",
      "version": 1,
      "bootID": "<kernel boot id when written>",
      "claims": {"<uid>": {"state": "PrepareStarted|PrepareCompleted", "namespace": ...,
                           "name": ..., "devices": [...], "driverState": {...},
                           "rebuiltFromSpec": true, "pods": [{"name": ..., "uid": ...}]}}
    }

``driverState`` (per claim, and per device in ``devices``) is the driver's own JSON object
(see :mod:`.driver`); it is optional, so files written before it existed decode unchanged.
``rebuiltFromSpec`` (optional, only ``true``) marks an entry rebuilt from its CDI spec after
the file was lost: its driver state is unknown, so recovery keeps whatever may be its. Older
readers keep it as an unknown field, so the format version stays 1 and a rollback reads it.
``pods`` (optional too) are the pods the claim was reserved for when it was prepared
(``status.reservedFor``), kept for the per-pod allocation metric after a restart.

The checksum covers the stored bytes, with the checksum's own value replaced by zeros, so
the check never depends on how this version would serialize the data: a newer writer may add
fields and an older reader still accepts the file (unknown fields are kept and written back).

Writes are atomic: temporary file in the same directory, fsync, rename over the old file,
fsync of the directory. A file that fails to decode or to verify is moved aside (never
deleted) and reported; the caller continues with the state it can rebuild. A file of a newer
version is moved aside the same way (``LoadResult.too_new``): this reader cannot know what its
entries mean.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from dra_kubelet_core.errors import (
    CheckpointCorruptError,
    CheckpointError,
    CheckpointTooNewError,
)

__all__ = [
    "CHECKPOINT_VERSION",
    "Checkpoint",
    "CheckpointStore",
    "ClaimState",
    "LoadResult",
    "PodRef",
    "PreparedClaim",
    "PreparedDevice",
    "count_prepared_devices",
    "decode_checkpoint",
    "encode_checkpoint",
    "read_boot_id",
]

log = logging.getLogger(__name__)

CHECKPOINT_VERSION = 1
_ZERO_SUM = "sha256:" + "0" * 64
_CHECKSUM_RE = re.compile(rb'"checksum"\s*:\s*"(sha256:[0-9a-f]{64})"')
JSONObject = dict[str, object]


class ClaimState(StrEnum):
    """Two-phase preparation state of one claim."""

    PREPARE_STARTED = "PrepareStarted"
    PREPARE_COMPLETED = "PrepareCompleted"


@dataclass(frozen=True)
class PreparedDevice:
    """One device prepared for a claim, as returned to the kubelet."""

    request_names: tuple[str, ...]
    pool_name: str
    device_name: str
    cdi_device_ids: tuple[str, ...]
    admin_access: bool = False
    share_id: str | None = None
    #: The driver's JSON-serialisable state of this device (empty: none); never sent to kubelet.
    driver_state: JSONObject = field(default_factory=dict)

    def to_json(self) -> JSONObject:
        """Return the checkpoint representation."""
        out: JSONObject = {
            "requestNames": list(self.request_names),
            "poolName": self.pool_name,
            "deviceName": self.device_name,
            "cdiDeviceIDs": list(self.cdi_device_ids),
        }
        if self.admin_access:
            out["adminAccess"] = True
        if self.share_id is not None:
            out["shareID"] = self.share_id
        if self.driver_state:
            out["driverState"] = self.driver_state
        return out

    @classmethod
    def from_json(cls, data: object, *, where: str) -> PreparedDevice:
        """Decode a checkpoint device entry; ``where`` names it in errors."""
        obj = _as_object(data, where)
        share = obj.get("shareID")
        return cls(
            request_names=tuple(_as_str_list(obj.get("requestNames", []), f"{where}.requestNames")),
            pool_name=_as_str(obj.get("poolName"), f"{where}.poolName"),
            device_name=_as_str(obj.get("deviceName"), f"{where}.deviceName"),
            cdi_device_ids=tuple(
                _as_str_list(obj.get("cdiDeviceIDs", []), f"{where}.cdiDeviceIDs")
            ),
            admin_access=bool(obj.get("adminAccess", False)),
            share_id=None if share is None else _as_str(share, f"{where}.shareID"),
            driver_state=_as_object(obj.get("driverState", {}), f"{where}.driverState"),
        )


@dataclass(frozen=True)
class PodRef:
    """A pod a claim is reserved for (an entry of ``status.reservedFor``)."""

    name: str
    uid: str

    def to_json(self) -> JSONObject:
        """Return the checkpoint representation."""
        return {"name": self.name, "uid": self.uid}

    @classmethod
    def from_json(cls, data: object, *, where: str) -> PodRef:
        """Decode a checkpoint pod entry; ``where`` names it in errors."""
        obj = _as_object(data, where)
        return cls(
            name=_as_str(obj.get("name"), f"{where}.name"),
            uid=_as_str(obj.get("uid"), f"{where}.uid"),
        )


@dataclass(frozen=True)
class PreparedClaim:
    """A claim recorded in the checkpoint. ``extra`` keeps fields written by newer versions."""

    uid: str
    namespace: str
    name: str
    state: ClaimState
    devices: tuple[PreparedDevice, ...]
    extra: JSONObject = field(default_factory=dict)
    #: The driver's JSON-serialisable state of this claim (empty: none).
    driver_state: JSONObject = field(default_factory=dict)
    #: Rebuilt from the claim's CDI spec after the checkpoint was lost: state unknown.
    rebuilt: bool = False
    #: The pods the claim was reserved for when it was prepared.
    pods: tuple[PodRef, ...] = ()

    def to_json(self) -> JSONObject:
        """Return the checkpoint representation."""
        out: JSONObject = dict(self.extra)
        out.update(
            {
                "state": self.state.value,
                "namespace": self.namespace,
                "name": self.name,
                "devices": [d.to_json() for d in self.devices],
            }
        )
        if self.driver_state:
            out["driverState"] = self.driver_state
        if self.rebuilt:
            out["rebuiltFromSpec"] = True
        if self.pods:
            out["pods"] = [p.to_json() for p in self.pods]
        return out

    @classmethod
    def from_json(cls, uid: str, data: object) -> PreparedClaim:
        """Decode one claim entry of the checkpoint."""
        where = f"claims[{uid!r}]"
        obj = _as_object(data, where)
        state_raw = _as_str(obj.get("state"), f"{where}.state")
        try:
            state = ClaimState(state_raw)
        except ValueError as exc:
            raise ValueError(f"{where}.state: unknown value {state_raw!r}") from exc
        devices_raw = obj.get("devices", [])
        if not isinstance(devices_raw, list):
            raise ValueError(f"{where}.devices: expected a list")
        pods_raw = obj.get("pods", [])
        if not isinstance(pods_raw, list):
            raise ValueError(f"{where}.pods: expected a list")
        known = {"state", "namespace", "name", "devices", "driverState", "rebuiltFromSpec", "pods"}
        return cls(
            uid=uid,
            namespace=_as_str(obj.get("namespace"), f"{where}.namespace"),
            name=_as_str(obj.get("name"), f"{where}.name"),
            state=state,
            devices=tuple(
                PreparedDevice.from_json(d, where=f"{where}.devices[{i}]")
                for i, d in enumerate(devices_raw)
            ),
            extra={k: v for k, v in obj.items() if k not in known},
            driver_state=_as_object(obj.get("driverState", {}), f"{where}.driverState"),
            rebuilt=obj.get("rebuiltFromSpec") is True,
            pods=tuple(
                PodRef.from_json(p, where=f"{where}.pods[{i}]") for i, p in enumerate(pods_raw)
            ),
        )


@dataclass
class Checkpoint:
    """The decoded checkpoint: boot ID and claims by UID. ``extra`` keeps unknown fields."""

    boot_id: str
    claims: dict[str, PreparedClaim] = field(default_factory=dict)
    extra: JSONObject = field(default_factory=dict)


def encode_checkpoint(checkpoint: Checkpoint) -> bytes:
    """Serialize ``checkpoint`` with its checksum over the exact bytes written."""
    doc: JSONObject = {"checksum": _ZERO_SUM}
    doc.update(checkpoint.extra)
    doc["version"] = CHECKPOINT_VERSION
    doc["bootID"] = checkpoint.boot_id
    doc["claims"] = {uid: c.to_json() for uid, c in sorted(checkpoint.claims.items())}
    body = (json.dumps(doc, indent=2) + "\n").encode()
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    return body.replace(_ZERO_SUM.encode(), digest.encode(), 1)


def decode_checkpoint(raw: bytes, *, path: str = "<memory>") -> Checkpoint:
    """Verify and decode stored checkpoint bytes.

    Raises:
        CheckpointCorruptError: the bytes fail the integrity check, do not parse, or carry a
            version this reader does not understand.
    """
    match = _CHECKSUM_RE.search(raw)
    if match is None:
        raise CheckpointCorruptError(path, "no checksum field")
    stored = match.group(1).decode()
    zeroed = raw[: match.start(1)] + _ZERO_SUM.encode() + raw[match.end(1) :]
    actual = "sha256:" + hashlib.sha256(zeroed).hexdigest()
    if actual != stored:
        raise CheckpointCorruptError(path, f"checksum mismatch (stored {stored}, actual {actual})")
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise CheckpointCorruptError(path, f"not JSON: {exc}") from exc
    try:
        obj = _as_object(doc, "checkpoint")
        version = obj.get("version")
        if isinstance(version, int) and version > CHECKPOINT_VERSION:
            raise CheckpointTooNewError(
                path,
                f"version {version} is newer than this plugin reads ({CHECKPOINT_VERSION}); "
                "written by a newer release",
            )
        if not isinstance(version, int) or version < 1:
            raise ValueError(f"version: unsupported value {version!r} (this reader: 1)")
        claims_raw = _as_object(obj.get("claims", {}), "claims")
        claims = {uid: PreparedClaim.from_json(uid, c) for uid, c in claims_raw.items()}
        boot_id = _as_str(obj.get("bootID", ""), "bootID")
    except ValueError as exc:
        raise CheckpointCorruptError(path, str(exc)) from exc
    known = {"checksum", "version", "bootID", "claims"}
    extra = {k: v for k, v in obj.items() if k not in known}
    return Checkpoint(boot_id=boot_id, claims=claims, extra=extra)


@dataclass(frozen=True)
class LoadResult:
    """What :meth:`CheckpointStore.load` found.

    ``problem`` is set when the file existed but could not be used; ``moved_to`` is where the
    bad file was moved (``None`` if moving failed too); ``too_new``: the file was written by a
    newer release (its version is past this reader's).
    """

    checkpoint: Checkpoint | None
    problem: str | None = None
    moved_to: Path | None = None
    too_new: bool = False


class CheckpointStore:
    """Reads and atomically writes the checkpoint file."""

    def __init__(self, path: Path, *, durable: bool = True) -> None:
        """Store at ``path``; ``durable=False`` skips fsync (benchmarks on tmpfs only)."""
        self.path = path
        self._durable = durable

    def load(self) -> LoadResult:
        """Read the checkpoint; a missing file is an empty result, a bad one is moved aside."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return LoadResult(checkpoint=None)
        except OSError as exc:
            return self._move_aside(f"unreadable: {exc}")
        try:
            return LoadResult(checkpoint=decode_checkpoint(raw, path=str(self.path)))
        except CheckpointTooNewError as exc:
            return self._move_aside(str(exc), too_new=True)
        except CheckpointCorruptError as exc:
            return self._move_aside(str(exc))

    def peek(self) -> Checkpoint | None:
        """Read without side effects (no lock needed: writes are atomic renames); ``None``
        when the file is absent or unusable (the locked :meth:`load` deals with that)."""
        try:
            return decode_checkpoint(self.path.read_bytes(), path=str(self.path))
        except (OSError, CheckpointCorruptError):
            return None

    def save(self, checkpoint: Checkpoint, *, sync: bool = True) -> None:
        """Write ``checkpoint`` atomically (and durably unless ``sync`` is false).

        ``sync=False`` still replaces the file atomically, so readers and a restarted
        process see the old or the new content; only a power loss may lose the write.

        Raises:
            CheckpointError: the file could not be written; the previous file is unchanged.
        """
        data = encode_checkpoint(checkpoint)
        directory = self.path.parent
        tmp = directory / f".{self.path.name}.tmp-{os.getpid()}"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if self._durable and sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            if self._durable and sync:
                _fsync_dir(directory)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise CheckpointError(str(self.path), f"write failed: {exc}") from exc

    def _move_aside(self, problem: str, *, too_new: bool = False) -> LoadResult:
        label = "newer" if too_new else "corrupt"
        target = self.path.with_name(f"{self.path.name}.{label}-{time.strftime('%Y%m%dT%H%M%S')}")
        n = 0
        while target.exists():
            n += 1
            target = target.with_name(f"{target.name.split('.~')[0]}.~{n}")
        try:
            os.replace(self.path, target)
            if self._durable:
                _fsync_dir(self.path.parent)
        except OSError as exc:
            log.error(
                "checkpoint could not be moved aside",
                extra={
                    "event": "checkpoint_move_failed",
                    "path": str(self.path),
                    "error": str(exc),
                },
            )
            return LoadResult(checkpoint=None, problem=problem, too_new=too_new)
        return LoadResult(checkpoint=None, problem=problem, moved_to=target, too_new=too_new)


def read_boot_id(path: Path = Path("/proc/sys/kernel/random/boot_id")) -> str:
    """Return the kernel's boot ID (changes on every reboot); empty if unavailable."""
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _as_object(value: object, where: str) -> JSONObject:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected an object")
    return {str(k): v for k, v in value.items()}


def _as_str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected a string")
    return value


def _as_str_list(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}: expected a list of strings")
    return list(value)


def count_prepared_devices(
    checkpoint: Checkpoint, device_type: Callable[[PreparedDevice], str]
) -> dict[str, int]:
    """Device type -> how many devices of completely prepared claims have it (NVIDIA's
    ``nvidia_dra_prepared_devices``); ``device_type`` is the driver's labelling."""
    counts: dict[str, int] = {}
    for claim in checkpoint.claims.values():
        if claim.state != ClaimState.PREPARE_COMPLETED:
            continue
        for prepared in claim.devices:
            kind = device_type(prepared)
            counts[kind] = counts.get(kind, 0) + 1
    return counts
