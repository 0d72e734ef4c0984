"""Step 5's comparison of our claim spec with ``nvidia-ctk cdi generate``'s, and when it
skips. (It runs for real only on a GPU machine; ``e2e/tests/cdi`` proves the same parity on
mock GPUs.)"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from dra_e2e.gpu_check.parity import find_toolkit, spec_differences, toolkit_parity
from dra_e2e.gpu_check.runner import StepSkipped
from dra_e2e.gpu_check.target import CheckTarget

UUID = "GPU-3bcf3a98-62d3-78f0-d2ea-5983ac5c88c7"
LIB = "/usr/local/nvidia/lib64/libcuda.so.580.159.04"


def _mount(path: str) -> dict[str, Any]:
    return {"hostPath": path, "containerPath": path, "options": ["ro", "nosuid", "nodev", "bind"]}


THEIRS: dict[str, Any] = {
    "containerEdits": {
        "env": ["NVIDIA_VISIBLE_DEVICES=void"],
        "deviceNodes": [{"path": "/dev/nvidiactl", "major": 195, "minor": 255}],
        "mounts": [_mount(LIB), _mount("/usr/local/nvidia/bin/nvidia-smi")],
        "hooks": [{"hookName": "createContainer", "path": "/h", "args": ["h", "update-ldcache"]}],
    },
    "devices": [
        {"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}},
        {"name": UUID, "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}},
    ],
}


def _ours() -> dict[str, Any]:
    ours = copy.deepcopy(THEIRS)
    edits = copy.deepcopy(THEIRS["devices"][1]["containerEdits"])
    ours["devices"] = [{"name": "claim-gpu-0", "containerEdits": edits}]
    for node in ours["containerEdits"]["deviceNodes"]:
        node.pop("major"), node.pop("minor")
    return ours


def test_the_same_edits_have_no_differences_whatever_major_and_minor_say() -> None:
    assert spec_differences(_ours(), THEIRS, uuid=UUID) == []


def test_each_difference_is_one_line_naming_its_side() -> None:
    ours = _ours()
    ours["containerEdits"]["mounts"][1] = _mount("/usr/bin/nvidia-smi")
    ours["devices"][0]["containerEdits"]["deviceNodes"].append({"path": "/dev/nvidia1"})
    lines = spec_differences(ours, THEIRS, uuid=UUID)
    assert lines == [
        f"claim mounts: only ours: {_line('/usr/bin/nvidia-smi')}",
        f"claim mounts: only nvidia-ctk's: {_line('/usr/local/nvidia/bin/nvidia-smi')}",
        "device claim-gpu-0 deviceNodes: only ours: /dev/nvidia1 host=/dev/nvidia1",
    ]


def _line(path: str) -> str:
    return (
        f'{{"containerPath": "{path}", "hostPath": "{path}", '
        '"options": ["ro", "nosuid", "nodev", "bind"]}'
    )


def test_a_gpu_the_toolkit_does_not_list_is_named() -> None:
    lines = spec_differences(_ours(), THEIRS, uuid="GPU-00000000-0000-0000-0000-000000000000")
    assert lines == [
        f"nvidia-ctk's spec has no device GPU-00000000-0000-0000-0000-000000000000: ['0', '{UUID}']"
    ]


def test_the_toolkit_is_nvidia_ctk_with_its_hook_beside_it(tmp_path: Path) -> None:
    ctk = tmp_path / "nvidia-ctk"
    ctk.write_text("")
    assert find_toolkit(str(tmp_path / "absent")) is None
    hook = tmp_path / "nvidia-cdi-hook"
    hook.write_text("")
    assert find_toolkit(str(ctk)) == (ctk, hook)


def test_the_step_skips_with_the_fake_backend_or_without_the_toolkit(tmp_path: Path) -> None:
    with pytest.raises(StepSkipped, match="needs --backend nvml"):
        toolkit_parity(CheckTarget("fake", tmp_path), 30)
    with pytest.raises(StepSkipped, match="nvidia-ctk/nvidia-cdi-hook not found"):
        toolkit_parity(CheckTarget("nvml", tmp_path), 30)
