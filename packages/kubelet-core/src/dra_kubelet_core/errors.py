"""Exceptions of the kubelet plugin.

Tree::

    PluginError
    ├── ConfigurationError        bad flag/env value (names the setting)
    ├── ClaimError                a claim cannot be prepared (names namespace/name/uid and field)
    │   ├── ClaimNotFoundError    the API server has no such claim (or its UID differs)
    │   ├── ClaimNotAllocatedError
    │   ├── DeviceConfigError     opaque config invalid or of the wrong type for a device
    │   ├── UnsupportedConfigError  a valid config this plugin cannot apply yet (sharing)
    │   ├── UnknownDeviceError    the allocation names a device this node does not have
    │   ├── DeviceInUseError      a device is already prepared for another claim
    │   ├── DeviceNodeMissingError  a required /dev node is absent (real backend)
    │   ├── StalePrepareError     the claim was unprepared while its prepare was pending
    │   └── EmptyDeviceEditsError  a device to inject has no container edits (CDI refuses it)
    ├── CheckpointError           checkpoint cannot be read or written
    │   └── CheckpointCorruptError  stored bytes fail the integrity check or do not parse
    │       └── CheckpointTooNewError  written by a newer plugin in a format this one lacks
    ├── CDIError                  a CDI spec cannot be rendered, validated or written
    ├── RecoveryError             recovery left leftovers it could not remove (retried later)
    └── LockTimeoutError          the node-wide prepare lock was not acquired in time

API-server failures are :class:`dra_kube_client.KubeApiError` (not a PluginError: the one
Kubernetes client of the workspace raises them for every package).

Every error that concerns a claim carries its reference so that the per-claim message
returned to the kubelet says which object and field is at fault.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClaimRef:
    """Namespace, name and UID of a ResourceClaim, as the kubelet sends them."""

    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"ResourceClaim {self.namespace}/{self.name} (uid {self.uid})"


class PluginError(Exception):
    """Base class of every error raised by this package."""


class ConfigurationError(PluginError):
    """A setting (flag or environment variable) has an invalid value."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(f"{setting}: {message}")
        self.setting = setting


class ClaimError(PluginError):
    """Preparing or unpreparing one claim failed; reported to the kubelet for that claim only.

    ``retryable`` (a class attribute) tells whether the kubelet's retry may succeed without
    anything changing on the claim (e.g. a daemon not ready yet).
    """

    retryable = False

    def __init__(self, claim: ClaimRef, message: str, *, field: str | None = None) -> None:
        where = f" field {field}" if field else ""
        super().__init__(f"{claim}{where}: {message}")
        self.claim = claim
        self.field = field
        self.reason = type(self).__name__.removesuffix("Error") or "Claim"


class ClaimNotFoundError(ClaimError):
    """The claim does not exist on the API server, or exists with a different UID."""


class ClaimNotReadyError(ClaimError):
    """Something the claim needs is not ready yet (a daemon, a device); the retry may work."""

    retryable = True


class ClaimNotAllocatedError(ClaimError):
    """The claim has no allocation (or none for this driver)."""


class DeviceConfigError(ClaimError):
    """An opaque device configuration is invalid or does not fit the device it targets."""


class UnsupportedConfigError(ClaimError):
    """A valid configuration asks for something this plugin version cannot apply."""


class UnknownDeviceError(ClaimError):
    """The allocation names a device this node does not publish."""


class DeviceInUseError(ClaimError):
    """A device is already prepared for another claim (last line of defence)."""


class DeviceNodeMissingError(ClaimError):
    """A device node the container needs does not exist on the host."""


class StalePrepareError(ClaimError):
    """The claim was unprepared while this prepare was pending (NVIDIA #1162)."""


class EmptyDeviceEditsError(ClaimError):
    """A device the kubelet would hand to the runtime has no container edits: the CDI library
    refuses such a spec ("invalid device, empty device edits") and the container would fail
    with "unresolvable CDI devices"; a device with nothing to inject names no CDI device."""


class CheckpointError(PluginError):
    """The checkpoint file could not be read or written."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"checkpoint {path}: {message}")
        self.path = path


class CheckpointCorruptError(CheckpointError):
    """The checkpoint's stored bytes fail the integrity check or cannot be decoded."""


class CheckpointTooNewError(CheckpointCorruptError):
    """The checkpoint carries a format version newer than this plugin reads (a rollback)."""


class CDIError(PluginError):
    """A CDI spec could not be rendered, validated or written."""


class RecoveryError(PluginError):
    """Recovery could not remove some leftovers (a busy MIG device, a GPU the ``nvidia``
    driver does not take back); the message names each. The engine retries while serving."""


class LockTimeoutError(PluginError):
    """The node-wide prepare/unprepare lock was not acquired in time."""
