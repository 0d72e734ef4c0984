"""Prepare and unprepare claims: the driver-agnostic engine behind the DRA services.

Every mutation happens under the node-wide lock and follows the two-phase protocol:

1. record the claim as ``PrepareStarted`` with its devices and the driver's ``driver_state``
   (checkpoint written durably);
2. run the driver's side effects (:meth:`Driver.prepare`) and write the claim's CDI spec;
3. record ``PrepareCompleted``.

Unprepare demotes the entry to ``PrepareStarted``, removes the CDI spec, undoes the driver's
side effects (:meth:`Driver.unprepare`), then removes the entry. So at every instant a CDI
spec implies a checkpoint entry, and a completed entry implies its spec; a crash anywhere is
repaired by the kubelet's retry. The checkpoint is
re-read under the lock for every operation, because during a rolling update another plugin
instance shares it; the driver gets what it read (:attr:`PrepareContext.claims`, the
``claims`` of :meth:`Driver.unprepare`) instead of keeping counts of its own. A lost
checkpoint and leftovers recovery cannot remove are :mod:`~dra_kubelet_core.recovery`'s.

Claims arriving together are group-committed: their ``PrepareStarted`` entries are written in
one durable checkpoint write and their ``PrepareCompleted`` entries in another.

The engine is composed with its driver (:class:`~dra_kubelet_core.driver.Driver`), an
optional :class:`~dra_kubelet_core.driver.RetryPolicy` (retryable claim errors retried
within a deadline, each attempt a separate commit) and optional
:class:`~dra_kubelet_core.driver.ClaimHooks` (told when unprepares begin and end).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Generic

from dra_kube_client import KubeApiError

from dra_kubelet_core.allocated import allocated_devices
from dra_kubelet_core.allocation_info import reserved_pods
from dra_kubelet_core.cdi_store import CDIStore
from dra_kubelet_core.checkpoint import (
    Checkpoint,
    CheckpointStore,
    ClaimState,
    PodRef,
    PreparedClaim,
    PreparedDevice,
)
from dra_kubelet_core.checkpoint_metrics import publish_checkpoint
from dra_kubelet_core.claim_source import ClaimParseError, ClaimSource
from dra_kubelet_core.claims import PrepareOutcome, UnprepareOutcome
from dra_kubelet_core.driver import (
    ClaimHooks,
    ClaimPlan,
    Driver,
    PlanT,
    PrepareContext,
    RetryPolicy,
)
from dra_kubelet_core.errors import (
    ClaimError,
    ClaimNotFoundError,
    ClaimRef,
    DeviceInUseError,
    PluginError,
    StalePrepareError,
)
from dra_kubelet_core.events import EventRecorder
from dra_kubelet_core.logs import bind
from dra_kubelet_core.metrics import PluginMetrics
from dra_kubelet_core.node_lock import NodeLock
from dra_kubelet_core.recovery import Recovery

__all__ = ["ClaimEngine"]

log = logging.getLogger(__name__)


@dataclass
class _PendingPrepare(Generic[PlanT]):
    """A planned claim waiting for the next group commit."""

    ref: ClaimRef
    plan: ClaimPlan[PlanT]
    pods: tuple[PodRef, ...]
    future: asyncio.Future[tuple[PreparedDevice, ...]] = field(init=False)


_DONE = ClaimState.PREPARE_COMPLETED


class ClaimEngine(Generic[PlanT]):
    """The node's prepared claims of one driver; implements
    :class:`~dra_kubelet_core.claims.ClaimDriver` for the DRA services."""

    def __init__(
        self,
        *,
        driver: Driver[PlanT],
        pool_name: str,
        claims: ClaimSource,
        checkpoints: CheckpointStore,
        cdi: CDIStore,
        lock: NodeLock,
        boot_id: str,
        events: EventRecorder,
        metrics: PluginMetrics,
        retry: RetryPolicy | None = None,
        hooks: ClaimHooks | None = None,
    ) -> None:
        """Wire the engine to its driver and collaborators; call :meth:`start` before
        serving. ``pool_name`` is the node's pool (one per node, named after it);
        ``retry``: retry retryable claim errors (``None``: every error goes to the kubelet at
        once); ``hooks``: the driver's view of unprepares."""
        self.driver = driver
        self.retry = retry
        self.hooks = hooks
        self.driver_name = driver.identity.name
        self.pool_name = pool_name
        self._claims = claims
        self._store = checkpoints
        self._cdi = cdi
        self._lock = lock
        self._boot_id = boot_id
        self._events = events
        self._metrics = metrics
        self._pending: list[_PendingPrepare[PlanT]] = []
        self._committer: asyncio.Task[None] | None = None
        self._recovery = Recovery(
            driver_name=self.driver_name,
            events=events,
            store=checkpoints,
            cdi=cdi,
            pool_name=pool_name,
        )

    @property
    def recovery_due(self) -> bool:
        """Whether the driver's recovery runs again at the next stale-claim cleanup."""
        return self._recovery.due

    # ------------------------------------------------------------------ checkpoint access
    async def _load(self) -> Checkpoint:
        """Read the checkpoint (under the lock); a bad or newer file is replaced by entries
        rebuilt from the CDI specs (:meth:`Recovery.replace_lost`)."""
        result = self._store.load()
        if result.problem is None:
            return result.checkpoint or Checkpoint(boot_id=self._boot_id)
        self._metrics.checkpoint_problems.inc()
        return await self._recovery.replace_lost(result, boot_id=self._boot_id)

    async def _save(self, checkpoint: Checkpoint, *, sync: bool = True) -> None:
        """Write the checkpoint; a durable write runs in a thread so that, while it waits for
        the disk, the event loop keeps reading and planning the claims of the next group."""
        checkpoint.boot_id = self._boot_id
        if sync:
            await asyncio.to_thread(self._store.save, checkpoint, sync=True)
        else:
            self._store.save(checkpoint, sync=False)
        publish_checkpoint(self._metrics, checkpoint, self.driver, pool_name=self.pool_name)

    async def _drop(self, checkpoint: Checkpoint, uid: str) -> None:
        """Remove a claim's spec, undo the driver's side effects, then remove its entry
        (caller saves). The entry stays when the undo fails, so the retry sees it."""
        self._cdi.remove(uid)
        entry = checkpoint.claims.get(uid)
        if entry is not None:
            await self.driver.unprepare(entry, claims=checkpoint.claims)
            # A rebuilt entry has no recorded state: recovery removes what was kept for it.
            self._recovery.due = self._recovery.due or entry.rebuilt
        checkpoint.claims.pop(uid, None)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Recover at start: reboot check, leftover CDI specs, the driver's recovery (every
        checkpointed entry handed over; a failure is retried while serving), stale claims."""
        async with self._lock.hold():
            checkpoint = await self._load()
            if checkpoint.boot_id and checkpoint.boot_id != self._boot_id:
                log.warning(
                    "node rebooted since the checkpoint was written; prepared state discarded",
                    extra={
                        "event": "checkpoint_reboot",
                        "old_boot_id": checkpoint.boot_id,
                        "claims": sorted(checkpoint.claims),
                    },
                )
                for uid in list(checkpoint.claims):
                    await self._drop_after_reboot(checkpoint, uid)
            removed = self._cdi.remove_stale(set(checkpoint.claims))
            await self._recovery.run(self.driver, checkpoint.claims)
            if removed:
                log.info(
                    "removed CDI specs of unknown claims",
                    extra={"event": "cdi_leftovers_removed", "claims": removed},
                )
            await self._save(checkpoint)
        await self.cleanup_stale()

    async def _drop_after_reboot(self, checkpoint: Checkpoint, uid: str) -> None:
        """Drop an entry of the previous boot; if its undo fails the entry goes anyway (the
        reboot reset what it held) and recovery removes what is left."""
        try:
            await self._drop(checkpoint, uid)
        except Exception as exc:
            log.warning(
                "undo of a claim of the previous boot failed; recovery removes its leftovers",
                extra={"event": "reboot_undo_failed", "claim_uid": uid, "error": str(exc)},
            )
            checkpoint.claims.pop(uid, None)

    async def cleanup_stale(self) -> list[str]:
        """Run recovery again if it is due (it failed, or rebuilt entries existed), then
        drop ``PrepareStarted`` claims whose ResourceClaim is gone or has a new UID."""
        if self._recovery.due:
            async with self._lock.hold():
                await self._recovery.run(self.driver, (await self._load()).claims)
        async with self._lock.hold():
            started = [
                c
                for c in (await self._load()).claims.values()
                if c.state is ClaimState.PREPARE_STARTED and c.name
            ]
        dropped: list[str] = []
        for entry in started:
            if not await self._is_gone(entry):
                continue
            async with self._lock.hold():
                checkpoint = await self._load()
                current = checkpoint.claims.get(entry.uid)
                if current is None or current.state is not ClaimState.PREPARE_STARTED:
                    continue
                await self._drop(checkpoint, entry.uid)
                await self._save(checkpoint)
            dropped.append(entry.uid)
            log.info(
                "removed stale half-prepared claim",
                extra={
                    "event": "stale_claim_removed",
                    "claim_uid": entry.uid,
                    "claim_namespace": entry.namespace,
                    "claim_name": entry.name,
                },
            )
        return dropped

    async def _is_gone(self, entry: PreparedClaim) -> bool:
        """True only when the API server says the claim no longer exists (or was recreated)."""
        if not entry.name:
            return False
        try:
            claim = await self._claims.get(entry.namespace, entry.name)
        except (PluginError, KubeApiError, ClaimParseError) as exc:
            log.warning(
                "cannot check whether a claim still exists",
                extra={"event": "claim_check_failed", "claim_uid": entry.uid, "error": str(exc)},
            )
            return False
        return claim is None or (claim.metadata.uid or "") != entry.uid

    # ------------------------------------------------------------------ prepare
    async def prepare_claims(self, claims: Sequence[ClaimRef]) -> dict[str, PrepareOutcome]:
        """Prepare each claim; errors are per claim."""
        outcomes = await asyncio.gather(*(self._prepare_reported(ref) for ref in claims))
        return {ref.uid: outcome for ref, outcome in zip(claims, outcomes, strict=True)}

    async def _prepare_reported(self, ref: ClaimRef) -> PrepareOutcome:
        with bind(claim_uid=ref.uid, claim_namespace=ref.namespace, claim_name=ref.name):
            try:
                devices = await self.prepare(ref)
            except ClaimError as exc:
                log.warning(
                    str(exc),
                    extra={
                        "event": "prepare_failed",
                        "reason": exc.reason,
                        "retryable": exc.retryable,
                    },
                )
                return PrepareOutcome(error=str(exc), reason=exc.reason, retryable=exc.retryable)
            except (PluginError, KubeApiError, ClaimParseError) as exc:
                reason = type(exc).__name__.removesuffix("Error")
                log.error(str(exc), extra={"event": "prepare_failed", "reason": reason})
                return PrepareOutcome(error=f"{ref}: {exc}", reason=reason)
            except Exception as exc:
                log.exception("unexpected error", extra={"event": "prepare_failed"})
                return PrepareOutcome(error=f"{ref}: internal error: {exc}", reason="Internal")
            log.info(
                "claim prepared",
                extra={"event": "prepared", "devices": [d.device_name for d in devices]},
            )
            return PrepareOutcome(devices=devices)

    async def prepare(self, ref: ClaimRef) -> tuple[PreparedDevice, ...]:
        """Prepare one claim and return its devices (the same ones on every repeat call).

        With a :class:`RetryPolicy`, an error it retries is retried until its deadline:

        1. the claim's generation is read from the hooks (0 without);
        2. one attempt plans and commits the claim (:meth:`prepare_once`);
        3. on an error the policy retries, the engine waits the backoff (doubling, capped,
           jittered);
        4. if an unprepare changed the generation meanwhile, the loop stops; else step 2.

        Raises:
            ClaimError: this claim cannot be prepared (the message names object and field);
                ``StalePrepareError`` when it was unprepared while a retry waited.
            PluginError: checkpoint, CDI or API-server failures.
        """
        policy = self.retry
        if policy is None:
            return await self.prepare_once(ref)
        generation = self._generation(ref.uid)
        deadline = time.monotonic() + policy.deadline_s
        backoff = policy.backoff()
        while True:
            try:
                return await self.prepare_once(ref)
            except ClaimError as exc:
                delay = backoff.next_delay()
                if not policy.retries(exc) or time.monotonic() + delay > deadline:
                    raise
                log.info(
                    "prepare retried",
                    extra={"event": "prepare_retry", "reason": exc.reason, "retry_in_s": delay},
                )
            await asyncio.sleep(delay)
            if self._generation(ref.uid) != generation:
                raise StalePrepareError(ref, "unprepared while the prepare was retrying")

    def _generation(self, claim_uid: str) -> int:
        return self.hooks.generation(claim_uid) if self.hooks is not None else 0

    async def prepare_once(self, ref: ClaimRef) -> tuple[PreparedDevice, ...]:
        """One attempt of :meth:`prepare`: plan the claim and commit it (no retry).

        Raises:
            ClaimError: this claim cannot be prepared (the message names object and field).
            PluginError: checkpoint, CDI or API-server failures.
        """
        # Fast path without the lock: a repeated call for a prepared claim.
        peeked = self._store.peek()
        done = self._completed(peeked.claims.get(ref.uid) if peeked is not None else None)
        if done is not None:
            return done
        claim = await self._claims.get(ref.namespace, ref.name)
        if claim is None:
            raise ClaimNotFoundError(ref, "not found on the API server")
        allocated = allocated_devices(
            claim, ref, driver_name=self.driver_name, pool_name=self.pool_name
        )
        plan = self.driver.plan(ref, claim, allocated)
        return await self._commit(_PendingPrepare(ref=ref, plan=plan, pods=reserved_pods(claim)))

    async def _commit(self, item: _PendingPrepare[PlanT]) -> tuple[PreparedDevice, ...]:
        """Queue one claim for the next group commit and wait for its outcome.

        Claims that arrive while a commit holds the lock are committed together: one
        durable ``PrepareStarted`` write and one ``PrepareCompleted`` write for the whole
        group instead of two per claim, which is what bounds latency under concurrency.
        """
        item.future = asyncio.get_running_loop().create_future()
        self._pending.append(item)
        if self._committer is None or self._committer.done():
            self._committer = asyncio.get_running_loop().create_task(self._commit_pending())
            self._committer.add_done_callback(_report_aborted_commit)
        return await asyncio.shield(item.future)

    async def _commit_pending(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                async with self._lock.hold():
                    await self._commit_batch(batch)
            except BaseException as exc:
                for item in batch:
                    if not item.future.done():
                        item.future.set_exception(
                            exc if isinstance(exc, Exception) else RuntimeError(str(exc))
                        )
                if not isinstance(exc, Exception):
                    raise

    async def _commit_batch(self, batch: list[_PendingPrepare[PlanT]]) -> None:
        checkpoint = await self._load()
        accepted: list[_PendingPrepare[PlanT]] = []
        for item in batch:
            ref = item.ref
            done = self._completed(checkpoint.claims.get(ref.uid))
            if done is not None:
                item.future.set_result(done)
                continue
            try:
                # The guard also sees the claims accepted earlier in this batch.
                await self._guard(checkpoint, ref, item.plan.devices)
            except PluginError as exc:
                item.future.set_exception(exc)
                continue
            checkpoint.claims[ref.uid] = PreparedClaim(
                uid=ref.uid,
                namespace=ref.namespace,
                name=ref.name,
                state=ClaimState.PREPARE_STARTED,
                devices=item.plan.devices,
                driver_state=dict(item.plan.driver_state),
                pods=item.pods,
            )
            accepted.append(item)
        if not accepted:
            return
        await self._save(checkpoint)
        completed: list[_PendingPrepare[PlanT]] = []
        for item in accepted:
            uid = item.ref.uid
            try:
                await self._prepare_one(checkpoint, item)
            except Exception as exc:
                await self._undo_failed(checkpoint, uid)
                item.future.set_exception(exc)
                continue
            checkpoint.claims[uid] = replace(
                checkpoint.claims[uid], state=ClaimState.PREPARE_COMPLETED
            )
            completed.append(item)
        await self._save(checkpoint)
        for item in completed:
            item.future.set_result(checkpoint.claims[item.ref.uid].devices)

    async def _prepare_one(self, checkpoint: Checkpoint, item: _PendingPrepare[PlanT]) -> None:
        """The driver's side effects, then the claim's spec (the entry is durably started)."""
        uid = item.ref.uid

        async def save(entry: PreparedClaim) -> None:
            checkpoint.claims[uid] = entry
            await self._save(checkpoint)

        ctx = PrepareContext(
            checkpoint.claims[uid], save, claims=checkpoint.claims, events=self._events
        )
        edits = await self.driver.prepare(item.ref, item.plan, ctx)
        checkpoint.claims[uid] = ctx.entry
        devices = edits.injected(item.ref, item.plan.devices)
        if not devices:
            self._cdi.remove(uid)
            return
        spec = self._cdi.kind.render_claim_spec(claim_uid=uid, devices=devices, common=edits.common)
        self._cdi.write(uid, spec)

    async def _undo_failed(self, checkpoint: Checkpoint, uid: str) -> None:
        """A prepare failed after its entry was started: undo and drop it; if the undo fails
        too, the entry stays ``PrepareStarted`` for the retry and the stale cleanup."""
        try:
            await self._drop(checkpoint, uid)
        except Exception as exc:
            log.error(
                "undo of a failed prepare failed; entry kept for the retry",
                extra={"event": "prepare_undo_failed", "claim_uid": uid, "error": str(exc)},
            )

    def _completed(self, entry: PreparedClaim | None) -> tuple[PreparedDevice, ...] | None:
        if entry is None or entry.state is not ClaimState.PREPARE_COMPLETED:
            return None
        if not self._cdi.exists(entry.uid):
            log.warning(
                "prepared claim lost its CDI spec; preparing again",
                extra={"event": "cdi_spec_missing"},
            )
            return None
        return entry.devices

    async def _guard(
        self, checkpoint: Checkpoint, ref: ClaimRef, prepared: Sequence[PreparedDevice]
    ) -> None:
        """Last line of defence: no device prepared for two claims (admin access and shared
        devices exempt). An entry whose claim is gone from the API server is cleaned up."""
        wanted = {d.device_name for d in prepared if not d.admin_access and d.share_id is None}
        for uid, other in sorted(checkpoint.claims.items()):
            if uid == ref.uid:
                continue
            held = {
                d.device_name for d in other.devices if not d.admin_access and d.share_id is None
            }
            overlap = sorted(wanted & held)
            if not overlap:
                continue
            if await self._is_gone(other):
                log.warning(
                    "dropping prepared claim that no longer exists (force-deleted pod?)",
                    extra={"event": "stale_claim_removed", "other_claim_uid": uid},
                )
                await self._drop(checkpoint, uid)
                await self._save(checkpoint)
                continue
            owner = f"{other.namespace}/{other.name}" if other.name else "an unknown claim"
            raise DeviceInUseError(
                ref,
                f"device(s) {', '.join(overlap)} already prepared for ResourceClaim "
                f"{owner} (uid {uid}); refusing to prepare them twice",
                field="status.allocation.devices.results",
            )

    # ------------------------------------------------------------------ unprepare
    async def unprepare_claims(self, claims: Sequence[ClaimRef]) -> dict[str, UnprepareOutcome]:
        """Unprepare each claim (one checkpoint write for all); unknown claims succeed.

        With hooks: each claim's pending prepares are made stale first
        (:meth:`ClaimHooks.begin_unprepare`), and the driver forgets each claim whose
        unprepare succeeded after (:meth:`ClaimHooks.forget`).
        """
        hooks = self.hooks
        if hooks is not None:
            for ref in claims:
                hooks.begin_unprepare(ref.uid)
        out = await self._unprepare_claims(claims)
        if hooks is not None:
            for ref in claims:
                if not out[ref.uid].error:
                    await hooks.forget(ref.uid)
        return out

    async def _unprepare_claims(self, claims: Sequence[ClaimRef]) -> dict[str, UnprepareOutcome]:
        out: dict[str, UnprepareOutcome] = {}
        try:
            async with self._lock.hold():
                checkpoint = await self._load()
                entries = {r.uid: checkpoint.claims.get(r.uid) for r in claims}
                demote = [e for e in entries.values() if e is not None and e.state is _DONE]
                if demote:
                    # Demote first, so "completed" always implies "spec present", even if we
                    # die between removing the spec and removing the entry. No fsync: a
                    # process crash keeps the page cache, and after a power loss the new boot
                    # ID discards all prepared state anyway.
                    for e in demote:
                        checkpoint.claims[e.uid] = replace(e, state=ClaimState.PREPARE_STARTED)
                    await self._save(checkpoint, sync=False)
                for ref in claims:
                    with bind(
                        claim_uid=ref.uid, claim_namespace=ref.namespace, claim_name=ref.name
                    ):
                        out[ref.uid] = await self._unprepare_one(checkpoint, ref)
                if any(e is not None for e in entries.values()):
                    await self._save(checkpoint)
        except PluginError as exc:
            reason = type(exc).__name__.removesuffix("Error")
            log.error(str(exc), extra={"event": "unprepare_failed", "reason": reason})
            # Nothing is known to be durable: the kubelet retries all of them (idempotent).
            return {r.uid: UnprepareOutcome(error=f"{r}: {exc}", reason=reason) for r in claims}
        return out

    async def _unprepare_one(self, checkpoint: Checkpoint, ref: ClaimRef) -> UnprepareOutcome:
        try:
            await self._drop(checkpoint, ref.uid)
        except PluginError as exc:
            reason = type(exc).__name__.removesuffix("Error")
            log.error(str(exc), extra={"event": "unprepare_failed", "reason": reason})
            return UnprepareOutcome(error=f"{ref}: {exc}", reason=reason)
        except Exception as exc:
            log.exception("unexpected error", extra={"event": "unprepare_failed"})
            return UnprepareOutcome(error=f"{ref}: internal error: {exc}", reason="Internal")
        log.info("claim unprepared", extra={"event": "unprepared"})
        return UnprepareOutcome()

    async def unprepare(self, ref: ClaimRef) -> None:
        """Unprepare one claim.

        Raises:
            PluginError: the spec, host files or checkpoint could not be updated.
        """
        outcome = (await self.unprepare_claims([ref]))[ref.uid]
        if outcome.error:
            raise PluginError(outcome.error)

    async def prepared_claims(self) -> dict[str, PreparedClaim]:
        """A snapshot of the checkpoint's claims (for diagnostics and tests)."""
        async with self._lock.hold():
            return dict((await self._load()).claims)


def _report_aborted_commit(task: asyncio.Task[None]) -> None:
    """Log a group commit that died of a ``BaseException`` (its claims already got it), so
    the task's exception is retrieved here rather than logged when it is collected."""
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error(
            "group commit aborted",
            extra={"event": "commit_aborted", "error_type": type(exc).__name__},
        )
