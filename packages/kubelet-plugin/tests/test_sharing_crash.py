"""Crash safety of sharing side effects with the real plugin process (issue 11).

The plugin runs on the fake backend with DynamicMIG, MPSSupport or TimeSlicingSettings (the
first two exclude each other). A test hook pauses it at an exact point, the test SIGKILLs it
there, restarts it and plays the kubelet's retry (or its unprepare):

- between a dynamic MIG device's creation and the checkpoint write (the fake backend's
  ``DRA_NVLIB_FAKE_HOLD_AFTER=create_mig_device:DIR``);
- while an MPS control daemon starts, before it is ready and before the checkpoint records
  it (the fake daemon's ``DRA_FAKE_MPS_HOLD_READY=DIR``);
- right after a GPU's time-slice was set (``set_time_slice``), where the claim is then
  unprepared without a retry (its pod went away while the plugin was down).

After the restart nothing of the killed attempt remains (no MIG device, no daemon process,
no daemon directory, no claim recorded as prepared), the retry prepares the claim again and
unprepare leaves the GPUs as they were. A last test kills the plugin at random points of a
loop of MIG, MPS and time-slice prepares and unprepares and checks after every restart that
the GPUs and the MPS directory hold exactly what completed claims recorded.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from dra_kubelet_core.checkpoint import ClaimState, decode_checkpoint
from dra_kubelet_plugin.gpu_sharing import state_of
from dra_nvlib import ComputeMode, FakeDeviceLib, GpuInfo, TimeSliceLevel
from kubelet_plugin_support import (
    PluginDirs,
    PluginProcess,
    ReferenceProtos,
    gpu_config,
    make_claim,
    write_claim,
)

pytestmark = pytest.mark.slow

GPU_CONFIG = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"}
MPS = {**GPU_CONFIG, "sharing": {"strategy": "MPS", "mpsConfig": {}}}
MIG_DEVICE = "gpu-0-mig-1g10gb-19-0"


class Node:
    """The plugin process of one test, its fake GPU state and its hook directory."""

    def __init__(self, dirs: PluginDirs, gates: str) -> None:
        self.dirs = dirs
        self.state = dirs.root / "gpus.json"
        self.hold = dirs.root / "hold"
        self.hold.mkdir()
        self.proc = PluginProcess(
            dirs,
            fake_gpus="2xH100-80GB",
            extra=["--feature-gates", gates, "--fake-gpu-state-file", str(self.state)],
        )

    def gpus(self) -> tuple[GpuInfo, ...]:
        """The fake GPUs as they are now (read from the shared state file)."""
        lib = FakeDeviceLib.open(state_path=self.state, fleet=None, node_name="n1")
        return lib.gpus()

    def mps_root(self) -> Path:
        """Where the plugin keeps its MPS daemons."""
        return self.dirs.plugin_dir / "mps"

    def checkpoint_claims(self) -> dict[str, ClaimState]:
        """Claim UID -> state, from a checkpoint that must decode (never half-written)."""
        assert not list(self.dirs.plugin_dir.glob("checkpoint.json.corrupt-*"))
        if not self.dirs.checkpoint.exists():
            return {}
        raw = self.dirs.checkpoint.read_bytes()
        cp = decode_checkpoint(raw, path=str(self.dirs.checkpoint))
        return {uid: c.state for uid, c in cp.claims.items()}

    def cdi_specs(self) -> set[str]:
        """Claim UIDs with a CDI spec."""
        return {
            p.name.removeprefix("k8s.gpu.nvidia.com-claim_").removesuffix(".json")
            for p in self.dirs.cdi.glob("k8s.gpu.nvidia.com-claim_*.json")
        }


@pytest.fixture
def node(plugin_dirs: PluginDirs, request: pytest.FixtureRequest) -> Iterator[Node]:
    """A node with the gates given by indirect parametrization, whose plugin is stopped
    (and any held hook released) at the end. DynamicMIG and MPSSupport exclude each
    other, so each test names its own."""
    n = Node(plugin_dirs, str(request.param))
    yield n
    (n.hold / "create_mig_device.release").touch()
    (n.hold / "mps-ready.release").touch()
    proc = n.proc.proc
    if proc is not None and proc.poll() is None:
        n.proc.stop()


def _ref(claim: dict[str, Any]) -> tuple[str, str, str]:
    meta = claim["metadata"]
    return (meta["namespace"], meta["name"], meta["uid"])


def _prepare(reference: ReferenceProtos, proc: PluginProcess, ref: tuple[str, str, str]) -> Any:
    with proc.channel() as ch:
        answer = reference.prepare(ch, [ref])
    assert answer.claims[ref[2]].error == "", answer
    return answer.claims[ref[2]]


def _unprepare(reference: ReferenceProtos, proc: PluginProcess, ref: tuple[str, str, str]) -> None:
    with proc.channel() as ch:
        answer = reference.unprepare(ch, [ref])
    assert answer.claims[ref[2]].error == "", answer


def _wait_for(what: str, check: Any, timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _prepare_until_killed(
    reference: ReferenceProtos, node: Node, ref: tuple[str, str, str], reached: Any
) -> None:
    """Send the prepare, wait until the hook holds the plugin, SIGKILL it there."""
    errors: list[BaseException] = []

    def send() -> None:
        try:
            _prepare(reference, node.proc, ref)
        except grpc.RpcError as exc:
            errors.append(exc)

    caller = threading.Thread(target=send)
    caller.start()
    try:
        _wait_for("the hook to hold the plugin", reached)
        node.proc.kill()
    finally:
        caller.join(timeout=30)
    assert errors, "the prepare answered although the plugin was killed"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


@pytest.mark.parametrize("node", ["DynamicMIG=true"], indirect=True)
def test_sigkill_between_mig_create_and_checkpoint_leaves_no_mig_device(
    node: Node, reference: ReferenceProtos, monkeypatch: pytest.MonkeyPatch
) -> None:
    claim = make_claim(name="mig", devices=[MIG_DEVICE])
    write_claim(node.dirs.claims, claim)
    ref = _ref(claim)
    monkeypatch.setenv("DRA_NVLIB_FAKE_HOLD_AFTER", f"create_mig_device:{node.hold}")
    node.proc.start()
    held = node.hold / "create_mig_device.held"
    _prepare_until_killed(reference, node, ref, held.exists)
    assert int(held.read_text()) == node.proc.proc.pid  # type: ignore[union-attr]

    # Killed with the MIG device created and the claim not recorded as prepared.
    assert [len(g.mig_devices) for g in node.gpus()] == [1, 0]
    assert node.checkpoint_claims().get(ref[2]) is not ClaimState.PREPARE_COMPLETED
    assert ref[2] not in node.cdi_specs()

    monkeypatch.delenv("DRA_NVLIB_FAKE_HOLD_AFTER")
    node.proc.start()
    # Start-up recovery destroyed the orphan before any retry came.
    assert [len(g.mig_devices) for g in node.gpus()] == [0, 0]
    assert node.checkpoint_claims().get(ref[2]) is not ClaimState.PREPARE_COMPLETED
    assert "sharing_leftovers_removed" in node.proc.logs()

    # The kubelet's retry prepares the claim again: one MIG device, recorded, in the spec.
    answer = _prepare(reference, node.proc, ref)
    (gpu0, gpu1) = node.gpus()
    assert (len(gpu0.mig_devices), len(gpu1.mig_devices)) == (1, 0)
    assert node.checkpoint_claims() == {ref[2]: ClaimState.PREPARE_COMPLETED}
    spec = json.loads((node.dirs.cdi / f"k8s.gpu.nvidia.com-claim_{ref[2]}.json").read_text())
    assert gpu0.mig_devices[0].uuid in json.dumps(spec)
    assert [d.device_name for d in answer.devices] == [MIG_DEVICE]

    _unprepare(reference, node.proc, ref)
    assert [len(g.mig_devices) for g in node.gpus()] == [0, 0]
    assert not any(g.mig_mode.current for g in node.gpus())
    assert node.checkpoint_claims() == {}
    assert node.cdi_specs() == set()


@pytest.mark.parametrize("node", ["MPSSupport=true"], indirect=True)
def test_sigkill_while_mps_daemon_starts_leaves_no_daemon(
    node: Node, reference: ReferenceProtos, monkeypatch: pytest.MonkeyPatch
) -> None:
    claim = make_claim(name="mps", devices=["gpu-1"], configs=[gpu_config(MPS)])
    write_claim(node.dirs.claims, claim)
    ref = _ref(claim)
    monkeypatch.setenv("DRA_FAKE_MPS_HOLD_READY", str(node.hold))
    node.proc.start()

    def daemon_pid() -> int | None:
        for pid_file in node.mps_root().glob(f"{ref[2]}-*/pipe/nvidia-mps.pid"):
            text = pid_file.read_text().strip()
            if text:
                return int(text)
        return None

    _prepare_until_killed(reference, node, ref, daemon_pid)
    pid = daemon_pid()
    assert pid is not None
    # The daemon outlives the plugin (its own session) and is not ready yet.
    assert _alive(pid)
    (daemon_dir,) = node.mps_root().iterdir()
    assert not (daemon_dir / "pipe" / "ready").exists()
    assert node.checkpoint_claims().get(ref[2]) is not ClaimState.PREPARE_COMPLETED
    gpu1 = node.gpus()[1]
    assert gpu1.compute_mode is ComputeMode.EXCLUSIVE_PROCESS

    monkeypatch.delenv("DRA_FAKE_MPS_HOLD_READY")
    node.proc.start()
    # Start-up recovery stopped the half-started daemon and removed its directories.
    _wait_for("the half-started daemon to exit", lambda: not _alive(pid))
    assert not daemon_dir.exists()
    assert node.gpus()[1].compute_mode is ComputeMode.DEFAULT
    assert node.checkpoint_claims().get(ref[2]) is not ClaimState.PREPARE_COMPLETED

    # The retry starts a new, ready daemon for the claim.
    _prepare(reference, node.proc, ref)
    assert node.checkpoint_claims() == {ref[2]: ClaimState.PREPARE_COMPLETED}
    new_pid = daemon_pid()
    assert new_pid is not None
    assert new_pid != pid
    assert _alive(new_pid)
    (daemon_dir,) = node.mps_root().iterdir()
    assert (daemon_dir / "pipe" / "ready").exists()
    spec = json.loads((node.dirs.cdi / f"k8s.gpu.nvidia.com-claim_{ref[2]}.json").read_text())
    assert str(daemon_dir / "pipe") in json.dumps(spec)

    _unprepare(reference, node.proc, ref)
    _wait_for("the daemon to exit", lambda: not _alive(new_pid))
    assert list(node.mps_root().iterdir()) == []
    assert node.gpus()[1].compute_mode is ComputeMode.DEFAULT
    assert node.checkpoint_claims() == {}
    assert node.cdi_specs() == set()


@pytest.mark.parametrize("node", ["TimeSlicingSettings=true"], indirect=True)
def test_sigkill_after_time_slice_set_resets_it_when_the_claim_goes(
    node: Node, reference: ReferenceProtos, monkeypatch: pytest.MonkeyPatch
) -> None:
    sharing = {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}
    claim = make_claim(
        name="ts", devices=["gpu-1"], configs=[gpu_config({**GPU_CONFIG, "sharing": sharing})]
    )
    write_claim(node.dirs.claims, claim)
    ref = _ref(claim)
    monkeypatch.setenv("DRA_NVLIB_FAKE_HOLD_AFTER", f"set_time_slice:{node.hold}")
    node.proc.start()
    _prepare_until_killed(reference, node, ref, (node.hold / "set_time_slice.held").exists)
    assert node.gpus()[1].time_slice is TimeSliceLevel.LONG

    monkeypatch.delenv("DRA_NVLIB_FAKE_HOLD_AFTER")
    node.proc.start()
    # The interval was recorded before it was set, so start-up recovery reset it.
    assert node.gpus()[1].time_slice in (None, TimeSliceLevel.DEFAULT)
    # The pod went away while the plugin was down: the kubelet unprepares instead of
    # retrying, and the GPU must not keep the interval of the killed attempt.
    _unprepare(reference, node.proc, ref)
    assert node.gpus()[1].time_slice in (None, TimeSliceLevel.DEFAULT)
    assert node.checkpoint_claims() == {}
    assert node.cdi_specs() == set()


def _daemon_processes(mps_root: Path) -> dict[int, str]:
    """pid -> daemon ID of every live fake MPS daemon below ``mps_root`` (from /proc)."""
    out: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        for arg in argv:
            text = arg.decode(errors="replace")
            inside = text.startswith(f"{mps_root}/") and text.endswith("/pipe")
            if inside and _alive(int(entry.name)):
                out[int(entry.name)] = Path(text).parent.name
    return out


def _check_nothing_unrecorded(node: Node) -> None:
    """After a restart, before any retry: what is on the GPUs and on disk is exactly what
    claims recorded as ``PrepareCompleted`` hold."""
    raw = node.dirs.checkpoint.read_bytes()
    cp = decode_checkpoint(raw, path=str(node.dirs.checkpoint))
    completed = [
        state_of(c.driver_state)
        for c in cp.claims.values()
        if c.state is ClaimState.PREPARE_COMPLETED
    ]
    gpus = node.gpus()
    assert {m.uuid for g in gpus for m in g.mig_devices} == {
        m.mig_uuid for s in completed for m in s.created_migs
    }
    levels = {gpu: level for s in completed for gpu, level in s.time_slices.items()}
    for gpu in gpus:
        assert int(gpu.time_slice or 0) == levels.get(gpu.uuid, 0), gpu.uuid
    daemons = {d.daemon_id for s in completed for d in s.mps_daemons}
    on_disk = {p.name for p in node.mps_root().iterdir()} if node.mps_root().exists() else set()
    assert on_disk == daemons
    assert set(_daemon_processes(node.mps_root()).values()) <= daemons
    assert node.cdi_specs() <= set(cp.claims)


TS_LONG = {
    **GPU_CONFIG,
    "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
}


@pytest.mark.parametrize(
    ("node", "slots"),
    [
        (
            "DynamicMIG=true,TimeSlicingSettings=true",
            [("gpu-0-mig-1g10gb-19-0", None), ("gpu-0-mig-1g10gb-19-1", None), ("gpu-1", TS_LONG)],
        ),
        ("MPSSupport=true,TimeSlicingSettings=true", [("gpu-0", MPS), ("gpu-1", TS_LONG)]),
    ],
    indirect=["node"],
    ids=["mig+timeslice", "mps+timeslice"],
)
def test_sigkill_at_random_points_of_sharing_leaves_nothing_unrecorded(
    node: Node,
    reference: ReferenceProtos,
    slots: list[tuple[str, dict[str, Any] | None]],
) -> None:
    rng = random.Random(20261201)
    prepared: dict[int, dict[str, Any]] = {}
    node.proc.start()
    restarts = 0
    for cycle in range(24):
        i = rng.randrange(len(slots))
        op = "unprepare" if i in prepared else "prepare"
        if op == "prepare":
            device, config = slots[i]
            prepared[i] = make_claim(
                name=f"c{cycle}",
                devices=[device],
                uid=str(uuid.uuid4()),
                configs=[gpu_config(config)] if config else [],
            )
            write_claim(node.dirs.claims, prepared[i])
        ref = _ref(prepared[i])
        send = _prepare if op == "prepare" else _unprepare
        killer = None
        if rng.randrange(2) == 0:
            assert node.proc.proc is not None
            killer = threading.Timer(rng.uniform(0.0, 0.15), node.proc.proc.kill)
            killer.start()
        try:
            send(reference, node.proc, ref)
        except grpc.RpcError:
            assert killer is not None, node.proc.logs()
        if killer is not None:
            killer.join()
            node.proc.kill()
            node.proc.start()
            restarts += 1
            _check_nothing_unrecorded(node)
            send(reference, node.proc, ref)  # the kubelet's retry
        if op == "unprepare":
            (node.dirs.claims / "default" / f"{ref[1]}.json").unlink()
            del prepared[i]
    for claim in prepared.values():
        _unprepare(reference, node.proc, _ref(claim))
    node.proc.stop()
    node.proc.start()
    _check_nothing_unrecorded(node)
    assert node.checkpoint_claims() == {}
    assert not any(g.mig_devices for g in node.gpus())
    assert restarts >= 6
