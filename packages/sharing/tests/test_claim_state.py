"""The checkpointed sharing state: round trip and strict decoding."""

from __future__ import annotations

import pytest
from dra_sharing import ClaimSharingState, CreatedMig, MpsDaemonRecord, StateDecodeError


def test_round_trip() -> None:
    state = ClaimSharingState(
        time_slices={"GPU-b": 2, "GPU-a": 0},
        mps_daemons=(MpsDaemonRecord("uid-abcde", ("GPU-a",), ("GPU-a",)),),
        created_migs=(CreatedMig("gpu-0-mig-1g5gb-19-0", "GPU-a", "MIG-1", 19, 0),),
    )
    doc = state.to_json()
    assert list(doc["timeSlices"]) == ["GPU-a", "GPU-b"]
    assert ClaimSharingState.from_json(doc) == state
    assert not state.empty
    assert ClaimSharingState.from_json(None).empty
    assert ClaimSharingState.from_json({}).empty


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ([], "sharing"),
        ({"timeSlices": {"GPU-a": "x"}}, "sharing.timeSlices[GPU-a]"),
        ({"mpsDaemons": [{"gpuUUIDs": []}]}, "sharing.mpsDaemons[0].id"),
        (
            {"createdMIGs": [{"deviceName": "d", "gpuUUID": "g", "migUUID": "m"}]},
            "sharing.createdMIGs[0].profileID",
        ),
        ({"createdMIGs": {}}, "sharing.createdMIGs"),
    ],
)
def test_malformed_state_names_the_field(doc: object, field: str) -> None:
    with pytest.raises(StateDecodeError, match=field.replace("[", r"\[").replace("]", r"\]")):
        ClaimSharingState.from_json(doc)
