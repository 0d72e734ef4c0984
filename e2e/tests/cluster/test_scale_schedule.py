"""Creating the scale workload at a steady rate (pure)."""

from __future__ import annotations

from collections import Counter

import pytest
from dra_e2e.scale_schedule import RateError, due, interleave, replicas_after


def test_interleave_asks_for_every_pod_once_in_proportion_all_along() -> None:
    counts = {"a": 80, "b": 80, "c": 40, "d0": 4, "d1": 4}
    order = interleave(counts)
    assert Counter(order) == counts
    total = sum(counts.values())
    for n in range(1, total + 1):
        made = Counter(order[:n])
        for name, count in counts.items():
            assert abs(made[name] - count * n / total) < 1.5, (n, name)
    assert interleave({"a": 2, "b": 1}) == ["a", "b", "a"]
    assert interleave({}) == []


def test_replicas_after_n_pods() -> None:
    order = interleave({"a": 2, "b": 1})
    assert replicas_after(order, 0, ["a", "b"]) == {"a": 0, "b": 0}
    assert replicas_after(order, 2, ["a", "b"]) == {"a": 1, "b": 1}
    assert replicas_after(order, 99, ["a", "b", "c"]) == {"a": 2, "b": 1, "c": 0}


def test_due_pods_at_a_rate() -> None:
    assert due(5.0, 0.0, 200) == 1
    assert due(5.0, 0.19, 200) == 1
    assert due(5.0, 0.2, 200) == 2
    assert due(5.0, 10.0, 200) == 51
    assert due(5.0, 1000.0, 200) == 200
    with pytest.raises(RateError, match="SCALE_RATE: 0"):
        due(0, 1.0, 10)
