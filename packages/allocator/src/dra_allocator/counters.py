"""Shared counters of partitionable devices: what is left, and what a search consumes."""

from __future__ import annotations

from dra_api_types import Amount

from .model import DeviceInfo
from .pools import Pool
from .state import AllocatedState

CounterSets = dict[str, dict[str, Amount]]


def available_counters(
    pool: Pool, state: AllocatedState, *, shares_consume: bool = True
) -> CounterSets:
    """The pool's counter sets minus what devices of already allocated claims consume.

    The result may go negative (a driver shrank a counter set); that simply means nothing
    is available. ``shares_consume`` false is Kubernetes 1.35, where a device allocated
    only as shares (consumable capacity) consumes none of its counters.
    """
    available = {name: dict(counters) for name, counters in pool.counter_sets.items()}
    for dev in pool.all_devices():
        if not dev.consumes_counters:
            continue
        held = state.is_allocated(dev.id) if shares_consume else dev.id in state.devices
        if not held:
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
    """Counters consumed by the devices picked so far in one allocation attempt.

    ``by_pool_name`` is Kubernetes 1.35, which files available and consumed counters under
    the pool's name alone: pools of the same name from different drivers share them (and
    the first one looked at fills the cache for all of them).
    """

    def __init__(
        self,
        state: AllocatedState,
        cache: dict[object, tuple[int, CounterSets, bool]],
        *,
        by_pool_name: bool = False,
    ):
        self._state = state
        self._cache = cache
        self._by_name = by_pool_name
        self._consumed: dict[object, CounterSets] = {}

    def _key(self, pool: Pool) -> object:
        return pool.name if self._by_name else pool.id

    def _available(self, pool: Pool) -> tuple[CounterSets, bool]:
        key = self._key(pool)
        cached = self._cache.get(key)
        if cached is not None and cached[0] == self._state.version:
            return cached[1], cached[2]
        available = available_counters(pool, self._state, shares_consume=not self._by_name)
        negative = any(v < 0 for cs in available.values() for v in cs.values())
        self._cache[key] = (self._state.version, available, negative)
        return available, negative

    def try_consume(self, dev: DeviceInfo, pool: Pool) -> bool:
        """Add the device's consumption if every counter of the pool stays within bounds.

        As upstream, the pool's available counters are what is checked: a consumed counter
        the pool does not define limits nothing.
        """
        available, negative = self._available(pool)
        if negative:
            # A counter already over-consumed fails every device of the pool, as upstream.
            return False
        consumed = self._consumed.setdefault(self._key(pool), {})
        for cs_name, counters in dev.consumes_counters:
            cs_avail = available.get(cs_name)
            if cs_avail is None:
                continue
            cs_used = consumed.get(cs_name, {})
            for cname, value in counters:
                if cname in cs_avail and cs_avail[cname] < cs_used.get(cname, 0) + value:
                    return False
        for cs_name, counters in dev.consumes_counters:
            cs_used = consumed.setdefault(cs_name, {})
            for cname, value in counters:
                cs_used[cname] = cs_used.get(cname, 0) + value
        return True

    def release(self, dev: DeviceInfo, pool: Pool) -> None:
        """Undo ``try_consume`` for the device."""
        consumed = self._consumed[self._key(pool)]
        for cs_name, counters in dev.consumes_counters:
            cs_used = consumed[cs_name]
            for cname, value in counters:
                cs_used[cname] -= value

    def remaining(self, pool: Pool) -> CounterSets:
        """Available minus consumed so far (for diagnostics)."""
        available, _ = self._available(pool)
        consumed = self._consumed.get(self._key(pool), {})
        return {
            cs: {c: v - consumed.get(cs, {}).get(c, 0) for c, v in counters.items()}
            for cs, counters in available.items()
        }
