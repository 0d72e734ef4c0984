"""MPS control daemons live as long as their claims, not as long as the plugin process.

The plugin runs on the fake backend with ``MPSSupport``; a test prepares MPS claims, SIGKILLs
the plugin (as a crash, OOM or liveness kill does) and starts it again. Before the restarted
plugin answers its first call (``PluginProcess.start`` returns once its registration socket
answers, and recovery runs before it is served) every recorded daemon has been checked:

- a daemon that still answers on its control pipe is re-adopted (same process);
- a daemon that died while the plugin was down (SIGKILLed here, as a container kill does to
  daemons in the plugin's PID namespace) runs again, with its recorded settings, in the same
  pipe directory, and its GPU is still in EXCLUSIVE_PROCESS;
- a daemon that cannot be restarted is that claim's failure (logged with the claim, a
  ``RecoveryIncomplete`` event naming it, retried while serving); other claims are served.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dra_nvlib import ComputeMode, FakeDeviceLib
from dra_sharing.fake_mps_daemon import query
from kubelet_plugin_support import (
    PluginDirs,
    PluginProcess,
    ReferenceProtos,
    gpu_config,
    make_claim,
    write_claim,
)

pytestmark = pytest.mark.slow

MPS = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 30}},
}
Ref = tuple[str, str, str]


class Node:
    """The plugin process of one test and its fake GPUs."""

    def __init__(self, dirs: PluginDirs) -> None:
        self.dirs = dirs
        self.state = dirs.root / "gpus.json"
        self.proc = PluginProcess(
            dirs,
            fake_gpus="2xH100-80GB",
            extra=[
                "--feature-gates",
                "MPSSupport=true",
                "--fake-gpu-state-file",
                str(self.state),
            ],
        )

    def compute_modes(self) -> list[ComputeMode]:
        lib = FakeDeviceLib.open(state_path=self.state, fleet=None, node_name="n1")
        return [g.compute_mode for g in lib.gpus()]

    def pipe(self, uid: str) -> Path:
        (daemon,) = (self.dirs.plugin_dir / "mps").glob(f"{uid}-*")
        return daemon / "pipe"

    def claim(self, name: str, device: str) -> Ref:
        claim = make_claim(name=name, devices=[device], configs=[gpu_config(MPS)])
        write_claim(self.dirs.claims, claim)
        meta = claim["metadata"]
        return (meta["namespace"], meta["name"], meta["uid"])


@pytest.fixture
def node(plugin_dirs: PluginDirs) -> Iterator[Node]:
    """A node whose plugin is stopped, and whose daemons are stopped, at the end."""
    n = Node(plugin_dirs)
    yield n
    proc = n.proc.proc
    if proc is not None and proc.poll() is None:
        n.proc.stop()
    for pid_file in (n.dirs.plugin_dir / "mps").glob("*/pipe/nvidia-mps.pid"):
        _kill(int(pid_file.read_text()))


def _prepare(reference: ReferenceProtos, proc: PluginProcess, ref: Ref) -> Any:
    with proc.channel() as ch:
        answer = reference.prepare(ch, [ref])
    assert answer.claims[ref[2]].error == "", answer
    return answer.claims[ref[2]]


def _unprepare(reference: ReferenceProtos, proc: PluginProcess, ref: Ref) -> None:
    with proc.channel() as ch:
        answer = reference.unprepare(ch, [ref])
    assert answer.claims[ref[2]].error == "", answer


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def _kill(pid: int) -> None:
    """SIGKILL a daemon and wait until it is gone (its files stay, as after a container kill)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while not _gone(pid):
        assert time.monotonic() < deadline, f"daemon {pid} survived SIGKILL"
        time.sleep(0.01)


def _server(pipe: Path) -> int:
    return int(query(pipe, "get_server_list"))


def test_live_daemon_is_re_adopted_by_a_restarted_plugin(
    node: Node, reference: ReferenceProtos
) -> None:
    ref = node.claim("mps", "gpu-1")
    node.proc.start()
    _prepare(reference, node.proc, ref)
    pid = _server(node.pipe(ref[2]))
    node.proc.kill()
    node.proc.start()
    assert _server(node.pipe(ref[2])) == pid, "the same daemon, not a new one"
    assert "mps_daemons_checked" in node.proc.logs()
    _prepare(reference, node.proc, ref)  # a new pod on the claim
    assert node.compute_modes() == [ComputeMode.DEFAULT, ComputeMode.EXCLUSIVE_PROCESS]
    _unprepare(reference, node.proc, ref)
    assert _gone(pid)
    assert node.compute_modes() == [ComputeMode.DEFAULT, ComputeMode.DEFAULT]


def test_daemon_killed_while_the_plugin_is_down_runs_again_before_the_first_call(
    node: Node, reference: ReferenceProtos
) -> None:
    ref = node.claim("mps", "gpu-0")
    node.proc.start()
    _prepare(reference, node.proc, ref)
    pipe = node.pipe(ref[2])
    pid = _server(pipe)
    node.proc.kill()
    _kill(pid)
    node.compute_modes()  # still recorded EXCLUSIVE_PROCESS; nothing reset it
    node.proc.start()
    # No call has been made yet: the daemon answers again, with the claim's settings.
    new = _server(pipe)
    assert new != pid
    assert query(pipe, "get_default_active_thread_percentage") == "30.0"
    assert node.compute_modes() == [ComputeMode.EXCLUSIVE_PROCESS, ComputeMode.DEFAULT]
    assert "mps_daemon_restarted" in node.proc.logs()
    _unprepare(reference, node.proc, ref)
    assert _gone(new)
    assert not pipe.exists()
    assert node.compute_modes() == [ComputeMode.DEFAULT, ComputeMode.DEFAULT]


def test_daemon_that_cannot_be_restarted_fails_its_claim_only(
    node: Node, reference: ReferenceProtos
) -> None:
    broken = node.claim("broken", "gpu-0")
    healthy = node.claim("healthy", "gpu-1")
    node.proc.start()
    _prepare(reference, node.proc, broken)
    _prepare(reference, node.proc, healthy)
    node.proc.kill()
    for ref in (broken, healthy):
        _kill(_server(node.pipe(ref[2])))
    spec = node.pipe(broken[2]).parent / "spec.json"
    spec.write_text(json.dumps({**json.loads(spec.read_text()), "deviceUUIDs": None}))
    node.proc.start()
    logs = node.proc.logs()
    assert _server(node.pipe(healthy[2])) > 0, "the other claim's daemon was restarted"
    failed = [json.loads(line) for line in logs.splitlines() if "mps_daemon_down" in line]
    # Logged at start, and again at each retry while serving: always that claim only.
    assert {(f["claim_uid"], f["claim_namespace"], f["claim_name"]) for f in failed} == {
        (broken[2], broken[0], broken[1])
    }
    assert "deviceUUIDs" in failed[0]["error"]
    events = [line for line in logs.splitlines() if "RecoveryIncomplete" in line]
    assert events
    assert broken[2] in events[0]
    # The plugin serves: the healthy claim is unprepared, a new claim prepared.
    _unprepare(reference, node.proc, healthy)
    other = node.claim("other", "gpu-1")
    _prepare(reference, node.proc, other)
    assert _server(node.pipe(other[2])) > 0
    _unprepare(reference, node.proc, other)
    # Unprepare of the broken claim still cleans up what is there.
    _unprepare(reference, node.proc, broken)
    assert node.compute_modes() == [ComputeMode.DEFAULT, ComputeMode.DEFAULT]
