"""Start-up recovery deletes MPS daemon Deployments whose claim is no longer prepared (issue 23,
item 2): the plugin's sharing as :func:`open_sharing` builds it with ``--mps-daemon-launcher
deployment`` over the in-memory API server, in the claim engine with the fake GPU backend, the
directory claim source and real checkpoint and CDI files.

A Deployment is an orphan when it runs on this node and its ``claim-uid`` label names no claim
of the checkpoint (a plugin that died between creating it and recording the claim, or a
checkpoint that was lost); the claims of the checkpoint, other nodes' Deployments and other
objects are left alone. A delete the API server refuses never stops the plugin: recovery is
evented, due, and retried at the next stale-claim cleanup.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dra_kube_client import KubeApiError
from dra_kube_client.testing import MemoryApi
from dra_kubelet_core.cdi_store import CDIStore
from dra_kubelet_core.checkpoint import CheckpointStore
from dra_kubelet_core.claim_source import DirectoryClaimSource
from dra_kubelet_core.errors import ClaimRef
from dra_kubelet_core.events import LogEventRecorder
from dra_kubelet_core.metrics import PluginMetrics
from dra_kubelet_core.node_lock import NodeLock
from dra_kubelet_core.state import ClaimEngine
from dra_kubelet_plugin.backend import backend_parts
from dra_kubelet_plugin.cdi import GPU_CDI
from dra_kubelet_plugin.gpu_driver import GpuDriver, GpuPlan
from dra_kubelet_plugin.mps_deployment import deployment_name
from dra_kubelet_plugin.plugin import enumerate_devices, open_sharing
from dra_kubelet_plugin.settings import DRIVER_NAME, build_parser, settings_from_args
from dra_nvlib import DeviceLibConfig, FakeDeviceLib, open_device_lib
from kubelet_plugin_support import make_claim, write_claim

NS = "dra-driver"
NODE = "n1"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NS}/deployments"
LIVE = "11111111-1111-4111-8111-111111111111"
GONE = "22222222-2222-4222-8222-222222222222"
#: A claim prepared on another node (its Deployment runs there).
ELSEWHERE = "33333333-3333-4333-8333-333333333333"


class RefusingApi(MemoryApi):
    """The API server, refusing every ``(method, path)`` in ``refused`` (503) until it is
    taken out: an outage longer than one recovery pass."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: set[tuple[str, str]] = set()

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout_s: float = 30.0,
    ) -> dict[str, Any]:
        if (method, path) in self.refused:
            self.requests.append((method, path))
            raise KubeApiError(method, path, 503, "unavailable", reason="ServiceUnavailable")
        return super().request(
            method, path, query=query, body=body, content_type=content_type, timeout_s=timeout_s
        )


@dataclass
class Node:
    """One simulated node whose plugin runs MPS daemons as Deployments."""

    root: Path
    lib: FakeDeviceLib
    api: RefusingApi

    def engine(self) -> tuple[ClaimEngine[GpuPlan], LogEventRecorder]:
        """A plugin instance: a new process on the same node and API server."""
        plugin_dir = self.root / "plugin"
        plugin_dir.mkdir(parents=True, exist_ok=True)
        parser = build_parser({"NODE_NAME": NODE})
        settings = settings_from_args(
            parser.parse_args(
                [
                    "--kubelet-plugins-directory-path", str(plugin_dir),
                    "--device-backend=fake", "--fake-gpus=2xH100-80GB",
                    "--feature-gates=MPSSupport=true",
                    "--mps-daemon-launcher=deployment",
                    "--mps-daemon-image=registry.example/driver:1",
                    f"--namespace={NS}",
                ]
            )
        )  # fmt: skip
        backend = backend_parts(settings, self.lib)
        driver = GpuDriver(
            driver_name=DRIVER_NAME,
            devices=enumerate_devices(self.lib, None),
            edits=backend.edits,
            sharing=open_sharing(settings, backend, self.api),
        )
        events = LogEventRecorder(NODE)
        engine = ClaimEngine(
            driver=driver,
            pool_name=NODE,
            claims=DirectoryClaimSource(self.root / "claims"),
            checkpoints=CheckpointStore(plugin_dir / "checkpoint.json"),
            cdi=CDIStore(self.root / "cdi", kind=GPU_CDI),
            lock=NodeLock(plugin_dir / "prepare.lock"),
            boot_id="boot-1",
            events=events,
            metrics=PluginMetrics(),
        )
        return engine, events

    def daemon(self, claim_uid: str, *, node: str = NODE) -> str:
        """A daemon Deployment of ``claim_uid`` on ``node``, as the launcher labels it."""
        name = deployment_name(f"{claim_uid}-ab12c")
        labels = {f"{DRIVER_NAME}/mps-daemon": name, f"{DRIVER_NAME}/claim-uid": claim_uid}
        self.api.put_object(
            f"{DEPLOYMENTS}/{name}",
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name, "namespace": NS, "labels": labels},
                "spec": {"template": {"spec": {"nodeName": node}}},
            },
        )
        return name

    def deployments(self) -> set[str]:
        return {d["metadata"]["name"] for d in self.api.kind_items("deployments")}

    def prepared(self, uid: str) -> ClaimRef:
        """A whole-GPU claim of ``uid`` on disk (no MPS of its own)."""
        doc = make_claim(name=f"c-{uid[:4]}", uid=uid, devices=["gpu-0"])
        write_claim(self.root / "claims", doc)
        return ClaimRef(namespace="default", name=doc["metadata"]["name"], uid=uid)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    config = DeviceLibConfig(
        backend="fake", node_name=NODE, fake_fleet="2xH100-80GB", fake_state_path=tmp_path / "g"
    )
    lib = open_device_lib(config)
    assert isinstance(lib, FakeDeviceLib)
    yield Node(root=tmp_path, lib=lib, api=RefusingApi())
    lib.close()


