"""The one backoff: doubling to a cap, jitter below the delay, reset on success."""

from __future__ import annotations

import pytest
from dra_kube_client import Backoff


def test_delays_double_to_the_cap_and_reset() -> None:
    b = Backoff(initial_s=0.5, max_s=4.0, jitter=0.0)
    assert [b.next_delay() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert b.failures == 6
    b.reset()
    assert b.next_delay() == 0.5


def test_jitter_shortens_each_delay_by_at_most_its_share() -> None:
    draws = iter([0.0, 0.5, 0.999])
    b = Backoff(initial_s=1.0, max_s=30.0, jitter=0.2, rand=lambda: next(draws))
    assert [round(b.next_delay(), 4) for _ in range(3)] == [1.0, 1.8, round(4 * 0.8002, 4)]


def test_pure_delay_of_an_attempt_and_no_overflow_long_after_the_cap() -> None:
    b = Backoff(initial_s=1.0, max_s=8.0, jitter=0.0)
    assert [b.delay(n) for n in range(1, 7)] == [1, 2, 4, 8, 8, 8]
    assert b.delay(0) == 1.0
    assert b.delay(5000) == 8.0
    assert b.failures == 0  # delay() counts nothing


def test_zero_delays_stay_zero() -> None:
    b = Backoff(initial_s=0.0, max_s=0.0, jitter=0.0)
    assert [b.next_delay() for _ in range(3)] == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "kwargs",
    [{"initial_s": -1.0}, {"max_s": -1.0}, {"factor": 0.5}, {"jitter": 1.5}],
)
def test_settings_that_make_no_sequence_are_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="backoff"):
        Backoff(**kwargs)  # type: ignore[arg-type]


def test_jittered_delays_stay_within_their_share_below_the_cap_with_real_randomness() -> None:
    b = Backoff(initial_s=0.5, max_s=8.0, jitter=0.2)
    for _round in range(50):
        for attempt in range(1, 10):
            delay = b.next_delay()
            full = b.delay(attempt)
            assert full * 0.8 <= delay <= full <= 8.0
        b.reset()


def test_reset_after_jittered_failures_starts_again_from_the_first_delay() -> None:
    b = Backoff(initial_s=1.0, max_s=30.0, jitter=0.5, rand=lambda: 0.5)
    assert [b.next_delay() for _ in range(3)] == [0.75, 1.5, 3.0]
    b.reset()
    assert (b.failures, b.next_delay(), b.failures) == (0, 0.75, 1)


def test_a_pause_that_counts_no_failure_is_jittered_alone() -> None:
    b = Backoff(initial_s=1.0, max_s=30.0, jitter=0.2, rand=lambda: 1.0)
    assert b.jittered(30.0) == pytest.approx(24.0)
    assert b.failures == 0
    assert Backoff(jitter=0.0).jittered(7.0) == 7.0
