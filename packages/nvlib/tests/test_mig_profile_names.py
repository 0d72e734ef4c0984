"""MIG profile names derived for unnamed NVML profiles (v1 records, go-nvml's mock systems)."""

from __future__ import annotations

import pytest
from dra_nvlib.mig_profile_names import derived_profile_name, profile_memory_gb
from dra_nvlib.profiles import find_model


@pytest.mark.parametrize(
    ("slices", "memory_mib", "board_mib", "index", "expected"),
    [
        # Real A100-SXM4-40GB (`nvidia-smi mig -lgip`): a bit under an eighth per slice.
        (1, 4864, 40960, 0, "1g.5gb"),
        (1, 4864, 40960, 7, "1g.5gb+me"),
        (1, 9856, 40960, 9, "1g.10gb"),
        (3, 19968, 40960, 2, "3g.20gb"),
        (7, 40192, 40960, 4, "7g.40gb"),
        # go-nvml's dgxh200 and dgxb200: nominal sizes a bit over an eighth.
        (1, 18432, 144384, 0, "1g.18gb"),
        (1, 35840, 144384, 9, "1g.35gb"),
        (3, 72704, 144384, 2, "3g.71gb"),
        (7, 144384, 144384, 4, "7g.141gb"),
        (1, 23552, 184320, 0, "1g.23gb"),
        (2, 46080, 184320, 1, "2g.45gb"),
        (7, 184320, 184320, 4, "7g.180gb"),
        # The other variants nvml.h lists.
        (1, 9856, 40960, 0x0D, "1g.10gb-me"),
        (1, 9856, 40960, 0x0F, "1g.10gb+me.all"),
        (1, 9856, 40960, 0x0A, "1g.10gb+gfx"),
    ],
)
def test_names_follow_nvidia_rule(
    slices: int, memory_mib: int, board_mib: int, index: int, expected: str
) -> None:
    name = derived_profile_name(
        nvml_profile=index, slice_count=slices, memory_mib=memory_mib, device_memory_mib=board_mib
    )
    assert name == expected


@pytest.mark.parametrize("key", ["A100-40GB", "A100-80GB", "H100-80GB", "H200"])
def test_names_match_the_fake_tables(key: str) -> None:
    """The fake's tables carry NVIDIA's names; derivation from their numbers agrees."""
    part = find_model(key)
    assert part is not None
    for spec in part.mig_profiles:
        derived = derived_profile_name(
            nvml_profile=spec.nvml_profile,
            slice_count=spec.slice_count,
            memory_mib=spec.memory_mib,
            device_memory_mib=part.memory_mib,
        )
        assert derived == spec.name


def test_half_rounds_up_like_nvidia() -> None:
    # 4/8 of a 141 GB board is 70.5 GB: NVIDIA names it 71 (Python's round() would say 70).
    assert profile_memory_gb(71296, 143771) == 71


def test_board_memory_unknown_rounds_the_profile_itself() -> None:
    assert profile_memory_gb(4864, None) == 5
    assert profile_memory_gb(4864, 0) == 5
