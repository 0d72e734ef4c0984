"""Where the host's CPU went over a span: each process, other, idle and steal."""

from __future__ import annotations

import pytest
from dra_e2e.host_cpu import (
    CpuReading,
    HostTotals,
    ProcStatTotalsError,
    cpu_lines,
    parse_host_totals,
    split,
)

PROC_STAT = """cpu  1000 50 250 7000 100 20 30 400 0 0
cpu0 500 25 125 3500 50 10 15 200 0 0
intr 12345
"""


def test_host_totals_sum_busy_idle_and_steal_of_the_all_cpus_line() -> None:
    totals = parse_host_totals(PROC_STAT, ticks=100)
    # busy: user + nice + system + irq + softirq; idle: idle + iowait
    assert totals == HostTotals(busy_s=13.5, idle_s=71.0, steal_s=4.0)


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("cpu0 1 2 3 4 5 6 7 8\n", "missing"),
        ("cpu 1 2 3\n", "only 3 fields"),
        ("cpu a b c d e f g h\n", "invalid"),
    ],
)
def test_a_stat_text_without_a_readable_cpu_line_is_refused(text: str, detail: str) -> None:
    with pytest.raises(ProcStatTotalsError, match=detail):
        parse_host_totals(text)


def _reading(busy: float, idle: float, steal: float, **processes: float) -> CpuReading:
    return CpuReading(processes, HostTotals(busy, idle, steal))


def test_the_split_names_each_process_and_leaves_the_rest_to_other() -> None:
    start = _reading(100.0, 50.0, 1.0, apiserver=10.0, scheduler=5.0, gone=3.0)
    end = _reading(180.0, 60.0, 5.0, apiserver=50.0, scheduler=25.0, new=2.0)
    got = split(start, end, 50.0)
    # "gone" ended and "new" started inside the span: both are in other.
    assert got.parts == {
        "apiserver": 40.0,
        "scheduler": 20.0,
        "other": 20.0,
        "idle": 10.0,
        "steal": 4.0,
    }
    assert got.cores("apiserver") == pytest.approx(0.8)
    assert got.cores("nothing") is None


def test_a_process_restarted_in_the_span_does_not_count_negative_time() -> None:
    got = split(_reading(10.0, 0.0, 0.0, kwok=8.0), _reading(12.0, 0.0, 0.0, kwok=1.0), 2.0)
    assert got.parts["kwok"] == 0.0
    assert got.parts["other"] == 2.0


def test_the_lines_put_both_phases_side_by_side_largest_first() -> None:
    without = split(_reading(0, 0, 0, a=0.0, b=0.0), _reading(30, 10, 0, a=10.0, b=20.0), 20.0)
    with_ = split(
        _reading(0, 0, 0, a=0.0, **{"ours: webhook": 0.0}),
        _reading(36, 4, 2, a=24.0, **{"ours: webhook": 2.0}),
        20.0,
    )
    lines = cpu_lines("host CPU", without, with_)
    assert lines[0] == "host CPU (20 s / 20 s):"
    names = [line.split()[0] for line in lines[2:]]
    assert names == ["a", "b", "ours:", "other", "idle", "steal"]
    assert lines[2].split()[1:] == ["0.50", "core", "1.20", "core"]
    assert lines[3].split()[1:] == ["1.00", "core", "n/a"]
    # a part the phase without never had
    assert lines[4].split()[2:] == ["n/a", "0.10", "core"]
    assert lines[5].split()[1:] == ["0.00", "core", "0.50", "core"]
    assert cpu_lines("host CPU", None, None) == []


def test_one_phase_alone_shows_a_dash_for_the_other() -> None:
    with_ = split(_reading(0, 0, 0, a=0.0), _reading(4, 6, 0, a=2.0), 5.0)
    lines = cpu_lines("host CPU", None, with_)
    assert lines[0] == "host CPU (- / 5 s):"
    assert lines[2].split() == ["a", "-", "0.40", "core"]
