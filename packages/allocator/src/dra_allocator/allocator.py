"""The structured allocator: the kube-scheduler's first-fit backtracking search.

For one node and the claims of one pod, devices are tried in a fixed order (pools by
(driver, pool), slices by name, devices in slice order), one request after the other,
one claim after the other. Within a request only combinations are tried (each further
device comes after the previous one), across requests and claims every order. The first
complete solution wins. Every tentative pick updates counters, capacity and constraints,
and every rejected or backtracked pick rolls all of them back.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import capacity as cap
from .constraints import Constraint, build_constraint
from .counters import CounterSets, CounterTracker
from .errors import (
    AllocationTimeoutError,
    ConstraintError,
    FeatureDisabledError,
    InvalidPoolError,
    SelectorError,
    TooManyDevicesError,
    UnknownDeviceClassError,
    UnsupportedRequestError,
    UpstreamCrashError,
)
from .features import STABLE, Features
from .model import MODE_ALL, MODE_EXACT, ClaimInfo, ClassInfo, DeviceID, DeviceInfo, RequestSpec
from .nodes import NodeInfo
from .pools import Pool
from .quantities import Amount
from .results import PickedDevice, build_allocation
from .selectors import SelectorCompileFailure, SelectorEngine, evaluate
from .state import AllocatedState
from .taints import untolerated_taint

MAX_RESULTS = 32
# Up to this minor release an "All" request reaching a device with counters crashes upstream.
ALL_COUNTERS_CRASH_UNTIL = 35
# Up to this minor release upstream searches permutations, not combinations, per request.
PERMUTATIONS_UNTIL = 35
# Up to this minor release the second device of an "All" subrequest is looked for in the
# request's first subrequest.
ALL_SUBREQUEST_RESET_UNTIL = 35
DEFAULT_TIMEOUT_S = 10.0
_SHARE_NAMESPACE = uuid.UUID("6f1c0b7e-3c2a-4d55-9a56-0d5a1f3e9b21")

_FAIL = 0
_DONE = 1
_EXCEEDED = 2  # errAllocationResultMaxSizeExceeded: backtrack harder


@dataclass(frozen=True, slots=True)
class Allocated:
    """Every claim got devices: one ``status.allocation`` (v1 JSON) per claim."""

    node: str
    allocations: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Unsatisfiable:
    """No solution on this node. Not an error: another node may work."""

    node: str
    invalid_pools: list[str] = field(default_factory=list)


Outcome = Allocated | Unsatisfiable


@dataclass(slots=True)
class _Request:
    """requestData: one request without subrequests, or one subrequest."""

    spec: RequestSpec
    cls: ClassInfo
    num: int
    all_devices: list[tuple[DeviceInfo, Pool]] | None
    exprs: list[tuple[str | None, str, int]]  # (expression, owner ref, index)
    match_key: str
    selected_sub: int = 0


class Allocator:
    """Allocates claims on a node from pools, like the kube-scheduler's allocator.

    The instance is reusable across nodes and calls; selector results are cached on the
    devices themselves.
    """

    def __init__(
        self,
        *,
        classes: Mapping[str, ClassInfo],
        engine: SelectorEngine,
        features: Features | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.classes = classes
        self.engine = engine
        self.features = features or Features()
        self.timeout_s = timeout_s
        # Keyed by pool ID (by pool name at 1.35), across nodes, as upstream's allocator.
        self.counter_cache: dict[object, tuple[int, CounterSets, bool]] = {}
        self.last_invocations = 0
        # False for 1.35, whose allocator tries every permutation within a request (so a
        # shareable device can serve one request twice; 1.36 added the start position),
        # and to measure that search as a baseline.
        self.combinations_only = self.features.kube_minor > PERMUTATIONS_UNTIL

    def validate(self, claims: Sequence[ClaimInfo]) -> None:
        """Raise the node-independent input errors (unknown class, disabled feature...).

        The scheduler raises these on every node; checking them once up front keeps them
        errors even when every node is skipped as full.
        """
        _Search(self, claims, NodeInfo(name=""), [], AllocatedState()).validate()

    def allocate(
        self,
        claims: Sequence[ClaimInfo],
        *,
        node: NodeInfo,
        pools: Sequence[Pool],
        state: AllocatedState,
    ) -> Outcome:
        """Find devices for all claims on the node, or report that there are none.

        Raises ``AllocationError`` subclasses for input the scheduler rejects too.
        """
        search = _Search(self, claims, node, pools, state)
        search.validate()
        result = search.run()
        self.last_invocations = search.invocations
        if result != _DONE:
            return Unsatisfiable(
                node=node.name,
                invalid_pools=[f"{p}: {p.invalid_reason}" for p in pools if p.invalid],
            )
        return Allocated(node=node.name, allocations=search.build_results())


class _Search:
    """State of one Allocate call on one node."""

    def __init__(
        self,
        owner: Allocator,
        claims: Sequence[ClaimInfo],
        node: NodeInfo,
        pools: Sequence[Pool],
        state: AllocatedState,
    ) -> None:
        self.owner = owner
        self.features = owner.features
        self.engine = owner.engine
        self.claims = claims
        self.node = node
        self.pools = pools
        self.state = state
        self.candidates: list[tuple[DeviceInfo, Pool]] = [
            (dev, pool) for pool in pools for dev in pool.candidates
        ]
        self.requests: list[list[list[_Request]]] = []
        self.constraints: list[list[Constraint]] = []
        self.allocating: dict[DeviceID, set[int]] = {}
        self.allocating_capacity: dict[DeviceID, dict[str, Amount]] = {}
        self.allocating_shares: dict[DeviceID, int] = {}
        self.counters = CounterTracker(
            state, owner.counter_cache, by_pool_name=self.features.counters_by_pool_name
        )
        self.results: list[list[PickedDevice]] = [[] for _ in claims]
        self.invocations = 0
        self.deadline = time.monotonic() + owner.timeout_s
        # Upstream's stable variant tries the devices of a request in every order
        # (the same first solution, found more slowly: its deadline comes sooner).
        self.combinations = owner.combinations_only and self.features.variant != STABLE

    # ---- validation (Allocate's preamble) ----

    def validate(self) -> None:
        """Allocate's preamble: per-request data, device counts, constraint trackers."""
        feats = self.features
        for claim in self.claims:
            per_claim: list[list[_Request]] = []
            min_devices = 0
            for req in claim.requests:
                if req.first_available and not feats.prioritized_list:
                    raise FeatureDisabledError(
                        f"request {req.name}: has subrequests, but the DRAPrioritizedList "
                        "feature is disabled",
                        object_ref=claim.ref,
                        field=f"spec.devices.requests[{req.first_available[0].index}]"
                        ".firstAvailable",
                    )
                # A variant without consumable capacity does not know capacity requests: it
                # ignores them.
                if not feats.consumable_capacity and feats.variant_knows_capacity:
                    for spec in (req.exact, *req.first_available):
                        if spec is not None and spec.capacity_requests is not None:
                            raise FeatureDisabledError(
                                f"request {spec.full_name}: has capacity requests, but the "
                                "DRAConsumableCapacity feature is disabled",
                                object_ref=claim.ref,
                                field=f"{spec.field_path}.capacity",
                            )
                if req.first_available:
                    entry = [self._validate_request(claim, s) for s in req.first_available]
                    min_devices += min(r.num for r in entry)
                elif req.exact is not None:
                    entry = [self._validate_request(claim, req.exact)]
                    min_devices += entry[0].num
                else:
                    raise UnsupportedRequestError(
                        f"request {req.name}: missing device class name "
                        "(unsupported request type?)",
                        object_ref=claim.ref,
                        field="spec.devices.requests",
                    )
                per_claim.append(entry)
            if min_devices > MAX_RESULTS:
                raise TooManyDevicesError(
                    f"number of requested devices {min_devices} exceeds the claim limit of "
                    f"{MAX_RESULTS}",
                    object_ref=claim.ref,
                    field="spec.devices.requests",
                )
            self.requests.append(per_claim)
            constraints: list[Constraint] = []
            for i, con_spec in enumerate(claim.constraints):
                built = build_constraint(
                    con_spec, kube_minor=feats.kube_minor, sets=feats.list_attributes
                )
                if built is None or (
                    con_spec.distinct_attribute and not feats.variant_knows_capacity
                ):
                    raise UnsupportedRequestError(
                        "empty constraint (unsupported constraint type?)",
                        object_ref=claim.ref,
                        field=f"spec.devices.constraints[{i}]",
                    )
                constraints.append(built)
            self.constraints.append(constraints)

    def _validate_request(self, claim: ClaimInfo, spec: RequestSpec) -> _Request:
        for i, expr in enumerate(spec.selectors):
            if expr is None:
                raise UnsupportedRequestError(
                    f"request {spec.full_name}, selector #{i}: CEL expression empty "
                    "(unsupported selector type?)",
                    object_ref=claim.ref,
                    field=f"{spec.field_path}.selectors[{i}]",
                )
        if spec.admin_access is not None and not self.features.admin_access:
            raise FeatureDisabledError(
                f"request {spec.full_name}: admin access is requested, but the feature is disabled",
                object_ref=claim.ref,
                field=f"{spec.field_path}.adminAccess",
            )
        if not spec.class_name:
            raise UnsupportedRequestError(
                f"request {spec.full_name}: missing device class name (unsupported request type?)",
                object_ref=claim.ref,
                field=f"{spec.field_path}.deviceClassName",
            )
        cls = self.owner.classes.get(spec.class_name)
        if cls is None:
            raise UnknownDeviceClassError(
                f"request {spec.full_name}: could not retrieve device class {spec.class_name}: "
                f'deviceclass.resource.k8s.io "{spec.class_name}" not found',
                object_ref=claim.ref,
                field=f"{spec.field_path}.deviceClassName",
            )
        exprs = [(e, f"DeviceClass {cls.name}", i) for i, e in enumerate(cls.selectors)]
        exprs += [(e, claim.ref, i) for i, e in enumerate(spec.selectors)]
        data = _Request(
            spec=spec,
            cls=cls,
            num=0,
            all_devices=None,
            exprs=exprs,
            match_key="\x00".join(e or "" for e, _, _ in exprs),
        )
        if spec.mode == MODE_EXACT:
            data.num = spec.count
        elif spec.mode == MODE_ALL:
            data.all_devices = []
            for pool in self.pools:
                if pool.incomplete:
                    raise InvalidPoolError(
                        f"request {spec.full_name}: asks for all devices, but resource pool "
                        f"{pool} is currently being updated",
                        object_ref=claim.ref,
                        field=f"{spec.field_path}.allocationMode",
                    )
                if pool.invalid:
                    raise InvalidPoolError(
                        f"request {spec.full_name}: asks for all devices, but resource pool "
                        f"{pool} is currently invalid",
                        object_ref=claim.ref,
                        field=f"{spec.field_path}.allocationMode",
                    )
                for dev in pool.candidates:
                    if not self.selectable(data, dev):
                        continue
                    if self.features.consumable_capacity and not self._capacity_fits(
                        data, dev, static=self.features.kube_minor >= 37
                    ):
                        continue
                    data.all_devices.append((dev, pool))
            data.num = len(data.all_devices)
        else:
            raise UnsupportedRequestError(
                f"request {spec.full_name}: unsupported count mode {spec.mode}",
                object_ref=claim.ref,
                field=f"{spec.field_path}.allocationMode",
            )
        return data

    # ---- device checks ----

    def selectable(self, data: _Request, dev: DeviceInfo) -> bool:
        """isSelectable: class selectors, then request selectors (cached per device)."""
        if dev.binding_conditions and not self.features.binding_and_status:
            return False
        cache = dev.selector_cache
        cached = cache.get(data.match_key)
        if cached is not None and not isinstance(cached, Exception):
            return cached
        for expr, ref, index in data.exprs:
            if not self._evaluate(expr, ref, index, dev):
                cache[data.match_key] = False
                return False
        cache[data.match_key] = True
        return True

    def _evaluate(self, expr: str | None, ref: str, index: int, dev: DeviceInfo) -> bool:
        if expr is None:
            raise UnsupportedRequestError(
                f"selector #{index}: CEL expression empty (unsupported selector type?)",
                object_ref=ref,
                field=f"spec.selectors[{index}]",
            )
        try:
            cached = evaluate(self.engine, expr, dev)
        except SelectorCompileFailure as exc:
            raise SelectorError(
                f"selector #{index}: CEL compile error: {exc}",
                object_ref=ref,
                field=_selector_field(ref, index),
            ) from exc
        if isinstance(cached, Exception):
            raise SelectorError(
                f"selector #{index} on device {'/'.join(dev.id)}: CEL runtime error: {cached}",
                object_ref=ref,
                field=_selector_field(ref, index),
            )
        return cached

    def _capacity_fits(self, data: _Request, dev: DeviceInfo, *, static: bool = False) -> bool:
        """Whether the request's capacity fits the device.

        ``static`` (the "All" devices of Kubernetes 1.37+) checks the device's capacity
        alone: a device blocked by what others consume stays among "all" devices, so the
        request fails in allocateDevice instead of silently asking for fewer devices.
        """
        fit = cap.fits(
            dev,
            data.spec.capacity_requests,
            allocated=None if static else self.state.capacity.get(dev.id),
            allocating=None if static else self.allocating_capacity.get(dev.id),
            fractional=self.features.fractional_range,
        )
        return bool(fit)

    def in_use(self, dev_id: DeviceID) -> bool:
        """Held by an allocated claim or picked for one of this pod's claims."""
        return dev_id in self.state.devices or bool(self.allocating.get(dev_id))

    # ---- the search ----

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
            return _DONE
        claim_requests = self.requests[c]
        if r >= len(claim_requests):
            res = self.one(c + 1, 0, 0, 0, False, 0)
            return _FAIL if res == _EXCEEDED else res
        entry = claim_requests[r]
        data = entry[s]
        if not sub and data.spec.parent is not None:
            all_exceeded = True
            for si in range(len(entry)):
                res = self.one(c, r, si, d, True, 0)
                if res == _EXCEEDED:
                    continue
                all_exceeded = False
                if res == _DONE:
                    entry[0].selected_sub = si
                    return _DONE
            return _EXCEEDED if all_exceeded else _FAIL
        spec = data.spec
        do_all = spec.mode == MODE_ALL
        if do_all and not data.all_devices:
            return _FAIL
        if d >= data.num:
            return self.one(c, r + 1, 0, 0, False, 0)
        if len(self.results[c]) + data.num - d > MAX_RESULTS:
            return _EXCEEDED
        if data.all_devices is not None:
            dev, pool = data.all_devices[d]
            undo = self.allocate_device(c, data, dev, pool, must=True)
            if undo is None:
                return _FAIL
            # 1.35 drops the subrequest index here: the rest of an "All" subrequest is
            # looked up as the first subrequest of its request (upstream's v1.35.4 does so).
            nxt = 0 if self.features.kube_minor <= ALL_SUBREQUEST_RESET_UNTIL else s
            res = self.one(c, r, nxt, d + 1, sub, 0)
            if res != _DONE:
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
            if res == _DONE:
                return _DONE
            undo()
            if res == _EXCEEDED:
                return _EXCEEDED
        return _FAIL

    def _crash_like_1_35(self, c: int, data: _Request, dev: DeviceInfo, *, multi: bool) -> None:
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
        self, c: int, data: _Request, dev: DeviceInfo, pool: Pool, *, must: bool
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

    # ---- results ----

    def build_results(self) -> list[dict[str, Any]]:
        """One ``status.allocation`` per claim from the solution found."""
        out = []
        for c, claim in enumerate(self.claims):
            classes: list[tuple[ClassInfo, str]] = []
            selected: dict[int, RequestSpec] = {}
            for r, entry in enumerate(self.requests[c]):
                chosen = entry[entry[0].selected_sub] if entry[0].spec.parent else entry[0]
                classes.append((chosen.cls, chosen.spec.full_name))
                if chosen.spec.parent:
                    selected[r] = chosen.spec
            out.append(
                build_allocation(
                    claim,
                    self.results[c],
                    classes=classes,
                    selected_subrequests=selected,
                    node=self.node,
                    binding=self.features.binding_and_status,
                    drop_covering_requests=self.features.kube_minor >= 37,
                )
            )
        return out


def _selector_field(ref: str, index: int) -> str:
    if ref.startswith("DeviceClass"):
        return f"spec.selectors[{index}].cel.expression"
    return f"selectors[{index}].cel.expression"
