"""MPS control daemons as Deployments (:class:`DeploymentMpsLauncher`).

The API server is the shared :class:`MemoryApi`; a stand-in kubelet (:class:`FakeKubelet`)
runs a created Deployment's container command as a process (the real fake MPS daemon, in the
foreground) and kills it when the Deployment is deleted, so the launcher's wait on the control
pipe, the adoption of a live daemon and the delete are exercised end to end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dra_kube_client.testing import MemoryApi
from dra_kubelet_plugin.mps_deployment import (
    DeploymentMpsLauncher,
    MpsDeploymentConfig,
    MpsDeploymentConfigError,
    OrphanDaemon,
    deployment_name,
    fake_daemon_command,
    fake_pipe_answers,
)
from dra_nvlib import ComputeMode, FakeDeviceLib
from dra_sharing import MpsDaemonManager, SharingApplyError, fake_mps_daemon
from dra_sharing.fake_mps_daemon import query
from dra_sharing.mps_spec import MpsDaemonSpec, MpsDirs
from dra_sharing.resolve import MpsSettings

DRIVER = "gpu.nvidia.com"
NS = "dra-driver"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NS}/deployments"
PODS = f"/api/v1/namespaces/{NS}/pods"


class FakeKubelet:
    """The node's kubelet over the shared :class:`MemoryApi`: it runs each Deployment's one
    container as a local process and kills it when the Deployment is gone.

    It acts while the launcher waits (the launcher's injected ``sleep``), so every test runs
    on one thread and each step happens where a real kubelet could have taken it.
    """

    def __init__(self, api: MemoryApi) -> None:
        self.api = api
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def sleep(self, seconds: float) -> None:
        """Sync the node with the API server, then let time pass."""
        self.sync()
        time.sleep(seconds)

    def sync(self) -> None:
        """Start what the Deployments ask for; stop what no Deployment asks for any more."""
        wanted = {d["metadata"]["name"]: d for d in self.api.kind_items("deployments")}
        for name, deployment in wanted.items():
            if name not in self.procs:
                self._run(deployment)
        for name in set(self.procs) - set(wanted):
            self._kill(name)

    def _run(self, deployment: dict[str, Any]) -> None:
        name = deployment["metadata"]["name"]
        template = deployment["spec"]["template"]
        (container,) = template["spec"]["containers"]
        env = {**os.environ, **{e["name"]: e["value"] for e in container["env"]}}
        self.procs[name] = subprocess.Popen(container["command"], env=env)
        self.api.put_object(
            f"{PODS}/{name}-pod",
            {
                "metadata": {
                    "name": f"{name}-pod",
                    "namespace": NS,
                    "labels": template["metadata"]["labels"],
                }
            },
        )

    def _kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.terminate()
        proc.wait(timeout=10)
        self.api.request("DELETE", f"{PODS}/{name}-pod")

    def stop_all(self) -> None:
        """Kill every daemon still running (the end of a test)."""
        for name in list(self.procs):
            self._kill(name)


@pytest.fixture
def api() -> MemoryApi:
    return MemoryApi()


@pytest.fixture
def kubelet(api: MemoryApi) -> Iterator[FakeKubelet]:
    node = FakeKubelet(api)
    yield node
    node.stop_all()


def config(**changes: Any) -> MpsDeploymentConfig:
    fields: dict[str, Any] = {
        "driver": DRIVER,
        "namespace": NS,
        "node_name": "node-1",
        "image": "registry.example/dra-driver:1.2",
        "host_dirs": ((Path("/run/nvidia/driver"), Path("/driver-root")),),
    }
    return MpsDeploymentConfig(**(fields | changes))


def launcher(kubelet: FakeKubelet) -> DeploymentMpsLauncher:
    return DeploymentMpsLauncher(
        kubelet.api,
        config(),
        command=fake_daemon_command(sys.executable, Path(fake_mps_daemon.__file__)),
        pipe_check=fake_pipe_answers,
        provides_client=True,
        poll_s=0.02,
        sleep=kubelet.sleep,
    )


CLAIM = "0f6c1b7e-3a52-4c1d-9d7e-2b1c4e5f6a7b"


def manager(tmp_path: Path, kubelet: FakeKubelet) -> tuple[MpsDaemonManager, FakeDeviceLib]:
    lib = FakeDeviceLib.open(
        state_path=tmp_path / "gpus.json", fleet="2xH100-80GB", node_name="node-1"
    )
    return MpsDaemonManager(tmp_path / "mps", lib=lib, launcher=launcher(kubelet)), lib


def spec(lib: FakeDeviceLib) -> MpsDaemonSpec:
    gpu = lib.gpus()[0].uuid
    return MpsDaemonSpec(
        daemon_id=f"{CLAIM}-ab12c",
        gpu_uuids=(gpu,),
        device_uuids=(gpu,),
        settings=MpsSettings(active_thread_percentage=30),
    )


def test_start_creates_a_deployment_pinned_to_the_node(
    tmp_path: Path, api: MemoryApi, kubelet: FakeKubelet
) -> None:
    mps, lib = manager(tmp_path, kubelet)
    s = spec(lib)
    dirs = mps.start(s)
    (deployment,) = api.kind_items("deployments")
    meta = deployment["metadata"]
    assert meta["name"] == f"mps-{s.daemon_id}"
    assert meta["namespace"] == NS
    assert meta["labels"][f"{DRIVER}/claim-uid"] == CLAIM
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeName"] == "node-1"
    (container,) = pod["containers"]
    assert container["image"] == "registry.example/dra-driver:1.2"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["securityContext"] == {"privileged": True}
    host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    mounted = {host[m["name"]]: m["mountPath"] for m in container["volumeMounts"]}
    for d in (dirs.pipe, dirs.log, dirs.shm):
        assert mounted[str(d)] == str(d)  # same path inside as on the host
    assert mounted["/run/nvidia/driver"] == "/driver-root"
    assert container["command"][:2] == [sys.executable, fake_mps_daemon.__file__]
    assert "--background" not in container["command"]  # the container's main process
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == str(dirs.pipe)
    # start returned only once the daemon answered, with the claim's settings
    assert query(dirs.pipe, "get_default_active_thread_percentage") == "30.0"
    assert lib.gpus()[0].compute_mode == ComputeMode.EXCLUSIVE_PROCESS


def test_second_start_adopts_the_deployment(
    tmp_path: Path, api: MemoryApi, kubelet: FakeKubelet
) -> None:
    mps, lib = manager(tmp_path, kubelet)
    s = spec(lib)
    dirs = mps.start(s)
    pid = query(dirs.pipe, "get_server_list")
    launcher(kubelet).start(s, dirs, timeout_s=10)
    assert [m for m, p in api.requests if p == DEPLOYMENTS] == ["POST"]
    assert query(dirs.pipe, "get_server_list") == pid


def test_stop_deletes_the_deployment_and_waits_for_its_pod(
    tmp_path: Path, api: MemoryApi, kubelet: FakeKubelet
) -> None:
    mps, lib = manager(tmp_path, kubelet)
    s = spec(lib)
    dirs = mps.start(s)
    asked = len(api.requests)
    mps.stop(s.daemon_id)
    assert api.kind_items("deployments") == []
    assert api.kind_items("pods") == []
    # The pod outlived its Deployment until the kubelet acted: stop listed it again.
    assert [p for m, p in api.requests[asked:] if m == "GET" and p == PODS] == [PODS, PODS]
    assert not fake_pipe_answers(dirs)
    assert lib.gpus()[0].compute_mode == ComputeMode.DEFAULT
    mps.stop(s.daemon_id)  # idempotent: a Deployment that is gone is fine


def test_restarted_plugin_readopts_a_live_daemon(
    tmp_path: Path, api: MemoryApi, kubelet: FakeKubelet
) -> None:
    mps, lib = manager(tmp_path, kubelet)
    s = spec(lib)
    dirs = mps.start(s)
    pid = query(dirs.pipe, "get_server_list")
    posts = len(api.requests)
    restarted, _ = manager(tmp_path, kubelet)  # a new plugin process, same node and API
    assert restarted.ensure(s.daemon_id) == "adopted"
    assert query(dirs.pipe, "get_server_list") == pid
    assert ("POST", DEPLOYMENTS) not in api.requests[posts:]
    assert ("DELETE", f"{DEPLOYMENTS}/{deployment_name(s.daemon_id)}") not in api.requests


def test_daemon_that_never_answers_is_a_sharing_error(tmp_path: Path) -> None:
    api = MemoryApi()  # nothing runs the Deployment
    slow = DeploymentMpsLauncher(
        api,
        config(),
        command=fake_daemon_command(sys.executable, Path(fake_mps_daemon.__file__)),
        pipe_check=fake_pipe_answers,
        provides_client=True,
        poll_s=0.01,
    )
    dirs = MpsDirs(tmp_path / f"{CLAIM}-ab12c")
    dirs.pipe.mkdir(parents=True)
    s = MpsDaemonSpec(f"{CLAIM}-ab12c", ("GPU-1",), ("GPU-1",), MpsSettings())
    with pytest.raises(SharingApplyError, match="not answering"):
        slow.start(s, dirs, timeout_s=0.05)


@pytest.mark.parametrize("setting", ["image", "namespace", "node_name"])
def test_missing_setting_is_named(setting: str) -> None:
    with pytest.raises(MpsDeploymentConfigError) as err:
        config(**{setting: ""})
    assert setting.split("_")[0] in err.value.setting


def test_names_are_dns_labels() -> None:
    assert deployment_name(f"{CLAIM}-ab12c") == f"mps-{CLAIM}-ab12c"
    long_a, long_b = "A" * 70 + "-1", "A" * 70 + "-2"
    a, b = deployment_name(long_a), deployment_name(long_b)
    assert len(a) <= 63
    assert a != b
    assert a == a.lower()
    assert a[0].isalnum()
    assert a[-1].isalnum()


def test_orphans_of_this_node_are_deleted(
    tmp_path: Path, api: MemoryApi, kubelet: FakeKubelet
) -> None:
    mps, lib = manager(tmp_path, kubelet)
    s = spec(lib)
    mps.start(s)
    other = launcher(kubelet)
    assert other.orphans({CLAIM}) == []
    assert other.orphans(set()) == [
        OrphanDaemon(name=deployment_name(s.daemon_id), claim_uid=CLAIM)
    ]
    assert api.kind_items("deployments") == []
