"""A process's resident memory sampled over a benchmark phase, summed up by the phase's steps.

The kernel's high-water mark (``VmHWM``) says how high a process's memory went, not when: the
scale benchmark samples ``VmRSS`` every few seconds, labelling each sample with the step it ran
in (creation, explain, churn), so a peak can be placed (a relist's transient copy, growth with
the claims, one burst of changes). Pure: the sampler thread lives in :mod:`dra_e2e.scale_observe`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["MemorySample", "StepMemory", "by_step", "describe", "thinned"]

_MB = 1_000_000


@dataclass(frozen=True)
class MemorySample:
    """One reading: seconds since the phase began, the step then, resident bytes."""

    at_s: float
    step: str
    rss: int


@dataclass(frozen=True)
class StepMemory:
    """One step's samples: resident memory at its first and last sample, and its largest."""

    step: str
    samples: int
    first: int
    last: int
    peak: int
    #: seconds since the phase began of the first sample at ``peak``
    peak_at_s: float


def by_step(samples: Iterable[MemorySample]) -> list[StepMemory]:
    """Each step's figures, steps in the order their first sample came; a step that comes
    back after another (it should not) is summed with its first stretch."""
    order: list[str] = []
    grouped: dict[str, list[MemorySample]] = {}
    for sample in samples:
        if sample.step not in grouped:
            order.append(sample.step)
            grouped[sample.step] = []
        grouped[sample.step].append(sample)
    out = []
    for step in order:
        run = grouped[step]
        top = max(run, key=lambda s: (s.rss, -s.at_s))
        out.append(
            StepMemory(
                step=step,
                samples=len(run),
                first=run[0].rss,
                last=run[-1].rss,
                peak=top.rss,
                peak_at_s=top.at_s,
            )
        )
    return out


def describe(steps: Sequence[StepMemory]) -> str:
    """One line per step: ``creation: 180.2 -> 230.1 MB, peak 251.0 MB at 640 s (211 samples)``;
    ``"(no samples)"`` when there are none."""
    if not steps:
        return "(no samples)"
    return "\n".join(
        f"{s.step}: {s.first / _MB:.1f} -> {s.last / _MB:.1f} MB, "
        f"peak {s.peak / _MB:.1f} MB at {s.peak_at_s:.0f} s ({s.samples} samples)"
        for s in steps
    )


def thinned(samples: Iterable[MemorySample], every_s: float) -> list[MemorySample]:
    """The first sample of each ``every_s``-long window since the phase began (the shape of
    the curve in a line: ``describe`` keeps only each step's ends and peak)."""
    out: list[MemorySample] = []
    window = -1
    for sample in samples:
        if int(sample.at_s // every_s) > window:
            window = int(sample.at_s // every_s)
            out.append(sample)
    return out
