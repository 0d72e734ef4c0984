"""The driver API: what a DRA driver (GPU, compute domain) implements on top of the core.

The core (:class:`~dra_kubelet_plugin.core.state.ClaimEngine`) owns the kubelet protocol, the
checkpoint, the CDI spec files, the node lock and the double-preparation guard; a
:class:`Driver` owns what its devices need. For every claim the core:

1. reads the ResourceClaim and picks this driver's allocation results
   (:func:`~dra_kubelet_plugin.core.allocated.allocated_devices`);
2. asks :meth:`Driver.plan` (pure, no side effects) for the devices to prepare and the
   initial ``driver_state``; a :class:`~dra_kubelet_plugin.core.errors.ClaimError` is that
   claim's error for the kubelet (``retryable`` for a :class:`ClaimNotReadyError`);
3. records the claim ``PrepareStarted``, with the plan's ``driver_state`` per claim and per
   device, durably in the checkpoint;
4. calls :meth:`Driver.prepare`, which does the side effects (MIG instances, daemons, host
   files) and may record progress with :meth:`PrepareContext.record` before each one, and
   returns the claim's CDI container edits;
5. writes the claim's CDI spec and records ``PrepareCompleted``.

If :meth:`Driver.prepare` (or the spec write) fails, the core calls :meth:`Driver.unprepare`
with the checkpointed entry and drops it. Unprepare removes the spec, calls
:meth:`Driver.unprepare` (idempotent: it may see the same entry twice after a crash), then
drops the entry. At start :meth:`Driver.recover` gets every checkpointed entry, including the
``PrepareStarted`` ones a crash left, to repair or destroy leftovers of claims it does not see.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from dra_api_types import ResourceClaim

from dra_kubelet_plugin.core.allocated import AllocatedDevice
from dra_kubelet_plugin.core.cdi import CDIKind, ContainerEdits
from dra_kubelet_plugin.core.checkpoint import PreparedClaim, PreparedDevice
from dra_kubelet_plugin.core.errors import ClaimRef

__all__ = [
    "ClaimEdits",
    "ClaimPlan",
    "Driver",
    "DriverIdentity",
    "JSONObject",
    "PrepareContext",
]

#: A driver-owned JSON-serialisable object stored in the checkpoint.
JSONObject = dict[str, Any]


@dataclass(frozen=True)
class DriverIdentity:
    """Who the driver is on the node.

    ``name`` is the DRA driver name (``gpu.nvidia.com``); it also names the plugin directory
    (``<plugins dir>/<name>/``, holding ``dra.sock``, ``checkpoint.json``, ``prepare.lock``)
    and the registration socket (``<registrar dir>/<name>-reg.sock``). ``cdi`` is the vendor
    and class of the claim specs (``k8s.gpu.nvidia.com`` / ``claim``).
    """

    name: str
    cdi: CDIKind
    #: ``source.component`` of the Node events the plugin records.
    event_component: str = ""

    @property
    def component(self) -> str:
        """The event source component (``<name>-kubelet-plugin`` unless set)."""
        return self.event_component or f"{self.name}-kubelet-plugin"


@dataclass(frozen=True)
class ClaimPlan:
    """What :meth:`Driver.plan` decided for one claim.

    ``devices`` are returned to the kubelet in this order (request names, pool, device, CDI
    device IDs; each may carry its own ``driver_state``); ``driver_state`` is the claim's.
    ``context`` is handed to :meth:`Driver.prepare` in the same process only (never
    checkpointed: after a crash the driver sees only the ``driver_state``).
    """

    devices: tuple[PreparedDevice, ...]
    driver_state: JSONObject = field(default_factory=dict)
    context: object = None


@dataclass(frozen=True)
class ClaimEdits:
    """The CDI container edits of one claim: per device (by device name) and common ones."""

    devices: tuple[tuple[str, ContainerEdits], ...]
    common: tuple[ContainerEdits, ...] = ()


class PrepareContext:
    """Handed to :meth:`Driver.prepare`: the claim's checkpointed entry, and a way to record
    the driver's progress durably before the next side effect."""

    def __init__(
        self, entry: PreparedClaim, save: Callable[[PreparedClaim], Awaitable[None]]
    ) -> None:
        """Wrap ``entry``; ``save`` writes a replaced entry to the checkpoint durably."""
        self._entry = entry
        self._save = save

    @property
    def entry(self) -> PreparedClaim:
        """The claim's current checkpoint entry (``PrepareStarted``)."""
        return self._entry

    async def record(
        self,
        *,
        driver_state: JSONObject | None = None,
        device_states: Mapping[str, JSONObject] | None = None,
    ) -> None:
        """Replace the claim's ``driver_state`` and/or devices' (by device name) and write
        the checkpoint durably; a crash after this returns leaves the new state for
        :meth:`Driver.recover` and :meth:`Driver.unprepare`.

        Raises:
            CheckpointError: the write failed (the prepare fails; the driver's undo runs).
        """
        devices = self._entry.devices
        if device_states:
            devices = tuple(
                replace(d, driver_state=dict(device_states[d.device_name]))
                if d.device_name in device_states
                else d
                for d in devices
            )
        entry = replace(
            self._entry,
            devices=devices,
            driver_state=(
                dict(driver_state) if driver_state is not None else self._entry.driver_state
            ),
        )
        await self._save(entry)
        self._entry = entry


class Driver(Protocol):
    """A DRA driver on top of the core. Every method may be called concurrently for
    different claims; the core serializes mutations of one node under its node lock."""

    @property
    def identity(self) -> DriverIdentity:
        """The driver's name, directories and CDI kind."""
        ...

    def plan(
        self, ref: ClaimRef, claim: ResourceClaim, allocated: Sequence[AllocatedDevice]
    ) -> ClaimPlan:
        """Decide what to prepare (pure: no side effects; it may run for a claim that is
        then refused). ``allocated`` are this driver's results in this node's pool, with the
        opaque configs that apply to each, in precedence order.

        Raises:
            ClaimError: the claim cannot be prepared (names the claim and field).
        """
        ...

    async def prepare(self, ref: ClaimRef, plan: ClaimPlan, ctx: PrepareContext) -> ClaimEdits:
        """Do the side effects of a planned claim (its entry is durably ``PrepareStarted``)
        and return its CDI edits; record progress with ``ctx.record`` before each side
        effect that must be undone after a crash.

        Raises:
            ClaimError: per-claim failure (``ClaimNotReadyError`` when a retry may succeed).
            PluginError: other failures; the core calls :meth:`unprepare` and drops the entry.
        """
        ...

    async def unprepare(self, entry: PreparedClaim) -> None:
        """Undo the side effects of a checkpointed entry (idempotent; the entry may be
        ``PrepareStarted`` with partial ``driver_state``).

        Raises:
            PluginError: the undo failed; the entry is kept and the kubelet retries.
        """
        ...

    async def recover(self, entries: Mapping[str, PreparedClaim]) -> None:
        """At start, after the reboot check: ``entries`` are every checkpointed claim by UID
        (``PrepareStarted`` ones included); repair or destroy leftovers of other claims."""
        ...

    def device_type(self, device: PreparedDevice) -> str:
        """The ``device_type`` label of a prepared device in ``nvidia_dra_prepared_devices``."""
        ...
