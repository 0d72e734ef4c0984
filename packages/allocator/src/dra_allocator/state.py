"""What is already allocated in the cluster: devices, shared capacity, owners."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from dra_api_types import AllocationResult, Amount

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
                agg = self.capacity.setdefault(dev_id, {})
                for name, value in (result.consumed_capacity or {}).items():
                    agg[name] = agg.get(name, 0) + value.amount()
            else:
                self.devices.add(dev_id)
        self.version += 1

    def is_allocated(self, dev_id: DeviceID) -> bool:
        """Whether the device consumes its counters (allocated exclusively or shared)."""
        return dev_id in self.devices or dev_id in self.shared_devices
