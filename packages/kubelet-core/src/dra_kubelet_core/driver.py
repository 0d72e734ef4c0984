"""The driver API: what a DRA driver (GPU, compute domain) implements on top of the core.

The core (:class:`~dra_kubelet_core.state.ClaimEngine`) owns the kubelet protocol, the
checkpoint, the CDI spec files, the node lock and the double-preparation guard; a
:class:`Driver` owns what its devices need. For every claim the core:

1. reads the ResourceClaim and picks this driver's allocation results
   (:func:`~dra_kubelet_core.allocated.allocated_devices`);
2. asks :meth:`Driver.plan` (pure, no side effects) for the devices to prepare, the
   initial ``driver_state`` and the driver's own typed plan (``ClaimPlan[P].detail``); a
   :class:`~dra_kubelet_core.errors.ClaimError` is that claim's error for the kubelet
   (``retryable`` for a :class:`ClaimNotReadyError`);
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

Two plugin instances may serve the node at once (a surge rollout), so a driver keeps no
reference counts of its own between calls: whatever a prepare or unprepare decides from
(other claims' sharing, devices held) comes from the checkpoint the core re-read under the node
lock for that call (:attr:`PrepareContext.claims`, the ``claims`` of :meth:`Driver.unprepare`).

A driver is composed with the engine, never subclassed from it: what differs between drivers
is passed in. A :class:`RetryPolicy` makes the engine retry a claim whose prepare failed with
a retryable error (each attempt from step 1, a separate commit, so the node lock is free in
between); :class:`ClaimHooks` let the driver see unprepares begin and end, and stop a retry
loop the kubelet's unprepare made stale.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar

from dra_api_types import ResourceClaim
from dra_kube_client import Backoff

from dra_kubelet_core.allocated import AllocatedDevice
from dra_kubelet_core.allocation_info import DeviceIdentity
from dra_kubelet_core.cdi import CDIKind, ContainerEdits
from dra_kubelet_core.checkpoint import PreparedClaim, PreparedDevice
from dra_kubelet_core.errors import ClaimError, ClaimRef, DeviceInUseError, EmptyDeviceEditsError
from dra_kubelet_core.events import EventRecorder

__all__ = [
    "ClaimEdits",
    "ClaimHooks",
    "ClaimPlan",
    "Driver",
    "DriverIdentity",
    "JSONObject",
    "PlanT",
    "PrepareContext",
    "RetryPolicy",
]

#: A driver-owned JSON-serialisable object stored in the checkpoint.
JSONObject = dict[str, Any]

#: The driver's own plan of a claim (``ClaimPlan[PlanT].detail``), e.g. its sharing step.
PlanT = TypeVar("PlanT")


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


@dataclass(frozen=True, kw_only=True)
class ClaimPlan(Generic[PlanT]):
    """What :meth:`Driver.plan` decided for one claim.

    ``devices`` are returned to the kubelet in this order (request names, pool, device, CDI
    device IDs; each may carry its own ``driver_state``); ``driver_state`` is the claim's.
    ``detail`` is the driver's own plan, handed to :meth:`Driver.prepare` in the same process
    only (never checkpointed: after a crash the driver sees only the ``driver_state``).
    """

    devices: tuple[PreparedDevice, ...]
    driver_state: JSONObject = field(default_factory=dict)
    detail: PlanT


@dataclass(frozen=True)
class ClaimEdits:
    """The CDI container edits of one claim: per device (by device name) and common ones."""

    devices: tuple[tuple[str, ContainerEdits], ...]
    common: tuple[ContainerEdits, ...] = ()

    def injected(
        self, ref: ClaimRef, planned: Sequence[PreparedDevice]
    ) -> tuple[tuple[str, ContainerEdits], ...]:
        """The devices of the claim's CDI spec: those the plan names a CDI device ID for.

        A device the plan gives no CDI device ID (nothing to inject, as NVIDIA's channel on a
        node without an NVLink clique) has no spec entry; with none left the claim has no
        spec at all (the CDI library refuses a spec without devices).

        Raises:
            EmptyDeviceEditsError: a device with a CDI device ID has no edits; the CDI library
                would refuse the whole spec and the container fail to start.
        """
        named = {d.device_name for d in planned if d.cdi_device_ids}
        out: list[tuple[str, ContainerEdits]] = []
        for name, edits in self.devices:
            if name not in named:
                continue
            if edits.is_empty():
                raise EmptyDeviceEditsError(
                    ref,
                    f"device {name} has no container edits: the CDI library refuses such a "
                    "device ('invalid device, empty device edits')",
                )
            out.append((name, edits))
        return tuple(out)


class PrepareContext:
    """Handed to :meth:`Driver.prepare`: the claim's checkpointed entry, every claim of the
    checkpoint as read under the node lock, and a way to record the driver's progress durably
    before the next side effect."""

    def __init__(
        self,
        entry: PreparedClaim,
        save: Callable[[PreparedClaim], Awaitable[None]],
        *,
        claims: Mapping[str, PreparedClaim],
        events: EventRecorder,
    ) -> None:
        """Wrap ``entry``; ``save`` writes a replaced entry to the checkpoint durably;
        ``claims`` is the checkpoint's claims by UID (a live view: it follows the records of
        this claim and of the claims prepared before it in the same group); ``events`` posts
        the plugin's events."""
        self._entry = entry
        self._save = save
        self._claims = claims
        self._events = events

    @property
    def events(self) -> EventRecorder:
        """The plugin's event recorder: a prepare that succeeds but serves the claim less
        than asked says so on the claim, since the kubelet posts events only for errors."""
        return self._events

    @property
    def claims(self) -> Mapping[str, PreparedClaim]:
        """Every checkpointed claim by UID (this one included), read under the node lock:
        what another plugin instance prepared is here too."""
        return self._claims

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


