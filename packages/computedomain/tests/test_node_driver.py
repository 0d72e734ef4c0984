"""The compute-domain plugin's prepare/unprepare against an in-memory API."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from conftest import DRIVER_NS, domain_body
from dra_api_types import ResourceClaim
from dra_computedomain.api_paths import node_path, object_path, request_permission
from dra_computedomain.errors import (
    ChannelInUseError,
    ClaimConfigError,
    DaemonNotReadyError,
    NamespaceMismatchError,
)
from dra_computedomain.names import COMPUTE_DOMAIN_LABEL
from dra_computedomain.node_driver import REQUESTS, ComputeDomainNodeDriver, StalePrepareError
from memory_api import MemoryApi

CLIQUE = "cluster.1"
NODE = "node-a"


def _claim(
    domain_uid: str,
    *,
    device: str = "channel-0",
    namespace: str = "team-a",
    uid: str = "claim-1",
    kind: str | None = None,
) -> ResourceClaim:
    kind = kind or (
        "ComputeDomainChannelConfig" if device == "channel-0" else "ComputeDomainDaemonConfig"
    )
    return ResourceClaim.from_dict(
        {
            "metadata": {"name": f"c-{uid}", "namespace": namespace, "uid": uid},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "x"}}]}},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "r",
                                "driver": "compute-domain.nvidia.com",
                                "pool": NODE,
                                "device": device,
                            }
                        ],
                        "config": [
                            {
                                "source": "FromClaim",
                                "requests": ["r"],
                                "opaque": {
                                    "driver": "compute-domain.nvidia.com",
                                    "parameters": {
                                        "apiVersion": "resource.nvidia.com/v1beta1",
                                        "kind": kind,
                                        "domainID": domain_uid,
                                    },
                                },
                            }
                        ],
                    }
                }
            },
        }
    )


def _setup(
    api: MemoryApi, tmp_path: Path, *, clique_id: str = CLIQUE
) -> tuple[ComputeDomainNodeDriver, str]:
    cd = api.put_object(object_path("ComputeDomain", "team-a", "cd1"), domain_body())
    api.put_object(node_path(NODE), {"metadata": {"name": NODE, "labels": {}}})
    driver = ComputeDomainNodeDriver(
        api,
        node_name=NODE,
        driver_namespace=DRIVER_NS,
        clique_id=clique_id,
        domains_dir=tmp_path / "domains",
        fake=True,
        backoff_s=(0.02, 0.05),
    )
    return driver, str(cd["metadata"]["uid"])


def _ready(api: MemoryApi, uid: str, status: str = "Ready") -> None:
    api.put_object(
        object_path("ComputeDomainClique", DRIVER_NS, f"{uid}.{CLIQUE}"),
        {
            "metadata": {
                "name": f"{uid}.{CLIQUE}",
                "namespace": DRIVER_NS,
                "labels": {COMPUTE_DOMAIN_LABEL: uid},
            },
            "daemons": [
                {
                    "nodeName": NODE,
                    "ipAddress": "10.0.0.1",
                    "cliqueID": CLIQUE,
                    "index": 0,
                    "status": status,
                }
            ],
        },
    )


def _label(api: MemoryApi) -> Any:
    return api.objects[node_path(NODE)]["metadata"]["labels"].get(COMPUTE_DOMAIN_LABEL)


def test_channel_prepare_labels_the_node_waits_for_the_daemon_then_injects(
    api: MemoryApi, tmp_path: Path
) -> None:
    driver, uid = _setup(api, tmp_path)

    async def scenario() -> dict[str, Any]:
        task = asyncio.create_task(driver.prepare(_claim(uid), deadline_s=10))
        await asyncio.sleep(0.2)
        assert _label(api) == uid  # the label is what brings the daemon here
        assert not task.done()
        _ready(api, uid)
        return await task

    edits = asyncio.run(scenario())
    (node,) = edits["channel-0"].device_nodes
    assert node.path == "/dev/nvidia-caps-imex-channels/channel0"
    assert driver.prepared_channels == {"claim-1": uid}
    asyncio.run(driver.unprepare("claim-1"))
    assert _label(api) is None
    used = {request_permission(m, p) for m, p in api.requests}
    assert used == REQUESTS


def test_daemon_never_ready_ends_in_a_retryable_error_naming_the_node(
    api: MemoryApi, tmp_path: Path
) -> None:
    driver, uid = _setup(api, tmp_path)
    _ready(api, uid, "NotReady")
    with pytest.raises(DaemonNotReadyError) as err:
        asyncio.run(driver.prepare(_claim(uid), deadline_s=0.3))
    assert NODE in str(err.value)
    assert not err.value.permanent


def test_namespace_mismatch_fails_at_once(api: MemoryApi, tmp_path: Path) -> None:
    driver, uid = _setup(api, tmp_path)
    with pytest.raises(NamespaceMismatchError):
        asyncio.run(driver.prepare(_claim(uid, namespace="team-b"), deadline_s=30))
    assert _label(api) is None


def test_stale_prepare_after_unprepare_stops_and_takes_the_label_back(
    api: MemoryApi, tmp_path: Path
) -> None:
    # NVIDIA #1162.
    driver, uid = _setup(api, tmp_path)

    async def scenario() -> None:
        task = asyncio.create_task(driver.prepare(_claim(uid), deadline_s=10))
        await asyncio.sleep(0.2)
        assert _label(api) == uid
        await driver.unprepare("claim-1")
        with pytest.raises(StalePrepareError):
            await task

    asyncio.run(scenario())
    assert _label(api) is None
    assert driver.prepared_channels == {}


def test_second_claim_waits_while_the_channel_is_still_prepared(
    api: MemoryApi, tmp_path: Path
) -> None:
    # NVIDIA #641.
    driver, uid = _setup(api, tmp_path)
    _ready(api, uid)
    asyncio.run(driver.prepare(_claim(uid), deadline_s=5))
    with pytest.raises(ChannelInUseError):
        asyncio.run(driver.prepare(_claim(uid, uid="claim-2"), deadline_s=0.2))
    asyncio.run(driver.unprepare("claim-1"))
    asyncio.run(driver.prepare(_claim(uid, uid="claim-2"), deadline_s=5))


def test_daemon_prepare_makes_the_domain_dir_and_env(api: MemoryApi, tmp_path: Path) -> None:
    driver, uid = _setup(api, tmp_path)
    edits = asyncio.run(driver.prepare(_claim(uid, device="daemon-0"), deadline_s=5))
    daemon = edits["daemon-0"]
    assert f"COMPUTE_DOMAIN_UUID={uid}" in daemon.env
    assert f"CLIQUE_ID={CLIQUE}" in daemon.env
    assert (tmp_path / "domains" / uid).is_dir()
    assert daemon.mounts[0].host_path == str(tmp_path / "domains" / uid)


def test_wrong_config_kind_is_permanent_and_names_the_field(api: MemoryApi, tmp_path: Path) -> None:
    driver, uid = _setup(api, tmp_path)
    claim = _claim(uid, device="daemon-0", kind="ComputeDomainChannelConfig")
    with pytest.raises(ClaimConfigError) as err:
        asyncio.run(driver.prepare(claim, deadline_s=5))
    assert "status.allocation.devices.config[0].opaque.parameters" in str(err.value)


def test_no_fabric_node_gets_no_channel_device(api: MemoryApi, tmp_path: Path) -> None:
    driver, uid = _setup(api, tmp_path, clique_id="")
    cd_path = object_path("ComputeDomain", "team-a", "cd1")
    api.objects[cd_path]["status"] = {
        "status": "Ready",
        "nodes": [{"name": NODE, "ipAddress": "10.0.0.1", "cliqueID": "", "status": "Ready"}],
    }
    edits = asyncio.run(driver.prepare(_claim(uid), deadline_s=5))
    assert edits["channel-0"].is_empty()
