"""Parsing /proc/devices and mig-minors, and hooks in the CDI JSON."""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_kubelet_core.cdi import CDIKind, ContainerEdits, Hook
from dra_kubelet_core.device_nodes import (
    NodeUnavailableError,
    char_majors,
    ensure_char_node,
    mig_cap_minors,
)

PROC_DEVICES = """Character devices:
  1 mem
195 nvidia-frontend
237 nvidia-caps
510 nvidia-uvm

Block devices:
  7 loop
510 nvidia-uvm-not-a-char
"""


def test_char_majors_reads_only_the_character_block() -> None:
    majors = char_majors(PROC_DEVICES)
    assert majors["nvidia-uvm"] == 510
    assert majors["nvidia-caps"] == 237
    assert "loop" not in majors
    assert "nvidia-uvm-not-a-char" not in majors


def test_mig_cap_minors() -> None:
    text = "config 1\nmonitor 2\ngpu0/gi1/access 21\ngpu0/gi1/ci0/access 22\nbroken\n"
    assert mig_cap_minors(text) == {
        "config": 1,
        "monitor": 2,
        "gpu0/gi1/access": 21,
        "gpu0/gi1/ci0/access": 22,
    }


def test_existing_node_is_left_alone_and_unreadable_proc_devices_is_an_error(
    tmp_path: Path,
) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidia-uvm").touch()
    missing = tmp_path / "no-proc-devices"
    assert not ensure_char_node(
        tmp_path, "/dev/nvidia-uvm", module="nvidia-uvm", minor=0, proc_devices=missing
    )
    with pytest.raises(NodeUnavailableError, match="cannot read"):
        ensure_char_node(
            tmp_path, "/dev/nvidia-uvm-tools", module="nvidia-uvm", minor=1, proc_devices=missing
        )


def test_hooks_render_in_the_spec_wide_edits() -> None:
    hook = Hook(path="/h/nvidia-cdi-hook", args=("nvidia-cdi-hook", "update-ldcache"))
    spec = (
        CDIKind(vendor="k8s.gpu.nvidia.com")
        .render_claim_spec(
            claim_uid="u1",
            devices=[("gpu-0", ContainerEdits(env=("A=1",)))],
            common=[ContainerEdits(hooks=(hook,)), ContainerEdits(hooks=(hook,))],
        )
        .to_json()
    )
    assert spec["containerEdits"] == {
        "hooks": [
            {
                "hookName": "createContainer",
                "path": "/h/nvidia-cdi-hook",
                "args": ["nvidia-cdi-hook", "update-ldcache"],
            }
        ]
    }
