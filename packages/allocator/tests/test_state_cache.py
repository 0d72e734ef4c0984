"""StateCache: the allocated state updated by the claims that changed is the state
``AllocatedState.from_claims`` builds from all of them, through any sequence of changes."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest
from allocation_builders import DEFAULT_CLASS, DRIVER, device_class, resource_claim, resource_slice
from dra_allocator.cel_engine import CelEngine
from dra_allocator.claim_changes import ClaimChanges, next_serial
from dra_allocator.cluster import Cluster
from dra_allocator.features import Features
from dra_allocator.model import ClaimInfo, parse_objects
from dra_allocator.state import AllocatedState, StateCache
from dra_api_types import AllocationResult

DEVICES = [f"g{i}" for i in range(4)]


def _result(rng: random.Random, request: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "request": request,
        "driver": DRIVER,
        "pool": "n1",
        "device": rng.choice(DEVICES),
    }
    kind = rng.choice(("exclusive", "shared", "shared", "admin"))
    if kind == "shared":
        out["shareID"] = f"{rng.randrange(1 << 32):08x}-0000-4000-8000-000000000000"
        names = rng.sample(["memory", "cores"], rng.randrange(3))
        out["consumedCapacity"] = {n: f"{rng.randrange(1, 5)}Gi" for n in names}
    elif kind == "admin":
        out["adminAccess"] = True
    return out


def _claim(rng: random.Random, name: str) -> ClaimInfo:
    allocation = None
    if rng.random() < 0.8:
        results = [_result(rng, f"r{i}") for i in range(rng.randrange(1, 4))]
        allocation = {"devices": {"results": results}}
    objects = [resource_claim({"name": f"ns/{name}", "allocation": allocation})]
    (claim,) = parse_objects(objects)[2]
    return claim


def _normal(state: AllocatedState) -> tuple[Any, ...]:
    """What from_claims promises, owners' order aside (claims come in any order)."""
    return (
        state.devices,
        state.shared_devices,
        state.capacity,
        {d: sorted(o) for d, o in state.owners.items() if o},
        state.consumable,
    )


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("consumable", [True, False])
def test_any_sequence_of_changes_gives_the_state_of_the_claims(seed: int, consumable: bool) -> None:
    rng = random.Random(seed)
    cache = StateCache()
    claims = {f"c{i}": _claim(rng, f"c{i}") for i in range(6)}
    for _ in range(30):
        name = f"c{rng.randrange(9)}"
        change = rng.choice(("replace", "replace", "delete", "same"))
        if change == "replace":
            claims[name] = _claim(rng, name)
        elif change == "delete":
            claims.pop(name, None)
        listed = list(claims.values())
        rng.shuffle(listed)
        got = cache.state_for(listed, consumable=consumable)
        want = AllocatedState.from_claims(listed, consumable=consumable)
        assert _normal(got) == _normal(want)


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("consumable", [True, False])
def test_any_sequence_of_claim_changes_gives_the_state_of_the_claims(
    seed: int, consumable: bool
) -> None:
    """Told which claims changed (as the controller's view tells it), the cache looks at
    those alone and still has the state of all the claims."""
    rng = random.Random(seed)
    cache = StateCache()
    claims = {f"c{i}": _claim(rng, f"c{i}") for i in range(6)}
    changes = ClaimChanges(next_serial())
    cache.state_for(list(claims.values()), consumable=consumable, changes=changes)
    for _ in range(30):
        pairs: list[tuple[ClaimInfo | None, ClaimInfo | None]] = []
        for _ in range(rng.randrange(4)):
            name = f"c{rng.randrange(9)}"
            before = claims.get(name)
            if rng.random() < 0.7:
                claims[name] = _claim(rng, name)
            else:
                claims.pop(name, None)
            if before is not claims.get(name):
                pairs.append((before, claims.get(name)))
        changes = ClaimChanges(next_serial(), since=changes.serial, changed=pairs)
        # Not the claims: what the cache must not read when the changes follow its last.
        got = cache.state_for([], consumable=consumable, changes=changes)
        want = AllocatedState.from_claims(claims.values(), consumable=consumable)
        assert _normal(got) == _normal(want)


