"""The search of one Allocate call: the kube-scheduler's first-fit backtracking.

``allocateOne`` and ``allocateDevice``: every tentative pick updates counters, capacity and
constraints, and every rejected or backtracked pick rolls all of them back.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from . import capacity as cap
from .errors import AllocationTimeoutError, ConstraintError, UpstreamCrashError
from .model import MODE_ALL, DeviceInfo, RequestSpec
from .pools import Pool
from .results import PickedDevice
from .search_state import MAX_RESULTS, Request, SearchState
from .taints import untolerated_taint

# Up to this minor release an "All" request reaching a device with counters crashes upstream.
ALL_COUNTERS_CRASH_UNTIL = 35
# Up to this minor release the second device of an "All" subrequest is looked for in the
# request's first subrequest.
ALL_SUBREQUEST_RESET_UNTIL = 35
_SHARE_NAMESPACE = uuid.UUID("6f1c0b7e-3c2a-4d55-9a56-0d5a1f3e9b21")

FAIL = 0
DONE = 1
EXCEEDED = 2  # errAllocationResultMaxSizeExceeded: backtrack harder


class Search(SearchState):
    """The search over the state of one Allocate call on one node."""

    def run(self) -> int:
        """Search from the first device of the first request of the first claim."""
        return self.one(0, 0, 0, 0, False, 0)

    def one(self, c: int, r: int, s: int, d: int, sub: bool, start: int) -> int:
        """allocateOne: pick device ``d`` of (sub)request ``r``/``s`` of claim ``c``.

        ``start`` is the first candidate position to try (combinations, not
        permutations); ``sub`` is set while one particular subrequest is tried.
        """
        self.invocations += 1
        if not self.invocations & 0x3FF and time.monotonic() > self.deadline:
            raise AllocationTimeoutError(
                f"filter operation aborted: no solution within {self.owner.timeout_s:g}s "
                f"on node {self.node.name}",
                object_ref=self.claims[0].ref if self.claims else "",
            )
        if c >= len(self.claims):
            return DONE
        claim_requests = self.requests[c]
        if r >= len(claim_requests):
            res = self.one(c + 1, 0, 0, 0, False, 0)
            return FAIL if res == EXCEEDED else res
        entry = claim_requests[r]
        data = entry[s]
        if not sub and data.spec.parent is not None:
            all_exceeded = True
            for si in range(len(entry)):
                res = self.one(c, r, si, d, True, 0)
                if res == EXCEEDED:
                    continue
                all_exceeded = False
                if res == DONE:
                    entry[0].selected_sub = si
                    return DONE
            return EXCEEDED if all_exceeded else FAIL
        spec = data.spec
        do_all = spec.mode == MODE_ALL
        if do_all and not data.all_devices:
            return FAIL
        if d >= data.num:
            return self.one(c, r + 1, 0, 0, False, 0)
        if len(self.results[c]) + data.num - d > MAX_RESULTS:
            return EXCEEDED
        if data.all_devices is not None:
            dev, pool = data.all_devices[d]
            undo = self.allocate_device(c, data, dev, pool, must=True)
            if undo is None:
                return FAIL
            # 1.35 drops the subrequest index here: the rest of an "All" subrequest is
            # looked up as the first subrequest of its request (upstream's v1.35.4 does so).
            nxt = 0 if self.features.kube_minor <= ALL_SUBREQUEST_RESET_UNTIL else s
            res = self.one(c, r, nxt, d + 1, sub, 0)
            if res != DONE:
                undo()
            return res
        admin = bool(spec.admin_access)
        consumable = self.features.consumable_capacity
        candidates = self.candidates
        allocating = self.allocating
        allocated = self.state.devices
        # No pruning by the number of candidates left: upstream looks at every device, and
        # a selector failing at run time on one of them is an error, which an early stop
        # would hide (the Go-oracle differential test found this).
        for idx in range(start, len(candidates)):
            dev, pool = candidates[idx]
            dev_id = dev.id
            if admin:
                holders = allocating.get(dev_id)
                if holders and c in holders:
                    continue
            elif dev_id in allocated or allocating.get(dev_id):
                continue
            if not self.selectable(data, dev):
                continue
            if (
                consumable
                and (dev.capacity or spec.capacity_requests)
                and not self._capacity_fits(data, dev)
            ):
                continue
            undo = self.allocate_device(c, data, dev, pool, must=False)
            if undo is None:
                continue
            res = self.one(c, r, s, d + 1, sub, idx + 1 if self.combinations else 0)
            if res == DONE:
                return DONE
            undo()
            if res == EXCEEDED:
                return EXCEEDED
        return FAIL

    def _crash_like_1_35(self, c: int, data: Request, dev: DeviceInfo, *, multi: bool) -> None:
        """Kubernetes 1.35 checks an "All" device's counters through a pool it never set
        (a nil pointer; 1.36 sets it): the scheduler crashes unless the check is skipped
        for a shareable device whose capacity is already in use."""
        if multi and (dev.id in self.state.capacity or dev.id in self.allocating_capacity):
            return
        raise UpstreamCrashError(
            f"request {data.spec.full_name}: Kubernetes 1.35's allocator crashes checking the "
            f"counters of device {'/'.join(dev.id)} for an allocationMode All request",
            object_ref=self.claims[c].ref,
            field=f"spec.devices.requests[{data.spec.index}]",
        )

    def allocate_device(
        self, c: int, data: Request, dev: DeviceInfo, pool: Pool, *, must: bool
    ) -> Callable[[], None] | None:
        """Tentatively pick the device; returns the rollback, or None if it cannot be used."""
        feats = self.features
        spec = data.spec
        multi = feats.consumable_capacity and dev.allow_multiple
        admin = bool(spec.admin_access)
        holders = self.allocating.get(dev.id)
        if not multi and admin and holders and c in holders:
            return None
        if not admin and self.in_use(dev.id):
            return None
        if dev.consumes_counters and not feats.partitionable_devices:
            return None
        if must and dev.consumes_counters and feats.kube_minor <= ALL_COUNTERS_CRASH_UNTIL:
            self._crash_like_1_35(c, data, dev, multi=multi)
        skip_counters = multi and (
            dev.id in self.state.capacity or dev.id in self.allocating_capacity
        )
        use_counters = bool(dev.consumes_counters) and not skip_counters
        # 1.35 reserves the counters first and keeps them when a later check rejects the
        # device (a leak later picks in the same attempt see); undoing a pick returns them,
        # except for a shareable device.
        leaky = feats.counters_by_pool_name
        counted = False
        if leaky and use_counters:
            if not self.counters.try_consume(dev, pool):
                return None
            counted = True
        if feats.device_taints and dev.taints and untolerated_taint(dev, spec.tolerations):
            return None
        base, subname = (spec.parent, spec.name) if spec.parent else (spec.name, "")
        constraints = self.constraints[c]
        # All checks are side-effect free once rolled back, so their order only matters
        # for which one reports. Cheap constraints go first, except for "All" requests:
        # there a constraint failure is an error, which upstream raises only once the
        # device passed its counter check.
        if must and use_counters and not counted:
            if not self.counters.try_consume(dev, pool):
                return None
            counted = True
        for i, con in enumerate(constraints):
            if not con.add(base, subname, dev):
                for prev in constraints[:i]:
                    prev.remove(base, subname, dev)
                if counted and not leaky:
                    self.counters.release(dev, pool)
                if must:
                    raise ConstraintError(
                        f"request {spec.full_name}: cannot add device {'/'.join(dev.id)} "
                        "because a claim constraint would not be satisfied",
                        object_ref=self.claims[c].ref,
                        field=f"spec.devices.constraints[{i}]",
                    )
                return None
        if use_counters and not counted:
            if not self.counters.try_consume(dev, pool):
                for con in constraints:
                    con.remove(base, subname, dev)
                return None
            counted = True
        consumed: cap.Consumption | None = None
        share_id: str | None = None
        if feats.consumable_capacity:
            fit = cap.fits(
                dev,
                spec.capacity_requests,
                allocated=self.state.capacity.get(dev.id),
                allocating=self.allocating_capacity.get(dev.id),
                fractional=feats.fractional_range,
            )
            if not fit:
                for con in constraints:
                    con.remove(base, subname, dev)
                if counted and not leaky:
                    self.counters.release(dev, pool)
                return None
            if multi:
                consumed = cap.consumption(
                    dev, spec.capacity_requests, fractional=feats.fractional_range
                )
                agg = self.allocating_capacity.setdefault(dev.id, {})
                for name, (value, _) in consumed.items():
                    agg[name] = agg.get(name, 0) + value
                self.allocating_shares[dev.id] = self.allocating_shares.get(dev.id, 0) + 1
                share_id = self._share_id(c, spec, dev)
        if not multi:
            self.allocating.setdefault(dev.id, set()).add(c)
        picked = self.results[c]
        picked.append(
            PickedDevice(
                spec=spec,
                device=dev,
                admin_access=admin,
                share_id=share_id,
                consumed=consumed or None,
            )
        )
        n_before = len(picked) - 1

        def undo() -> None:
            """Roll back constraints, capacity, counters and the result entry."""
            for con in constraints:
                con.remove(base, subname, dev)
            if multi:
                if consumed is not None:
                    agg = self.allocating_capacity[dev.id]
                    for name, (value, _) in consumed.items():
                        agg[name] -= value
                    self.allocating_shares[dev.id] -= 1
                    if not self.allocating_shares[dev.id]:
                        del self.allocating_shares[dev.id]
                        del self.allocating_capacity[dev.id]
            else:
                self.allocating[dev.id].discard(c)
            if counted and not (leaky and multi):
                self.counters.release(dev, pool)
            del picked[n_before:]

        return undo

    def _share_id(self, c: int, spec: RequestSpec, dev: DeviceInfo) -> str:
        # Deterministic instead of random so that the same input gives the same output.
        claim = self.claims[c]
        seed = (
            f"{claim.uid or claim.key}/{spec.full_name}/{'/'.join(dev.id)}/{len(self.results[c])}"
        )
        return str(uuid.uuid5(_SHARE_NAMESPACE, seed))
