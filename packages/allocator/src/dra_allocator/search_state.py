"""The state of one Allocate call on one node: the preamble's per-request data, the device
checks the search makes, and the allocation results assembled from its solution.

:class:`dra_allocator.search.Search` searches over this state; the preamble
(:meth:`SearchState.validate`) raises the input errors the scheduler raises.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dra_api_types import Amount

from . import capacity as cap
from .constraints import Constraint, build_constraint
from .counters import CounterSets, CounterTracker
from .errors import (
    AllocationError,
    FeatureDisabledError,
    InvalidPoolError,
    SelectorError,
    TooManyDevicesError,
    UnknownDeviceClassError,
    UnsupportedRequestError,
)
from .features import STABLE, Features
from .model import MODE_ALL, MODE_EXACT, ClaimInfo, ClassInfo, DeviceID, DeviceInfo, RequestSpec
from .nodes import NodeInfo
from .pools import Pool
from .results import PickedDevice, build_allocation
from .selectors import SelectorCompileFailure, SelectorEngine, evaluate
from .state import AllocatedState

MAX_RESULTS = 32


@dataclass(slots=True)
class Request:
    """requestData: one request without subrequests, or one subrequest."""

    spec: RequestSpec
    cls: ClassInfo
    num: int
    all_devices: list[tuple[DeviceInfo, Pool]] | None
    exprs: list[tuple[str | None, str, int]]  # (expression, owner ref, index)
    match_key: str
    selected_sub: int = 0


class SearchOwner(Protocol):
    """What a search reads from the :class:`dra_allocator.allocator.Allocator` that runs it."""

    classes: Mapping[str, ClassInfo]
    engine: SelectorEngine
    features: Features
    timeout_s: float
    counter_cache: dict[object, tuple[int, CounterSets, bool]]
    combinations_only: bool


class SearchState:
    """State of one Allocate call on one node."""

    def __init__(
        self,
        owner: SearchOwner,
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
        self.requests: list[list[list[Request]]] = []
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
            per_claim: list[list[Request]] = []
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

    def _validate_request(self, claim: ClaimInfo, spec: RequestSpec) -> Request:
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
        data = Request(
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

    def selectable(self, data: Request, dev: DeviceInfo) -> bool:
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

    def _capacity_fits(self, data: Request, dev: DeviceInfo, *, static: bool = False) -> bool:
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

    def short_of_devices(self) -> bool:
        """Whether the search (after :meth:`validate`) can only end unsatisfiable, and
        without an error, so that running it tells nothing more.

        True when some request has, in each of its alternatives, fewer free devices that
        pass the request's own checks (selectors, capacity) than it asks for, and none of
        the free devices raises on any request's checks: the search looks at no other
        devices, so it can neither find a solution nor meet an error. Counters, constraints
        and taints only reject more, so they are not looked at. Requests for "All" devices
        or with admin access look at more than free devices: never proven short.
        """
        short = False
        for claim_requests in self.requests:
            for entry in claim_requests:
                if any(d.spec.mode != MODE_EXACT or d.spec.admin_access for d in entry):
                    return False
                try:
                    usable = [self._free_usable(data) for data in entry]
                except AllocationError:
                    return False  # the search may meet this error: it must be run
                short = short or all(n < data.num for n, data in zip(usable, entry, strict=True))
        return short

    def _free_usable(self, data: Request) -> int:
        """How many picks the free devices allow the request, by its selectors and capacity
        check (raises what the search would raise on them)."""
        consumable = self.features.consumable_capacity
        held = self.state.devices
        usable = 0
        for dev, _ in self.candidates:
            if dev.id in held or not self.selectable(data, dev):
                continue
            if (
                consumable
                and (dev.capacity or data.spec.capacity_requests)
                and not self._capacity_fits(data, dev)
            ):
                continue
            # A shareable device may be picked again for the same request (where the search
            # tries permutations): it alone may be enough. The other devices are still
            # looked at, for the errors.
            usable += data.num if consumable and dev.allow_multiple else 1
        return usable

    def in_use(self, dev_id: DeviceID) -> bool:
        """Held by an allocated claim or picked for one of this pod's claims."""
        return dev_id in self.state.devices or bool(self.allocating.get(dev_id))

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