def _due(engine: ClaimEngine[GpuPlan]) -> bool:
    return engine.recovery_due


def _records(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == event]


def test_start_deletes_daemon_deployments_of_claims_no_longer_prepared(
    node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    live = node.prepared(LIVE)

    async def go() -> None:
        first, _ = node.engine()
        await first.start()
        assert (await first.prepare_claims([live]))[LIVE].error == ""
        kept = node.daemon(LIVE)
        orphan = node.daemon(GONE)
        elsewhere = node.daemon(ELSEWHERE, node="node-b")
        unlabelled = node.api.put_object(f"{DEPLOYMENTS}/web", {"metadata": {"name": "web"}})

        caplog.set_level(logging.INFO)
        restarted, events = node.engine()
        await restarted.start()
        assert node.deployments() == {kept, elsewhere, unlabelled["metadata"]["name"]}
        assert ("DELETE", f"{DEPLOYMENTS}/{orphan}") in node.api.requests
        (deleted,) = _records(caplog, "mps_orphan_deleted")
        assert (getattr(deleted, "claim_uid", None), getattr(deleted, "deployment", None)) == (
            GONE,
            orphan,
        )
        assert events.recorded == []
        assert not _due(restarted)
        # The prepared claim's own Deployment goes with its unprepare, not as an orphan.
        assert set(await restarted.prepared_claims()) == {LIVE}

    asyncio.run(go())


def test_a_refused_delete_is_retried_while_serving(
    node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    orphan = node.daemon(GONE)
    node.api.refused.add(("DELETE", f"{DEPLOYMENTS}/{orphan}"))
    caplog.set_level(logging.INFO)

    async def go() -> None:
        engine, events = node.engine()
        await engine.start()  # does not raise: the plugin serves
        assert node.deployments() == {orphan}
        failed = _records(caplog, "mps_orphan_delete_failed")
        assert {getattr(r, "claim_uid", None) for r in failed} == {GONE}
        ((reason, message),) = events.recorded
        assert reason == "RecoveryIncomplete"
        assert orphan in message
        assert GONE in message
        assert _due(engine)
        await engine.cleanup_stale()
        assert _due(engine), "still refused"
        assert len(events.recorded) == 1, "the same failure is evented once"

        node.api.refused.clear()
        await engine.cleanup_stale()
        assert node.deployments() == set()
        assert not _due(engine)
        assert [getattr(r, "claim_uid", None) for r in _records(caplog, "mps_orphan_deleted")] == [
            GONE
        ]

    asyncio.run(go())


def test_a_failed_list_is_retried_while_serving(node: Node) -> None:
    orphan = node.daemon(GONE)
    node.api.refused.add(("GET", DEPLOYMENTS))

    async def go() -> None:
        engine, events = node.engine()
        await engine.start()
        assert node.deployments() == {orphan}
        ((reason, message),) = events.recorded
        assert reason == "RecoveryIncomplete"
        assert f"node {NODE} in namespace {NS}" in message
        assert _due(engine)
        node.api.refused.clear()
        await engine.cleanup_stale()
        assert node.deployments() == set()
        assert not _due(engine)

    asyncio.run(go())
