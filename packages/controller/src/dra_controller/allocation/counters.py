"""Shared counters of partitionable devices: what is left, and what a search consumes."""

from __future__ import annotations

from .model import DeviceInfo
from .pools import Pool, PoolID
from .quantities import Amount
from .state import AllocatedState

CounterSets = dict[str, dict[str, Amount]]


def available_counters(pool: Pool, state: AllocatedState) -> CounterSets:
    """The pool's counter sets minus what devices of already allocated claims consume.

    The result may go negative (a driver shrank a counter set); that simply means nothing
    is available.
    """
    available = {name: dict(counters) for name, counters in pool.counter_sets.items()}
    for dev in pool.all_devices():
        if not dev.consumes_counters or not state.is_allocated(dev.id):
            continue
        for cs_name, counters in dev.consumes_counters:
            cs = available.get(cs_name)
            if cs is None:
                continue
            for cname, value in counters:
                if cname in cs:
                    cs[cname] -= value
    return available


class CounterTracker:
    """Counters consumed by the devices picked so far in one allocation attempt."""

    def __init__(self, state: AllocatedState, cache: dict[PoolID, tuple[int, CounterSets, bool]]):
        self._state = state
        self._cache = cache
        self._consumed: dict[PoolID, CounterSets] = {}

    def _available(self, pool: Pool) -> tuple[CounterSets, bool]:
        cached = self._cache.get(pool.id)
        if cached is not None and cached[0] == self._state.version:
            return cached[1], cached[2]
        available = available_counters(pool, self._state)
        negative = any(v < 0 for cs in available.values() for v in cs.values())
        self._cache[pool.id] = (self._state.version, available, negative)
        return available, negative

    def try_consume(self, dev: DeviceInfo, pool: Pool) -> bool:
        """Add the device's consumption if every counter of the pool stays within bounds."""
        available, negative = self._available(pool)
        if negative:
            # A counter already over-consumed fails every device of the pool, as upstream.
            return False
        consumed = self._consumed.setdefault(pool.id, {})
        for cs_name, counters in dev.consumes_counters:
            cs_avail = available.get(cs_name, {})
            cs_used = consumed.get(cs_name, {})
            for cname, value in counters:
                if cs_avail.get(cname, 0) < cs_used.get(cname, 0) + value:
                    return False
        for cs_name, counters in dev.consumes_counters:
            cs_used = consumed.setdefault(cs_name, {})
            for cname, value in counters:
                cs_used[cname] = cs_used.get(cname, 0) + value
        return True

    def release(self, dev: DeviceInfo, pool: Pool) -> None:
        """Undo ``try_consume`` for the device."""
        consumed = self._consumed[pool.id]
        for cs_name, counters in dev.consumes_counters:
            cs_used = consumed[cs_name]
            for cname, value in counters:
                cs_used[cname] -= value

    def remaining(self, pool: Pool) -> CounterSets:
        """Available minus consumed so far (for diagnostics)."""
        available, _ = self._available(pool)
        consumed = self._consumed.get(pool.id, {})
        return {
            cs: {c: v - consumed.get(cs, {}).get(c, 0) for c, v in counters.items()}
            for cs, counters in available.items()
        }
