"""Recovery of the claim engine: what it does when the checkpoint is lost, and the driver's
clean-up of leftovers, retried while the plugin serves until it succeeds.

Two rules keep running workloads safe:

- **A CDI spec still serves.** When the checkpoint cannot be used (corrupt, unreadable, or of
  a newer format after a rollback) it is moved aside with a Warning event, and every claim
  that has a spec gets an entry again (:func:`rebuild_from_specs`), marked
  :attr:`~dra_kubelet_core.checkpoint.PreparedClaim.rebuilt`: its driver state is unknown, so
  the driver's recovery keeps whatever may be that claim's (MIG devices, MPS daemons, GPUs on
  ``vfio-pci``) instead of destroying it as a leftover.
- **A leftover that cannot be removed never stops the plugin.** :class:`Recovery` runs the
  driver's :meth:`~dra_kubelet_core.driver.Driver.recover`; a failure is logged, evented
  (once per distinct failure) and marks recovery due, and the engine runs it again under the
  node lock at each stale-claim cleanup while serving. Recovery is due too while rebuilt
  entries exist, so what is kept for them is cleaned up once they are unprepared.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from dra_kubelet_core.cdi_store import CDIStore
from dra_kubelet_core.checkpoint import (
    Checkpoint,
    CheckpointStore,
    ClaimState,
    LoadResult,
    PreparedClaim,
    PreparedDevice,
)
from dra_kubelet_core.driver import Driver, PlanT
from dra_kubelet_core.errors import CheckpointError, PluginError
from dra_kubelet_core.events import EventRecorder

__all__ = ["Recovery", "checkpoint_problem_event", "rebuild_from_specs"]

log = logging.getLogger(__name__)


def rebuild_from_specs(cdi: CDIStore, *, pool_name: str) -> dict[str, PreparedClaim]:
    """An entry for every claim with a CDI spec: its devices (from the spec's device names),
    ``PrepareStarted`` (the kubelet's next prepare redoes it with full data) and ``rebuilt``.
    A spec that cannot be read still gets an entry without devices: it is still served."""
    claims: dict[str, PreparedClaim] = {}
    for uid in sorted(cdi.claim_uids()):
        try:
            doc = json.loads(cdi.path_for(uid).read_bytes())
            names = [str(d["name"]) for d in doc.get("devices", [])]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            names = []
        prefix = f"{uid}-"
        devices = tuple(
            PreparedDevice(
                request_names=(),
                pool_name=pool_name,
                device_name=n[len(prefix) :],
                cdi_device_ids=(cdi.kind.device_id(uid, n[len(prefix) :]),),
            )
            for n in names
            if n.startswith(prefix)
        )
        claims[uid] = PreparedClaim(
            uid=uid,
            namespace="",
            name="",
            state=ClaimState.PREPARE_STARTED,
            devices=devices,
            rebuilt=True,
        )
    return claims


def checkpoint_problem_event(
    result: LoadResult, *, driver_name: str, path: str, rebuilt: int
) -> tuple[str, str]:
    """The Warning event (reason, message) for a checkpoint that could not be used (pure)."""
    moved = f"moved to {result.moved_to}" if result.moved_to else "could not be moved aside"
    reason = "CheckpointTooNew" if result.too_new else "CheckpointCorrupt"
    cause = (
        "written by a newer release of the plugin (rolled back?)" if result.too_new else "unusable"
    )
    return reason, (
        f"{driver_name} kubelet plugin: checkpoint {path} is {cause} ({result.problem}); "
        f"{moved}; state rebuilt from {rebuilt} CDI spec(s), whose resources are kept"
    )


class Recovery:
    """Replaces a lost checkpoint, runs the driver's recovery and remembers whether it must
    run again."""

    def __init__(
        self,
        *,
        driver_name: str,
        events: EventRecorder,
        store: CheckpointStore,
        cdi: CDIStore,
        pool_name: str,
    ) -> None:
        """Events go to ``events``, naming ``driver_name``; ``store`` is the checkpoint,
        ``cdi`` the claim specs of the node's pool ``pool_name``."""
        self._driver_name = driver_name
        self._events = events
        self._store = store
        self._cdi = cdi
        self._pool_name = pool_name
        self._last_error: str | None = None
        #: Whether the next stale-claim cleanup must run recovery again.
        self.due = False

    async def replace_lost(self, result: LoadResult, *, boot_id: str) -> Checkpoint:
        """The checkpoint could not be used (``result``, already moved aside): report it and
        return, saved if possible, an entry rebuilt from each CDI spec (the caller holds the
        node lock)."""
        claims = rebuild_from_specs(self._cdi, pool_name=self._pool_name)
        reason, message = checkpoint_problem_event(
            result, driver_name=self._driver_name, path=str(self._store.path), rebuilt=len(claims)
        )
        await self._events.node_warning(reason=reason, message=message)
        rebuilt = Checkpoint(boot_id=boot_id, claims=claims)
        try:
            self._store.save(rebuilt)
        except CheckpointError as exc:
            # Keep serving: the next mutation retries the write and fails only its claims.
            log.error(str(exc), extra={"event": "checkpoint_rebuild_unsaved"})
        return rebuilt

    async def run(self, driver: Driver[PlanT], entries: Mapping[str, PreparedClaim]) -> bool:
        """Call ``driver.recover`` (the caller holds the node lock); never raises. Returns
        whether every leftover was dealt with."""
        try:
            await driver.recover(dict(entries))
        except Exception as exc:
            self.due = True
            problem = str(exc) or type(exc).__name__
            extra = {"event": "recovery_incomplete", "error": problem}
            if isinstance(exc, PluginError):
                log.error("recovery left leftovers; retried while serving", extra=extra)
            else:
                log.exception("recovery failed; retried while serving", extra=extra)
            if problem != self._last_error:
                await self._events.node_warning(
                    reason="RecoveryIncomplete",
                    message=(
                        f"{self._driver_name} kubelet plugin: leftovers not removed ({problem}); "
                        "retried periodically while the plugin serves"
                    ),
                )
            self._last_error = problem
            return False
        if self._last_error is not None:
            log.info("recovery completed", extra={"event": "recovery_completed"})
        self._last_error = None
        # What is kept for rebuilt entries is cleaned up by a later run once they are gone.
        self.due = any(e.rebuilt for e in entries.values())
        return True