def test_changes_that_do_not_follow_the_last_claims_are_not_applied() -> None:
    """Changes against another snapshot (one skipped, another source, none before) are not
    the cache's: it compares every claim instead."""
    rng = random.Random(7)
    claims = [_claim(rng, f"c{i}") for i in range(5)]
    while claims[0].allocation is None:
        claims[0] = _claim(rng, "c0")
    cache = StateCache()
    first = ClaimChanges(next_serial())
    cache.state_for(claims, consumable=True, changes=first)
    skipped = ClaimChanges(next_serial(), since=first.serial)
    gone = claims.pop(0)
    # Says nothing changed, but follows the skipped snapshot, not the cache's last.
    stale = ClaimChanges(next_serial(), since=skipped.serial)
    got = cache.state_for(claims, consumable=True, changes=stale)
    assert _normal(got) == _normal(AllocatedState.from_claims(claims, consumable=True))
    # A first call with changes that follow something: nothing before, so every claim.
    fresh = StateCache()
    got = fresh.state_for([gone], consumable=True, changes=ClaimChanges(next_serial(), since=1))
    assert _normal(got) == _normal(AllocatedState.from_claims([gone], consumable=True))


def test_a_claim_whose_allocation_changed_in_place_is_taken_out_and_added_again() -> None:
    rng = random.Random(3)
    claim = _claim(random.Random(1), "c")
    while claim.allocation is None:
        claim = _claim(rng, "c")
    cache = StateCache()
    cache.state_for([claim], consumable=True)
    other = _claim(rng, "d")
    while other.allocation is None:
        other = _claim(rng, "d")
    claim.allocation = other.allocation  # as Cluster.commit writes it
    got = cache.state_for([claim], consumable=True)
    assert _normal(got) == _normal(AllocatedState.from_claims([claim], consumable=True))
    claim.allocation = None
    assert _normal(cache.state_for([claim], consumable=True)) == _normal(AllocatedState())


def test_switching_consumable_capacity_starts_over() -> None:
    rng = random.Random(5)
    claims = [_claim(rng, f"c{i}") for i in range(8)]
    cache = StateCache()
    for consumable in (True, False, True):
        got = cache.state_for(claims, consumable=consumable)
        assert _normal(got) == _normal(AllocatedState.from_claims(claims, consumable=consumable))


def test_a_commit_copies_the_cached_state_first() -> None:
    _, slices, claims, _ = parse_objects(
        [
            device_class(DEFAULT_CLASS),
            resource_slice({"name": "s1", "node": "n1", "devices": [{"name": "g0"}]}),
            resource_claim({"name": "ns/a"}),
        ]
    )
    cache = StateCache()

    def cluster() -> Cluster:
        return Cluster(
            classes=parse_objects([device_class(DEFAULT_CLASS)])[0],
            slices=slices,
            claims=claims,
            engine=CelEngine(),
            features=Features(),
            state_cache=cache,
        )

    first = cluster()
    outcome = first.allocate(claims)
    assert outcome.allocated is not None
    first.commit(claims, outcome.allocated)
    assert first.state.devices == {(DRIVER, "n1", "g0")}
    # The cache's own state did not see the commit; the next cluster takes the claim's
    # new allocation from the claim.
    fresh = AllocatedState.from_claims([replace(claims[0], allocation=None)])
    assert _normal(cache.state_for([], consumable=True)) == _normal(fresh)
    assert cluster().state.devices == {(DRIVER, "n1", "g0")}


def test_from_claims_and_remove_are_inverse_on_a_lone_claim() -> None:
    rng = random.Random(11)
    for _ in range(20):
        claim = _claim(rng, "c")
        if claim.allocation is None:
            continue
        state = AllocatedState.from_claims([claim])
        state.remove_allocation(claim.key, claim.allocation)
        assert _normal(state) == _normal(AllocatedState())
        assert isinstance(claim.allocation, AllocationResult)
