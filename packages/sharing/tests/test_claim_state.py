"""The checkpointed sharing state: round trip and strict decoding."""

from __future__ import annotations

import pytest
from dra_sharing import ClaimSharingState, CreatedMig, MpsDaemonRecord, StateDecodeError

# A created MIG device as checkpoints before the GPU instance id was recorded hold it.
OLD_MIG_ENTRY = {
    "deviceName": "gpu-0-mig-1g5gb-19-0",
    "gpuUUID": "GPU-a",
    "migUUID": "MIG-1",
    "profileID": 19,
    "placementStart": 0,
}


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
        (
            {"createdMIGs": [{**OLD_MIG_ENTRY, "gpuInstanceID": "7"}]},
            "sharing.createdMIGs[0].gpuInstanceID",
        ),
    ],
)
def test_malformed_state_names_the_field(doc: object, field: str) -> None:
    with pytest.raises(StateDecodeError, match=field.replace("[", r"\[").replace("]", r"\]")):
        ClaimSharingState.from_json(doc)


def test_gpu_instance_id_round_trips_and_older_entries_have_none() -> None:
    known = ClaimSharingState(
        created_migs=(CreatedMig("gpu-0-mig-1g5gb-19-0", "GPU-a", "MIG-1", 19, 0, gi_id=7),)
    )
    doc = known.to_json()
    assert doc["createdMIGs"][0]["gpuInstanceID"] == 7
    assert ClaimSharingState.from_json(doc) == known
    (old,) = ClaimSharingState.from_json({"createdMIGs": [OLD_MIG_ENTRY]}).created_migs
    assert old.gi_id is None
    # Written back unknown, the entry keeps the shape an older plugin reads.
    assert ClaimSharingState(created_migs=(old,)).to_json()["createdMIGs"] == [OLD_MIG_ENTRY]
