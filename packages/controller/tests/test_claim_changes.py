"""The view's claim changes: each snapshot says which claims differ from the view's last, and
what the controller derives from every claim (the allocated state, the claim series, the free
devices) is updated by those alone, yet equals what a fresh view with empty caches gives,
through any sequence of changes."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from controller_objects import GPU_CLASS, MIG_CLASS, claim, gpu, mig, node, slice_, stores
from dra_allocator.state import AllocatedState, StateCache
from dra_controller.allocation_controller import AllocationController, ControllerMetrics
from dra_controller.allocation_controller.claim_series import ClaimSeries
from dra_controller.allocation_controller.view import ClusterView
from dra_kube_client.informers.store import Store

NODES = ("n1", "n2", "n3")
DEVICES = ("gpu-0", "gpu-1", "mig-0")


def _fleet() -> list[dict[str, Any]]:
    devices = [gpu("gpu-0", "40Gi"), gpu("gpu-1", "80Gi"), mig("mig-0", "1g.5gb")]
    return [GPU_CLASS, MIG_CLASS, *(node(n) for n in NODES), *(slice_(n, devices) for n in NODES)]


def _allocated(name: str, rv: int, rng: random.Random) -> dict[str, Any]:
    dev = rng.choice(DEVICES)
    cls = "mig.nvidia.com" if dev.startswith("mig") else "gpu.nvidia.com"
    return claim(name, cls=cls, allocated_on=(rng.choice(NODES), dev), rv=str(rv))


def _step(rng: random.Random, claims: Store, rv: int) -> bool:
    """One change to the claims, as watch events and relists make them; whether it relisted."""
    name = f"c{rng.randrange(8)}"
    key = f"team/{name}"
    what = rng.choice(
        ("allocate", "allocate", "pending", "release", "same", "unreadable", "deleting", "relist")
    )
    if what == "allocate":
        claims.upsert(_allocated(name, rv, rng))
    elif what == "pending":
        claims.upsert(claim(name, rv=str(rv)))
    elif what == "release":
        claims.delete(key)
    elif what == "same":
        # A new object at the same resourceVersion (how a resumed watch or relist hands one).
        current = claims.get(key)
        if current is not None:
            claims.upsert(copy.deepcopy(current))
    elif what == "unreadable":
        body = claim(name, rv=str(rv))
        body["spec"]["devices"]["requests"] = "not a list"
        claims.upsert(body)
    elif what == "deleting":
        body = _allocated(name, rv, rng)
        body["metadata"]["deletionTimestamp"] = "2026-12-05T00:00:00Z"
        claims.upsert(body)
    else:
        kept = [o for o in claims.items().values() if rng.random() < 0.7]
        claims.replace([*kept, _allocated(f"c{8 + rv}", rv, rng)])
        return True
    return False


def _series(series: list[ClaimSeries]) -> list[ClaimSeries]:
    return sorted(series)


@pytest.mark.parametrize("seed", range(12))
def test_a_controller_updated_by_changed_claims_equals_a_fresh_one(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    st = stores(_fleet())
    for i in range(5):
        st["ResourceClaim"].upsert(_allocated(f"c{i}", 1, rng))
    kept = AllocationController(st, metrics=ControllerMetrics())
    compared: list[int] = []
    real = StateCache._compare

    def counting(self: StateCache, *args: Any) -> None:
        if self is kept._state_cache:
            compared.append(1)
        real(self, *args)

    monkeypatch.setattr(StateCache, "_compare", counting)
    kept.reconcile()
    relists = 0
    for rv in range(2, 60):
        relisted = False
        for _ in range(rng.randrange(1, 4)):
            relisted |= _step(rng, st["ResourceClaim"], rv)
        relists += relisted
        got, _ = kept.reconcile()
        fresh = AllocationController(st, metrics=ControllerMetrics())
        want, _ = fresh.reconcile()
        where = f"seed {seed}, change {rv}"
        assert _series(got.allocated) == _series(want.allocated), where
        assert _series(got.pending) == _series(want.pending), where
        assert got.available == want.available, where
        claims = ClusterView(stores=st).snapshot().claims
        state = kept._state_cache._state
        assert state is not None
        whole = AllocatedState.from_claims(claims)
        assert state.devices == whole.devices, where
        assert (state.shared_devices, state.capacity) == (whole.shared_devices, whole.capacity)
        # The state was compared claim by claim only on the first reconcile and after a
        # relist; else updated by the changes alone.
        assert len(compared) == 1 + relists, where


def test_a_snapshot_names_the_claims_that_changed_since_the_last() -> None:
    rng = random.Random(1)
    st = stores([*_fleet(), claim("a"), claim("b"), _allocated("c", 1, rng)])
    view = ClusterView(stores=st)
    first = view.snapshot()
    assert first.claim_changes is not None
    assert first.claim_changes.since is None
    a, b, c = sorted(first.claims, key=lambda x: x.name)
    st["ResourceClaim"].upsert(_allocated("a", 2, rng))
    st["ResourceClaim"].delete("team/b")
    same_version = st["ResourceClaim"].get("team/c")
    assert same_version is not None
    st["ResourceClaim"].upsert(copy.deepcopy(same_version))  # a new object, the same version
    st["ResourceClaim"].upsert(claim("d", rv="2"))
    second = view.snapshot()
    changes = second.claim_changes
    assert changes is not None
    assert changes.follows(first.claim_changes.serial)
    by_name = {c.name: c for c in second.claims}
    assert [(x and x.name, y and y.name) for x, y in changes.changed] == [
        ("a", "a"),
        ("b", None),
        (None, "d"),
    ]
    assert changes.changed[0] == (a, by_name["a"])
    assert changes.changed[1] == (b, None)
    assert by_name["c"] is c  # re-read at the same version: the same parse, not a change
    third = view.snapshot()
    assert third.claim_changes is not None
    assert third.claim_changes.changed == ()
    assert third.claim_changes.follows(changes.serial)
    # A relist: the claims are read whole, and the changes say nothing is known.
    st["ResourceClaim"].replace(list(st["ResourceClaim"].items().values()))
    fourth = view.snapshot()
    assert fourth.claim_changes is not None
    assert fourth.claim_changes.since is None
    assert sorted(c.name for c in fourth.claims) == ["a", "c", "d"]
