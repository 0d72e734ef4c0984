"""The scale benchmark's memory timeline: samples summed up by step, and the sampler that
labels them."""

from __future__ import annotations

import itertools

from dra_e2e.memory_timeline import MemorySample, StepMemory, by_step, describe, thinned
from dra_e2e.scale_observe import RssSampler
from dra_e2e.scale_report import Usage, memory_lines

MB = 1_000_000


def test_each_step_keeps_its_first_last_and_earliest_peak() -> None:
    samples = [
        MemorySample(0.0, "setup", 100 * MB),
        MemorySample(1.0, "creation", 100 * MB),
        MemorySample(2.0, "creation", 250 * MB),
        MemorySample(3.0, "creation", 250 * MB),
        MemorySample(4.0, "creation", 200 * MB),
        MemorySample(5.0, "churn", 210 * MB),
        MemorySample(6.0, "churn", 340 * MB),
        MemorySample(7.0, "churn", 220 * MB),
    ]
    assert by_step(samples) == [
        StepMemory("setup", 1, 100 * MB, 100 * MB, 100 * MB, 0.0),
        StepMemory("creation", 4, 100 * MB, 200 * MB, 250 * MB, 2.0),
        StepMemory("churn", 3, 210 * MB, 220 * MB, 340 * MB, 6.0),
    ]
    assert describe(by_step(samples)).splitlines()[2] == (
        "churn: 210.0 -> 220.0 MB, peak 340.0 MB at 6 s (3 samples)"
    )


def test_thinned_keeps_the_first_sample_of_each_window() -> None:
    samples = [MemorySample(t, "creation", int(t)) for t in (0.0, 1.5, 2.0, 2.5, 7.9, 8.0)]
    assert [s.at_s for s in thinned(samples, 2.0)] == [0.0, 2.0, 7.9, 8.0]
    assert thinned([], 60.0) == []


def test_no_samples_say_so() -> None:
    assert by_step([]) == []
    assert describe([]) == "(no samples)"


def test_sampler_labels_samples_with_the_step_marked_and_skips_unreadable() -> None:
    values = itertools.chain([10, None, 30, 40, 50], itertools.repeat(60))
    sampler = RssSampler(lambda: next(values), interval=3600.0, step="setup")
    sampler.start()  # one sample at once: 10
    sampler.sample()  # None: the process gone, no sample
    sampler.mark("creation")  # 30 closes setup, 40 opens creation
    sampler.stop()  # a last one: 50
    assert [(s.step, s.rss) for s in sampler.samples] == [
        ("setup", 10),
        ("setup", 30),
        ("creation", 40),
        ("creation", 50),
    ]
    times = [s.at_s for s in sampler.samples]
    assert times == sorted(times)
    assert times[0] >= 0.0


def test_report_places_the_peak_and_the_lists() -> None:
    samples = [
        MemorySample(0.0, "setup", 166 * MB),
        MemorySample(60.0, "creation", 171 * MB),
        MemorySample(100.0, "churn", 210 * MB),
        MemorySample(106.0, "churn", 340 * MB),
        MemorySample(110.0, "churn", 220 * MB),
    ]
    usage = Usage(
        start={},
        end={},
        seconds=10.0,
        memory=samples,
        lists={"ResourceClaim": 2.0, "Pod": 1.0},
    )
    lines = memory_lines(usage)
    assert lines[1].endswith("setup: 166.0 -> 166.0 MB, peak 166.0 MB at 0 s (1 samples)")
    assert lines[3].endswith("churn: 210.0 -> 220.0 MB, peak 340.0 MB at 106 s (3 samples)")
    assert lines[4].endswith("every 60 s, MB: 166, 171")
    assert lines[5].endswith("full lists over the phase, by kind: Pod=1, ResourceClaim=2")
    assert lines[6].endswith("watches reopened over the phase, by kind: (not read)")
    assert memory_lines(None) == []
    assert memory_lines(Usage(start={}, end={}, seconds=1.0)) == []
