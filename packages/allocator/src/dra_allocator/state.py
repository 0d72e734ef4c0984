"""What is already allocated in the cluster: devices, shared capacity, owners."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from dra_api_types import AllocationResult, Amount

from .claim_changes import ClaimChanges
from .model import ClaimInfo, DeviceID


@dataclass(slots=True)
class AllocatedState:
    """Devices held by allocated claims (admin-access results excluded, as upstream).

    ``consumable`` is DRAConsumableCapacity: with it off the scheduler lists every
    non-admin result as an exclusively held device, shares included (ListAllAllocatedDevices
    instead of GatherAllocatedState).
    """

    devices: set[DeviceID] = field(default_factory=set)
    shared_devices: set[DeviceID] = field(default_factory=set)
    capacity: dict[DeviceID, dict[str, Amount]] = field(default_factory=dict)
    owners: dict[DeviceID, list[str]] = field(default_factory=lambda: defaultdict(list))
    # Bumped on every change so derived caches (available counters) know to refresh.
    version: int = 0
    consumable: bool = True
    # How many results hold each device exclusively / shared, and how many shared results
    # consume each capacity name: what :meth:`remove_allocation` needs to undo exactly.
    _exclusive: Counter[DeviceID] = field(default_factory=Counter)
    _shared: Counter[DeviceID] = field(default_factory=Counter)
    _capacity_names: Counter[tuple[DeviceID, str]] = field(default_factory=Counter)

    @classmethod
    def from_claims(cls, claims: Iterable[ClaimInfo], *, consumable: bool = True) -> AllocatedState:
        """Collect the devices of every claim that has ``status.allocation``."""
        state = cls(consumable=consumable)
        for claim in claims:
            if claim.allocation is not None:
                state.add_allocation(claim.key, claim.allocation)
        return state

    def add_allocation(self, owner: str, allocation: AllocationResult) -> None:
        """Record an allocation result as held by ``owner``."""
        for result in allocation.devices.results or []:
            if result.admin_access:
                continue
            dev_id: DeviceID = (result.driver, result.pool, result.device)
            self.owners[dev_id].append(owner)
            if result.share_id and self.consumable:
                self.shared_devices.add(dev_id)
                self._shared[dev_id] += 1
                agg = self.capacity.setdefault(dev_id, {})
                for name, value in (result.consumed_capacity or {}).items():
                    agg[name] = agg.get(name, 0) + value.amount()
                    self._capacity_names[(dev_id, name)] += 1
            else:
                self.devices.add(dev_id)
                self._exclusive[dev_id] += 1
        self.version += 1

    def remove_allocation(self, owner: str, allocation: AllocationResult) -> None:
        """Undo :meth:`add_allocation` of the same ``owner`` and ``allocation``: the state is
        then as if it had never been added (a device another result holds stays held)."""
        for result in allocation.devices.results or []:
            if result.admin_access:
                continue
            dev_id: DeviceID = (result.driver, result.pool, result.device)
            owners = self.owners[dev_id]
            owners.remove(owner)
            if not owners:
                del self.owners[dev_id]
            if result.share_id and self.consumable:
                agg = self.capacity[dev_id]
                for name, value in (result.consumed_capacity or {}).items():
                    agg[name] = agg[name] - value.amount()
                    self._capacity_names[(dev_id, name)] -= 1
                    if not self._capacity_names[(dev_id, name)]:
                        del self._capacity_names[(dev_id, name)]
                        del agg[name]
                self._shared[dev_id] -= 1
                if not self._shared[dev_id]:
                    del self._shared[dev_id]
                    self.shared_devices.discard(dev_id)
                    del self.capacity[dev_id]
            else:
                self._exclusive[dev_id] -= 1
                if not self._exclusive[dev_id]:
                    del self._exclusive[dev_id]
                    self.devices.discard(dev_id)
        self.version += 1

    def copy(self) -> AllocatedState:
        """An independent copy (changing one leaves the other as it was)."""
        return AllocatedState(
            devices=set(self.devices),
            shared_devices=set(self.shared_devices),
            capacity={d: dict(c) for d, c in self.capacity.items()},
            owners=defaultdict(list, {d: list(o) for d, o in self.owners.items()}),
            version=self.version,
            consumable=self.consumable,
            _exclusive=Counter(self._exclusive),
            _shared=Counter(self._shared),
            _capacity_names=Counter(self._capacity_names),
        )

    def is_allocated(self, dev_id: DeviceID) -> bool:
        """Whether the device consumes its counters (allocated exclusively or shared)."""
        return dev_id in self.devices or dev_id in self.shared_devices


class StateCache:
    """The allocated state of the last claims asked for, updated by the claims that changed.

    For a caller that builds a cluster from every snapshot of a slowly changing set of
    claims (the allocation controller, several times a second while pods are created):
    rebuilding the state from all claims is most of building a cluster at thousands of
    claims. Claims are compared by identity, and their allocation too (a committed claim
    gets a new allocation): a claim whose allocation is not the one added last time is taken
    out and added again. The cache holds the claims and allocations it added, so their
    identities cannot be reused by other objects while it is in use.

    Given the snapshot's :class:`~.claim_changes.ClaimChanges` that follow the last claims
    asked for, only the changed claims are looked at; a claim's allocation is then taken as
    it was when the claim was added (a caller that commits allocations to its claims passes
    no changes, and is compared by identity as above).

    The state returned is the cache's own: a caller that changes it must copy it first
    (:class:`~dra_allocator.cluster.Cluster` does on commit).
    """

    def __init__(self) -> None:
        """An empty cache."""
        self._state: AllocatedState | None = None
        # id(claim) -> (the claim, the allocation added for it)
        self._held: dict[int, tuple[ClaimInfo, AllocationResult]] = {}
        # The snapshot whose claims the state is of (ClaimChanges.serial), if known.
        self._serial: int | None = None

    def state_for(
        self,
        claims: Iterable[ClaimInfo],
        *,
        consumable: bool,
        changes: ClaimChanges | None = None,
    ) -> AllocatedState:
        """The state :meth:`AllocatedState.from_claims` gives for ``claims``, which are the
        claims of the snapshot ``changes`` describes (when given)."""
        state = self._state
        if state is None or state.consumable != consumable:
            state = AllocatedState(consumable=consumable)
            self._state, self._held, self._serial = state, {}, None
        if changes is not None and changes.follows(self._serial):
            self._apply(state, changes)
        else:
            self._compare(state, claims)
        self._serial = changes.serial if changes is not None else None
        return state

    def _apply(self, state: AllocatedState, changes: ClaimChanges) -> None:
        held = self._held
        for before, after in changes.changed:
            if before is not None:
                gone = held.pop(id(before), None)
                if gone is not None:
                    state.remove_allocation(gone[0].key, gone[1])
            if after is not None and after.allocation is not None and id(after) not in held:
                state.add_allocation(after.key, after.allocation)
                held[id(after)] = (after, after.allocation)

    def _compare(self, state: AllocatedState, claims: Iterable[ClaimInfo]) -> None:
        wanted = {id(c): (c, c.allocation) for c in claims if c.allocation is not None}
        held = self._held
        for key, (claim, allocation) in list(held.items()):
            now = wanted.get(key)
            if now is None or now[1] is not allocation:
                state.remove_allocation(claim.key, allocation)
                del held[key]
        for key, (claim, allocation) in wanted.items():
            if key not in held and allocation is not None:
                state.add_allocation(claim.key, allocation)
                held[key] = (claim, allocation)