@dataclass(frozen=True)
class RetryPolicy:
    """Retry a prepare that failed with a retryable claim error, within the kubelet's deadline.

    Attempt ``n + 1`` starts ``backoff_s[0] * 2**n`` seconds (at most ``backoff_s[1]``, less up
    to a fifth of it: the workspace's jittered :class:`~dra_kube_client.Backoff`) after attempt
    ``n`` failed, while it would start before ``deadline_s`` from the first; each
    attempt plans and commits anew. ``retry_in_use``: a
    :class:`~dra_kubelet_core.errors.DeviceInUseError` is retried too (the device's other
    claim is about to be unprepared).
    """

    deadline_s: float = 40.0
    backoff_s: tuple[float, float] = (0.25, 3.0)
    retry_in_use: bool = False

    def backoff(self) -> Backoff:
        """A fresh delay sequence for one claim's retries."""
        return Backoff(initial_s=self.backoff_s[0], max_s=self.backoff_s[1])

    def retries(self, exc: ClaimError) -> bool:
        """Whether ``exc`` may go away by waiting."""
        return exc.retryable or (self.retry_in_use and isinstance(exc, DeviceInUseError))


class ClaimHooks(Protocol):
    """A driver's view of the kubelet's unprepares, for the engine to call."""

    def generation(self, claim_uid: str) -> int:
        """How many unprepares the claim has seen; a retry loop started at another
        generation stops with :class:`~dra_kubelet_core.errors.StalePrepareError`."""
        ...

    def begin_unprepare(self, claim_uid: str) -> None:
        """The kubelet unprepares the claim (called before the node lock is taken): a
        prepare planned before now is stale."""
        ...

    async def forget(self, claim_uid: str) -> None:
        """The claim's unprepare succeeded: drop what the driver kept for it outside the
        checkpoint.

        Raises:
            PluginError: the cleanup failed (the unprepare still succeeded).
        """
        ...


class Driver(Protocol[PlanT]):
    """A DRA driver on top of the core. Every method may be called concurrently for
    different claims; the core serializes mutations of one node under its node lock.
    ``PlanT`` is the type of the driver's own plan (:attr:`ClaimPlan.detail`)."""

    @property
    def identity(self) -> DriverIdentity:
        """The driver's name, directories and CDI kind."""
        ...

    def plan(
        self, ref: ClaimRef, claim: ResourceClaim, allocated: Sequence[AllocatedDevice]
    ) -> ClaimPlan[PlanT]:
        """Decide what to prepare (pure: no side effects; it may run for a claim that is
        then refused). ``allocated`` are this driver's results in this node's pool, with the
        opaque configs that apply to each, in precedence order.

        Raises:
            ClaimError: the claim cannot be prepared (names the claim and field).
        """
        ...

    async def prepare(
        self, ref: ClaimRef, plan: ClaimPlan[PlanT], ctx: PrepareContext
    ) -> ClaimEdits:
        """Do the side effects of a planned claim (its entry is durably ``PrepareStarted``)
        and return its CDI edits; record progress with ``ctx.record`` before each side
        effect that must be undone after a crash.

        Raises:
            ClaimError: per-claim failure (``ClaimNotReadyError`` when a retry may succeed).
            PluginError: other failures; the core calls :meth:`unprepare` and drops the entry.
        """
        ...

    async def unprepare(self, entry: PreparedClaim, *, claims: Mapping[str, PreparedClaim]) -> None:
        """Undo the side effects of a checkpointed entry (idempotent; the entry may be
        ``PrepareStarted`` with partial ``driver_state``). ``claims`` are the checkpoint's
        claims by UID read under the node lock (``entry`` included), for reference counts.

        Raises:
            PluginError: the undo failed; the entry is kept and the kubelet retries.
        """
        ...

    async def recover(self, entries: Mapping[str, PreparedClaim]) -> None:
        """After the reboot check at start, and again under the node lock while serving until
        it succeeds: ``entries`` are every checkpointed claim by UID (``PrepareStarted`` ones
        included); repair or destroy leftovers of other claims. Never destroy what an entry
        marked :attr:`~PreparedClaim.rebuilt` may use (its state is unknown; its spec still
        serves). Each leftover is tried even when an earlier one failed.

        Raises:
            RecoveryError: leftovers that could not be removed (named); the core logs it,
                records an event and calls again later while the plugin serves.
        """
        ...

    def device_type(self, device: PreparedDevice) -> str:
        """The ``device_type`` label of a prepared device in ``nvidia_dra_prepared_devices``."""
        ...

    def device_identity(
        self, claim: PreparedClaim, device: PreparedDevice
    ) -> DeviceIdentity | None:
        """The GPU (and MIG instance) a prepared device is, for
        ``nvidia_dra_device_allocation_info``; ``None``: not a GPU (no series)."""
        ...
