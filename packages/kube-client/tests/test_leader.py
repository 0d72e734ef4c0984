"""Lease leader election: create, hold, take over, renew deadline; one fake clock, no sleeps."""

from __future__ import annotations

import datetime
import threading

import pytest
from dra_kube_client import KubeApiError, LeaderElector, LeaseTimings
from dra_kube_client.leader import decide
from dra_kube_client.testing import Answer, Call, MemoryApi, MockTransport

PATH = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l"


class FakeClock:
    """Wall and monotonic time in one, moved by the test."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _elector(
    api: MemoryApi | MockTransport,
    identity: str,
    clock: FakeClock,
    timings: LeaseTimings | None = None,
    changes: list[bool] | None = None,
) -> LeaderElector:
    return LeaderElector(
        api,
        namespace="ns",
        name="l",
        identity=identity,
        timings=timings,
        wall_clock=clock,
        monotonic=clock,
        on_change=(changes.append if changes is not None else lambda _leading: None),
    )


def test_lease_decisions() -> None:
    now = datetime.datetime(2026, 12, 1, 12, 0, 0, tzinfo=datetime.UTC)
    fresh = decide(None, "a", now, 15)
    assert fresh is not None
    assert fresh["holderIdentity"] == "a"
    assert decide(fresh, "b", now + datetime.timedelta(seconds=5), 15) is None
    taken = decide(fresh, "b", now + datetime.timedelta(seconds=20), 15)
    assert taken is not None
    assert taken["holderIdentity"] == "b"
    assert taken["leaseTransitions"] == 1
    renewed = decide(fresh, "a", now + datetime.timedelta(seconds=5), 15)
    assert renewed is not None
    assert renewed["acquireTime"] == fresh["acquireTime"]
    assert renewed["renewTime"] == "2026-12-01T12:00:05.000000Z"


def test_create_hold_and_take_over_after_the_lease_duration() -> None:
    api, clock = MemoryApi(), FakeClock()
    changes: list[bool] = []
    a = _elector(api, "a", clock, changes=changes)
    b = _elector(api, "b", clock)
    assert a.step()
    assert api.objects[PATH]["spec"]["holderIdentity"] == "a"
    assert api.objects[PATH]["spec"]["leaseDurationSeconds"] == 15
    clock.now += 14
    assert not b.step()  # a renewed 14 s ago: still its lease
    clock.now += 2  # a went quiet for 16 s > 15 s
    assert b.step()
    assert api.objects[PATH]["spec"]["holderIdentity"] == "b"
    assert api.objects[PATH]["spec"]["leaseTransitions"] == 1
    assert not a.step()  # a sees b's valid lease and steps down at once
    assert changes == [True, False]


def test_a_leader_renews_each_round_and_keeps_its_acquire_time() -> None:
    api, clock = MemoryApi(), FakeClock()
    a = _elector(api, "a", clock)
    a.step()
    acquired = api.objects[PATH]["spec"]["acquireTime"]
    for _ in range(10):
        clock.now += 2
        assert a.step()
    spec = api.objects[PATH]["spec"]
    assert (spec["acquireTime"], spec["leaseTransitions"]) == (acquired, 0)
    assert spec["renewTime"] != acquired
    assert not _elector(api, "b", clock).step()


def _down_after(api: MemoryApi, down: list[bool]) -> MockTransport:
    def handler(call: Call) -> Answer:
        if down[0]:
            raise KubeApiError(call.method, call.path, 0, "connection refused")
        return api.request(call.method, call.path, body=call.body)

    return MockTransport(handler)


def test_a_leader_that_cannot_renew_within_the_deadline_steps_down() -> None:
    api, clock, down = MemoryApi(), FakeClock(), [False]
    timings = LeaseTimings(lease_duration_s=15, renew_deadline_s=10, retry_period_s=2)
    el = _elector(_down_after(api, down), "a", clock, timings)
    assert el.step()
    down[0] = True
    clock.now += 9
    assert el.step()  # a failed round within the renew deadline: still leading
    clock.now += 2
    assert not el.step()  # 11 s without a renewal > 10 s
    down[0] = False
    assert el.step()  # its own lease: renewed, leading again


def test_default_timings_stop_leading_before_another_candidate_may_take_over() -> None:
    api, clock, down = MemoryApi(), FakeClock(), [False]
    timings = LeaseTimings()
    assert (timings.lease_duration_s, timings.renew_deadline_s, timings.retry_period_s) == (
        15.0,
        10.0,
        2.0,
    )
    el = _elector(_down_after(api, down), "a", clock, timings)
    el.step()
    down[0] = True
    clock.now += 9
    within_deadline = el.step()
    clock.now += 2  # 11 s: past the renew deadline, still within the 15 s lease
    assert (within_deadline, el.step()) == (True, False)
    other = _elector(api, "b", clock, timings)
    assert not other.step()  # the Lease is not expired yet: nobody leads for 4 s
    clock.now += 5
    assert other.step()


def test_a_round_that_hangs_does_not_keep_the_leader_leading_past_the_deadline() -> None:
    api, clock = MemoryApi(), FakeClock()
    el = _elector(api, "a", clock, LeaseTimings())
    assert el.step()
    # No round finishes (a request hangs); reading the state judges the deadline anyway.
    clock.now += 9.5
    states = [el.leading, el.is_leader()]
    clock.now += 1
    states += [el.leading, el.is_leader()]
    assert states == [True, True, False, False]
    assert el.step()  # a round that renews leads again


def test_a_lost_compare_and_swap_is_a_failed_round_not_a_crash() -> None:
    api, clock = MemoryApi(), FakeClock()
    api.put_object(
        PATH,
        {
            "kind": "Lease",
            "metadata": {"name": "l", "namespace": "ns"},
            "spec": {"holderIdentity": "old", "renewTime": "2020-01-01T00:00:00.000000Z"},
        },
    )
    api.fail[("PUT", PATH)] = 409
    el = _elector(api, "a", clock)
    assert not el.step()
    assert el.step()
    assert api.objects[PATH]["spec"]["holderIdentity"] == "a"


class _Rounds(threading.Event):
    """A stop event that records each wait instead of sleeping and stops after ``n``."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.waits: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        if len(self.waits) == self.n:
            self.set()
        return self.is_set()


def test_run_competes_every_retry_period_until_stopped() -> None:
    api, clock = MemoryApi(), FakeClock()
    el = _elector(api, "a", clock)
    stop = _Rounds(3)
    el.run(stop)
    assert stop.waits == [2.0, 2.0, 2.0]
    assert el.is_leader()
    assert [m for m, _ in api.requests] == ["GET", "POST", "GET", "PUT", "GET", "PUT"]


@pytest.mark.parametrize(
    ("lease", "renew", "retry"), [(10, 15, 2), (15, 15, 2), (15, 10, 10), (15, 10, 0)]
)
def test_timings_a_leader_could_outlive_are_rejected(
    lease: float, renew: float, retry: float
) -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        LeaseTimings(lease, renew, retry)
