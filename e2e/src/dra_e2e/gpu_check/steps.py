"""Steps 1 and 2 of the check: the NVML contract suite against the machine's library, and
the ResourceSlices the plugin would publish, validated against the api-types model."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable

import yaml
from dra_api_types import ResourceSlice

from .runner import StepFailed
from .target import REPO_ROOT, CheckTarget, SliceDevice

CONTRACT_SUITE = REPO_ROOT / "packages" / "nvlib" / "tests" / "test_contract.py"
# The parent-run tests that build mock libraries; the check runs the suite's own tests only.
_NOT_MOCK = "not over_mock_nvml and not over_nvml_stub and not real_hardware_mode"


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip("= ") if lines else "(no output)"


def contract_suite(target: CheckTarget, budget_s: float) -> str:
    """The nvlib backend contract suite: real-hardware mode over the machine's libnvidia-ml
    (the fake fleet's parameters with the fake backend)."""
    env = dict(os.environ)
    command = [target.python, "-m", "pytest", str(CONTRACT_SUITE), "-q", "-rs"]
    command += ["-p", "no:cacheprovider"]
    if target.backend == "nvml":
        env["DRA_NVLIB_CONTRACT_NVML"] = "real"
        env["DRA_NVLIB_CONTRACT_NVML_PATH"] = ""
    else:
        command += ["-k", _NOT_MOCK]
    try:
        proc = subprocess.run(
            command,
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=budget_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise StepFailed(f"contract suite still running after {budget_s:.0f}s") from exc
    summary = _last_line(proc.stdout)
    if proc.returncode != 0:
        print(proc.stdout[-4000:] + proc.stderr[-2000:])
        raise StepFailed(f"contract suite: {summary}")
    return f"contract suite: {summary}"


def print_resource_slices(
    target: CheckTarget, budget_s: float, *, show: Callable[[str], None] = print
) -> str:
    """``dra-kubelet-plugin --print-resource-slices``: shown, each slice validated as the
    kube-apiserver would, the devices kept for the next steps."""
    command = [*target.plugin_command(), "--print-resource-slices"]
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NODE_NAME")}
    try:
        proc = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=budget_s, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise StepFailed(f"--print-resource-slices still running after {budget_s:.0f}s") from exc
    if proc.returncode != 0:
        raise StepFailed(f"--print-resource-slices exited {proc.returncode}: {proc.stderr[-500:]}")
    show(proc.stdout)
    devices: list[SliceDevice] = []
    documents = [d for d in yaml.safe_load_all(proc.stdout) if d is not None]
    for document in documents:
        try:
            resource_slice = ResourceSlice.from_dict(document, validate=True)
        except Exception as exc:
            raise StepFailed(f"a printed ResourceSlice is invalid: {exc}") from exc
        if resource_slice.spec.node_name != target.node_name:
            raise StepFailed(
                f"ResourceSlice spec.nodeName is {resource_slice.spec.node_name!r}, "
                f"not {target.node_name!r}"
            )
        for device in resource_slice.spec.devices or []:
            uuid = (device.attributes or {}).get("uuid")
            if uuid is not None and uuid.string and device.name.startswith("gpu-"):
                devices.append(SliceDevice(device.name, uuid.string))
    if not devices:
        raise StepFailed(f"{len(documents)} ResourceSlices printed but no GPU device in them")
    target.devices = devices
    return f"{len(documents)} ResourceSlices valid; {len(devices)} GPUs: " + ", ".join(
        f"{d.name}={d.uuid}" for d in devices
    )
