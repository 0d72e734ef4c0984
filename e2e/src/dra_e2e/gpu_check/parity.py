"""Step 5 of the check: the CDI spec of a prepared claim against ``nvidia-ctk cdi generate``
on the same machine, entry by entry.

``e2e/tests/cdi/test_toolkit_parity.py`` proves the same on synthetic driver roots and
go-nvml's mock GPUs; this step meets what only a real node has: where its distribution put
the driver (the H200 this ran on keeps it in ``/usr/local/nvidia``, found through
``ld.so.cache``, with wrapper scripts in ``/usr/bin``), its firmware and its device nodes.
The spec's claim-wide edits must equal the toolkit's spec-wide ones (env, device nodes,
mounts, hooks) and the GPU's edits the toolkit's device of that UUID. Skipped without
``nvidia-ctk`` and ``nvidia-cdi-hook`` (``--nvidia-ctk``; the harness builds both into its
cache) or with the fake backend, whose specs are not the toolkit's kind.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from .claim_round_trip import first_device, running_plugin
from .runner import StepFailed, StepSkipped
from .target import CheckTarget

#: The edits compared, in the order differences are reported.
_KEYS = ("env", "deviceNodes", "mounts", "hooks")
_GENERATE = "nvidia-ctk cdi generate"


def _entries(edits: Mapping[str, Any], key: str) -> list[str]:
    """One canonical line per entry, so two specs compare as sets of lines."""
    values: Sequence[Any] = edits.get(key) or []
    if key == "env":
        return [str(v) for v in values]
    if key == "deviceNodes":
        # The toolkit adds major/minor/mode, which the runtime reads from the node when absent.
        return [f"{n['path']} host={n.get('hostPath', n['path'])}" for n in values]
    return [json.dumps(v, sort_keys=True) for v in values]


def edit_differences(
    ours: Mapping[str, Any], theirs: Mapping[str, Any], *, where: str
) -> list[str]:
    """What one side's container edits have that the other's lack, one line each."""
    lines = []
    for key in _KEYS:
        mine, other = set(_entries(ours, key)), set(_entries(theirs, key))
        lines += [f"{where} {key}: only ours: {entry}" for entry in sorted(mine - other)]
        lines += [f"{where} {key}: only nvidia-ctk's: {entry}" for entry in sorted(other - mine)]
    return lines


def spec_differences(ours: Mapping[str, Any], theirs: Mapping[str, Any], *, uuid: str) -> list[str]:
    """Our claim spec (one device) against the toolkit's spec of the whole node: the claim-wide
    edits against its spec-wide ones, our device's against its device named ``uuid``."""
    lines = edit_differences(
        ours.get("containerEdits") or {}, theirs.get("containerEdits") or {}, where="claim"
    )
    by_name = {d["name"]: d.get("containerEdits") or {} for d in theirs.get("devices") or []}
    if uuid not in by_name:
        return [*lines, f"nvidia-ctk's spec has no device {uuid}: {sorted(by_name)}"]
    for device in ours.get("devices") or []:
        own = device.get("containerEdits") or {}
        lines += edit_differences(own, by_name[uuid], where=f"device {device['name']}")
    return lines


def find_toolkit(nvidia_ctk: str | None) -> tuple[Path, Path] | None:
    """``nvidia-ctk`` (the given path, else on ``PATH``) and the ``nvidia-cdi-hook`` beside it
    (else on ``PATH``); ``None`` when either is missing."""
    ctk = nvidia_ctk or shutil.which("nvidia-ctk")
    if ctk is None or not Path(ctk).is_file():
        return None
    hook = Path(ctk).with_name("nvidia-cdi-hook")
    found = str(hook) if hook.is_file() else shutil.which("nvidia-cdi-hook")
    return (Path(ctk), Path(found)) if found else None


def _toolkit_spec(ctk: Path, hook: Path, timeout_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gpu-check-ctk-") as tmp:
        out = Path(tmp) / "spec.json"
        command = [str(ctk), "cdi", "generate", "--mode=nvml", "--format=json"]
        command += [f"--nvidia-cdi-hook-path={hook}", f"--output={out}"]
        try:
            proc = subprocess.run(
                command, capture_output=True, text=True, timeout=timeout_s, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise StepFailed(
                f"nvidia-ctk cdi generate still running after {timeout_s:.0f}s"
            ) from exc
        if proc.returncode != 0 or not out.is_file():
            raise StepFailed(
                f"nvidia-ctk cdi generate exited {proc.returncode}: {proc.stderr[-500:]}"
            )
        spec: dict[str, Any] = json.loads(out.read_text())
        return spec


def toolkit_parity(target: CheckTarget, budget_s: float) -> str:
    """Prepare a claim on the first GPU, keep its spec, unprepare; compare with the toolkit's."""
    if target.backend != "nvml":
        raise StepSkipped("compares real-GPU specs: needs --backend nvml")
    if target.toolkit is None:
        raise StepSkipped("nvidia-ctk/nvidia-cdi-hook not found (--nvidia-ctk PATH)")
    ctk, hook = target.toolkit
    device = first_device(target)
    with running_plugin(target, budget_s / 2) as plugin:
        claim = plugin.prepare(device, timeout_s=budget_s / 4)
        ours = [yaml.safe_load(path.read_text()) for path in claim.spec_files]
        plugin.unprepare(claim, timeout_s=budget_s / 4)
    theirs = _toolkit_spec(ctk, hook, budget_s / 4)
    lines = [line for spec in ours for line in spec_differences(spec, theirs, uuid=device.uuid)]
    if lines:
        print("\n".join(lines))
        raise StepFailed(f"{len(lines)} difference(s) from nvidia-ctk cdi generate: {lines[0]}")
    edits = ours[0].get("containerEdits") or {}
    return (
        f"claim spec equals nvidia-ctk cdi generate ({len(edits.get('mounts') or [])} mounts, "
        f"{len(edits.get('hooks') or [])} hooks, device {device.uuid})"
    )
