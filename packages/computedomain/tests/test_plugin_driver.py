"""The compute-domain driver on the kubelet plugin core's claim engine, against an in-memory
API: channel prepare waiting for the daemon, the node label, #641, #1162, daemon prepare, the
CDI spec, recovery."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from computedomain_support import DRIVER_NS, domain_body
from dra_api_types import COMPUTE_DOMAIN_DRIVER, ResourceClaim
from dra_api_types.testing import (
    allocation,
    device_result,
    exactly,
    opaque_config,
    resource_claim,
)
from dra_computedomain.api_paths import node_path, object_path, request_permission
from dra_computedomain.channel_nodes import ChannelNodes
from dra_computedomain.domain_cache import DomainCache
from dra_computedomain.host_imex import FakeHostImex, HostImex
from dra_computedomain.names import COMPUTE_DOMAIN_LABEL, GPU_CLIQUE_LABEL
from dra_computedomain.node_api import REQUESTS, NodeApi
from dra_computedomain.plugin_driver import (
    CDI_KIND,
    NO_CLIQUE_REASON,
    RETRY,
    ComputeDomainDriver,
    compute_domain_slices,
)
from dra_kube_client.testing import MemoryApi
from dra_kubelet_core.cdi_store import CDIStore
from dra_kubelet_core.checkpoint import CheckpointStore
from dra_kubelet_core.errors import ClaimError, ClaimRef
from dra_kubelet_core.events import LogEventRecorder
from dra_kubelet_core.host_devices import HostDeviceNodes, StandInDeviceNodes
from dra_kubelet_core.metrics import PluginMetrics
from dra_kubelet_core.node_lock import NodeLock
from dra_kubelet_core.state import ClaimEngine

CLIQUE = "cluster.1"
NODE = "node-a"


class Claims:
    """A claim source over a dict (namespace, name) -> claim."""

    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], ResourceClaim] = {}

    async def get(self, namespace: str, name: str) -> ResourceClaim | None:
        return self.claims.get((namespace, name))


def _claim(
    domain_uid: str, *, device: str = "channel-0", namespace: str = "team-a", uid: str = "claim-1"
) -> ResourceClaim:
    kind = "ComputeDomainChannelConfig" if device == "channel-0" else "ComputeDomainDaemonConfig"
    parameters = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": kind, "domainID": domain_uid}
    return ResourceClaim.from_dict(
        resource_claim(
            f"c-{uid}",
            namespace=namespace,
            uid=uid,
            requests=[exactly("r", device_class="x")],
            allocation=allocation(
                [device_result(device, request="r", driver=COMPUTE_DOMAIN_DRIVER, pool=NODE)],
                config=[
                    opaque_config(
                        COMPUTE_DOMAIN_DRIVER, parameters, requests=["r"], source="FromClaim"
                    )
                ],
            ),
        )
    )


class Plugin:
    """Engine + driver + claims over one in-memory API, restartable."""

    def __init__(
        self,
        api: MemoryApi,
        tmp: Path,
        clique_id: str = CLIQUE,
        channel_nodes: ChannelNodes | None = None,
        host_imex: HostImex | None = None,
    ) -> None:
        self.api, self.tmp, self.clique_id = api, tmp, clique_id
        self.channel_nodes = channel_nodes
        self.host_imex = host_imex
        self.claims = Claims()
        # The domain cache watches as on a cluster: streams that stay open (a second at a
        # time, so its thread ends soon after close()).
        api.watch_wait_s = 1.0
        self.stop = threading.Event()
        self.domains = DomainCache(api)
        self.domains.start(self.stop)
        assert self.domains.informer.synced.wait(10)
        # One loop for the whole test: the engine finishes a commit after answering.
        self.loop = asyncio.new_event_loop()
        self.start()

    def run(self, coro: Any) -> Any:
        """Run ``coro`` on the plugin's loop."""
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        """Let the engine finish its last commit, then close the loop and the cache."""
        self.stop.set()
        pending = asyncio.all_tasks(self.loop)
        if pending:
            self.loop.run_until_complete(asyncio.wait(pending, timeout=5))
        self.loop.close()

    def start(self) -> None:
        node_api = NodeApi(
            self.api, node_name=NODE, driver_namespace=DRIVER_NS, domains=self.domains
        )
        self.driver = ComputeDomainDriver(
            node_api,
            clique_id=self.clique_id,
            domains_dir=self.tmp / "domains",
            channel_nodes=self.channel_nodes or ChannelNodes(StandInDeviceNodes()),
            host_imex=self.host_imex,
        )
        self.events = LogEventRecorder(NODE)
        self.engine = ClaimEngine(
            driver=self.driver,
            retry=replace(RETRY, deadline_s=10, backoff_s=(0.02, 0.05)),
            hooks=self.driver,
            pool_name=NODE,
            claims=self.claims,
            checkpoints=CheckpointStore(self.tmp / "checkpoint.json"),
            cdi=CDIStore(self.tmp / "cdi", kind=CDI_KIND),
            lock=NodeLock(self.tmp / "lock"),
            boot_id="boot",
            events=self.events,
            metrics=PluginMetrics(),
        )

    def add(self, claim: ResourceClaim) -> ClaimRef:
        meta = claim.metadata
        self.claims.claims[(meta.namespace or "", meta.name or "")] = claim
        return ClaimRef(namespace=meta.namespace or "", name=meta.name or "", uid=meta.uid or "")


@pytest.fixture
def setup(api: MemoryApi, tmp_path: Path) -> Iterator[tuple[Plugin, str]]:
    cd = api.put_object(object_path("ComputeDomain", "team-a", "cd1"), domain_body())
    api.put_object(node_path(NODE), {"metadata": {"name": NODE, "labels": {}}})
    (tmp_path / "cdi").mkdir()
    plugin = Plugin(api, tmp_path)
    plugin.run(plugin.engine.start())
    yield plugin, str(cd["metadata"]["uid"])
    plugin.close()


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


def _spec(plugin: Plugin, uid: str) -> dict[str, Any]:
    return dict(json.loads((plugin.tmp / "cdi" / CDI_KIND.spec_file_name(uid)).read_text()))


def test_channel_waits_for_the_daemon_with_the_label_on_then_gets_its_channel(
    api: MemoryApi, setup: tuple[Plugin, str]
) -> None:
    plugin, uid = setup
    ref = plugin.add(_claim(uid))

    async def scenario() -> None:
        task = asyncio.create_task(plugin.engine.prepare(ref))
        await asyncio.sleep(0.3)
        assert _label(api) == uid  # the label brings the daemon; it stays while waiting
        assert not task.done()
        _ready(api, uid)
        devices = await task
        assert [d.device_name for d in devices] == ["channel-0"]

    plugin.run(scenario())
    spec = _spec(plugin, "claim-1")
    nodes = spec["devices"][0]["containerEdits"]["deviceNodes"]
    assert nodes == [
        {
            "path": "/dev/nvidia-caps-imex-channels/channel0",
            "hostPath": "/dev/null",
            "permissions": "rw",
        }
    ]
    plugin.run(plugin.engine.unprepare(ref))
    assert _label(api) is None
    assert not (plugin.tmp / "cdi" / CDI_KIND.spec_file_name("claim-1")).exists()
    used = {request_permission(m, p) for m, p in api.requests}
    assert used == REQUESTS


def test_channel_prepare_reads_its_domain_from_the_cache_not_a_list(
    api: MemoryApi, setup: tuple[Plugin, str]
) -> None:
    # Many domains in the cluster; a prepare needs one. The cache listed them once at start.
    plugin, uid = setup
    for i in range(300):
        api.put_object(object_path("ComputeDomain", f"ns-{i}", "cd"), domain_body("cd", f"ns-{i}"))
    _ready(api, uid)
    before = len(api.requests)
    ref = plugin.add(_claim(uid))
    plugin.run(plugin.engine.prepare(ref))
    during = [(m, p) for m, p in api.requests[before:] if m != "WATCH"]
    assert [request_permission(m, p) for m, p in during if m == "GET"] == [
        ("", "nodes", "get"),
        ("resource.nvidia.com", "computedomaincliques", "get"),
    ]
    domain_lists = [p for m, p in api.requests if m == "GET" and p.endswith("/computedomains")]
    assert len(domain_lists) == 1  # the cache's first list, before any prepare


def test_daemon_never_ready_is_a_retryable_error_and_the_label_stays(
    api: MemoryApi, setup: tuple[Plugin, str]
) -> None:
    plugin, uid = setup
    plugin.engine.retry = replace(RETRY, deadline_s=0.3, backoff_s=(0.02, 0.05))
    _ready(api, uid, "NotReady")
    ref = plugin.add(_claim(uid))
    with pytest.raises(ClaimError) as err:
        plugin.run(plugin.engine.prepare(ref))
    assert err.value.retryable
    assert err.value.reason == "DaemonNotReady"
    assert _label(api) == uid
    # The pod goes away: its unprepare takes the label off.
    plugin.run(plugin.engine.unprepare(ref))
    assert _label(api) is None


def test_namespace_mismatch_is_permanent(api: MemoryApi, setup: tuple[Plugin, str]) -> None:
    plugin, uid = setup
    ref = plugin.add(_claim(uid, namespace="team-b"))
    with pytest.raises(ClaimError) as err:
        plugin.run(plugin.engine.prepare(ref))
    assert not err.value.retryable
    assert err.value.reason == "NamespaceMismatch"
    assert _label(api) is None
    assert plugin.run(plugin.engine.prepared_claims()) == {}


def test_second_domain_on_the_node_is_refused(api: MemoryApi, setup: tuple[Plugin, str]) -> None:
    plugin, uid = setup
    plugin.engine.retry = replace(RETRY, deadline_s=0.2, backoff_s=(0.02, 0.05))
    other = api.put_object(object_path("ComputeDomain", "team-a", "cd2"), domain_body("cd2"))
    # The first domain's workload waits for its daemon: the node is labelled for it.
    with pytest.raises(ClaimError):
        plugin.run(plugin.engine.prepare(plugin.add(_claim(uid))))
    assert _label(api) == uid
    second = plugin.add(_claim(other["metadata"]["uid"], uid="claim-2"))
    with pytest.raises(ClaimError) as err:
        plugin.run(plugin.engine.prepare(second))
    assert err.value.reason == "NodeTaken"
    assert uid in str(err.value)
    assert _label(api) == uid


def test_double_channel_prepare_waits_for_the_old_claims_unprepare(
    api: MemoryApi, setup: tuple[Plugin, str]
) -> None:
    # NVIDIA #641: claim-2 got channel-0 while claim-1 is still prepared.
    plugin, uid = setup
    _ready(api, uid)
    first = plugin.add(_claim(uid))
    plugin.run(plugin.engine.prepare(first))
    second = plugin.add(_claim(uid, uid="claim-2"))

    async def scenario() -> None:
        task = asyncio.create_task(plugin.engine.prepare(second))
        await asyncio.sleep(0.3)
        assert not task.done()
        await plugin.engine.unprepare(first)
        await task

    plugin.run(scenario())
    assert set(plugin.run(plugin.engine.prepared_claims())) == {"claim-2"}
    assert _label(api) == uid


def test_unprepare_during_a_waiting_prepare_stops_it(
    api: MemoryApi, setup: tuple[Plugin, str]
) -> None:
    # NVIDIA #1162: nothing of the claim survives its unprepare.
    plugin, uid = setup
    ref = plugin.add(_claim(uid))

    async def scenario() -> None:
        task = asyncio.create_task(plugin.engine.prepare(ref))
        await asyncio.sleep(0.3)
        await plugin.engine.unprepare(ref)
        _ready(api, uid)  # too late: the claim is gone
        with pytest.raises(ClaimError) as err:
            await task
        assert err.value.reason == "StalePrepare"

    plugin.run(scenario())
    assert _label(api) is None
    assert plugin.run(plugin.engine.prepared_claims()) == {}
    assert not (plugin.tmp / "cdi" / CDI_KIND.spec_file_name("claim-1")).exists()


def test_daemon_prepare_and_restart_recovery(api: MemoryApi, setup: tuple[Plugin, str]) -> None:
    plugin, uid = setup
    daemon = _claim(uid, device="daemon-0", uid="d-1", namespace=DRIVER_NS)
    plugin.run(plugin.engine.prepare(plugin.add(daemon)))
    env = _spec(plugin, "d-1")["devices"][0]["containerEdits"]["env"]
    assert f"COMPUTE_DOMAIN_UUID={uid}" in env
    assert f"CLIQUE_ID={CLIQUE}" in env
    assert (plugin.tmp / "domains" / uid).is_dir()
    _ready(api, uid)
    plugin.run(plugin.engine.prepare(plugin.add(_claim(uid))))
    # A restarted plugin knows the channel claim: its unprepare still takes the label off.
    plugin.start()
    plugin.run(plugin.engine.start())
    assert _label(api) == uid
    plugin.run(plugin.engine.unprepare(ClaimRef("team-a", "c-claim-1", "claim-1")))
    assert _label(api) is None


@pytest.mark.parametrize("namespace", ["team-a", "team-b"], ids=["domains-own", "another"])
def test_daemon_claim_outside_the_driver_namespace_is_refused_per_claim(
    api: MemoryApi, setup: tuple[Plugin, str], namespace: str
) -> None:
    # Another namespace must not mount the domain's IMEX config (nor its own: the controller
    # creates daemon claims in the driver namespace only).
    plugin, uid = setup
    stolen = plugin.add(_claim(uid, device="daemon-0", uid="d-x", namespace=namespace))
    api.requests.clear()
    with pytest.raises(ClaimError) as err:
        plugin.run(plugin.engine.prepare(stolen))
    assert not err.value.retryable
    assert err.value.reason == "DaemonNamespace"
    assert err.value.field == "metadata.namespace"
    assert err.value.claim == stolen
    assert f"c-d-x: namespace {namespace!r} is not the driver namespace {DRIVER_NS!r}" in str(
        err.value
    )
    assert not (plugin.tmp / "domains" / uid).exists()
    assert not (plugin.tmp / "cdi" / CDI_KIND.spec_file_name("d-x")).exists()
    assert plugin.run(plugin.engine.prepared_claims()) == {}
    # Refused before the domain is looked up: the claim learns nothing of it. The cache's
    # own watch reopens every second or so whatever the claim does (CI saw one land here).
    assert not [p for m, p in api.requests if m != "WATCH" and "computedomains" in p]
    # The driver's own daemon claim of the same domain still prepares.
    own = plugin.add(_claim(uid, device="daemon-0", uid="d-1", namespace=DRIVER_NS))
    plugin.run(plugin.engine.prepare(own))
    assert (plugin.tmp / "domains" / uid).is_dir()


def test_restart_removes_a_label_no_claim_holds(api: MemoryApi, setup: tuple[Plugin, str]) -> None:
    plugin, uid = setup
    labels = api.objects[node_path(NODE)]["metadata"]["labels"]
    labels[COMPUTE_DOMAIN_LABEL] = uid
    plugin.start()
    plugin.run(plugin.engine.start())
    assert _label(api) is None


def test_slice_has_daemon_and_channel() -> None:
    (slice_,) = compute_domain_slices("node-a", "uid-n", 3)
    assert slice_["spec"]["pool"] == {"name": "node-a", "generation": 3, "resourceSliceCount": 1}
    assert [d["name"] for d in slice_["spec"]["devices"]] == ["daemon-0", "channel-0"]
    assert slice_["metadata"]["ownerReferences"][0]["uid"] == "uid-n"


def _real_node_plugin(api: MemoryApi, tmp: Path, proc_devices: str) -> Plugin:
    for directory in ("host", "proc", "cdi"):
        (tmp / directory).mkdir(parents=True)
    (tmp / "proc" / "devices").write_text(proc_devices)
    plugin = Plugin(
        api, tmp, channel_nodes=ChannelNodes(HostDeviceNodes(tmp / "host"), tmp / "proc")
    )
    plugin.run(plugin.engine.start())
    return plugin


def test_real_node_creates_the_missing_channel_node_and_injects_the_host_node(
    api: MemoryApi, setup: tuple[Plugin, str], tmp_path: Path
) -> None:
    _, uid = setup
    plugin = _real_node_plugin(
        api, tmp_path / "real", "Character devices:\n234 nvidia-caps-imex-channels\n"
    )
    try:
        probe = tmp_path / "probe"
        try:
            os.mknod(probe, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("mknod of a character device is not permitted here (needs CAP_MKNOD)")
        _ready(api, uid)
        ref = plugin.add(_claim(uid))
        plugin.run(plugin.engine.prepare(ref))
        node = plugin.tmp / "host/dev/nvidia-caps-imex-channels/channel0"
        assert os.major(node.stat().st_rdev) == 234
        nodes = _spec(plugin, "claim-1")["devices"][0]["containerEdits"]["deviceNodes"]
        assert nodes == [{"path": "/dev/nvidia-caps-imex-channels/channel0", "permissions": "rw"}]
        plugin.run(plugin.engine.unprepare(ref))
    finally:
        plugin.close()


def test_real_node_without_the_channels_major_fails_the_claim_and_drops_the_label(
    api: MemoryApi, setup: tuple[Plugin, str], tmp_path: Path
) -> None:
    _, uid = setup
    plugin = _real_node_plugin(api, tmp_path / "real", "Character devices:\n195 nvidia\n")
    try:
        _ready(api, uid)
        ref = plugin.add(_claim(uid))
        with pytest.raises(ClaimError) as err:
            plugin.run(plugin.engine.prepare(ref))
        assert not err.value.retryable
        assert err.value.reason == "ChannelDevice"
        assert "/dev/nvidia-caps-imex-channels/channel0" in str(err.value)
        assert "c-claim-1" in str(err.value)
        assert _label(api) is None
        assert not (plugin.tmp / "cdi" / CDI_KIND.spec_file_name("claim-1")).exists()
    finally:
        plugin.close()


def test_gpu_clique_label_follows_the_clique_id(api: MemoryApi) -> None:
    # NVIDIA's gpuCliqueLabelEnabled: the node says its clique, as GFD's label did; a node
    # without one (fabric gone) loses a stale label. Other labels are kept.
    api.put_object(node_path(NODE), {"metadata": {"name": NODE, "labels": {"zone": "z1"}}})
    node_api = NodeApi(api, node_name=NODE, driver_namespace=DRIVER_NS, domains=DomainCache(api))
    node_api.set_clique_label("c7f1.1")
    labels = api.objects[node_path(NODE)]["metadata"]["labels"]
    assert labels == {"zone": "z1", GPU_CLIQUE_LABEL: "c7f1.1"}
    node_api.set_clique_label("")
    assert api.objects[node_path(NODE)]["metadata"]["labels"] == {"zone": "z1"}
    assert {request_permission(m, p) for m, p in api.requests} <= REQUESTS


def test_host_managed_imex_waits_for_the_hosts_daemon_and_labels_nothing(
    api: MemoryApi, tmp_path: Path
) -> None:
    # imex.mode=hostManaged: no domain daemon; the channel waits for the host's nvidia-imex
    # (here the stand-in, a real process on its Unix command socket), the node stays unlabelled.
    from dra_computedomain.fake_host_imex import start_host_imex

    cd = api.put_object(object_path("ComputeDomain", "team-a", "cd1"), domain_body())
    uid = str(cd["metadata"]["uid"])
    api.put_object(node_path(NODE), {"metadata": {"name": NODE, "labels": {}}})
    (tmp_path / "cdi").mkdir()
    with start_host_imex(started=False) as host:
        plugin = Plugin(api, tmp_path, host_imex=FakeHostImex(str(host.socket)))
        try:
            plugin.run(plugin.engine.start())
            ref = plugin.add(_claim(uid))

            async def scenario() -> None:
                task = asyncio.create_task(plugin.engine.prepare(ref))
                await asyncio.sleep(0.3)
                assert not task.done()  # the host's daemon is not up: retried
                await asyncio.to_thread(host.start)
                devices = await task
                assert [d.device_name for d in devices] == ["channel-0"]

            plugin.run(scenario())
            assert _label(api) is None
            nodes = _spec(plugin, "claim-1")["devices"][0]["containerEdits"]["deviceNodes"]
            assert [n["path"] for n in nodes] == ["/dev/nvidia-caps-imex-channels/channel0"]
            plugin.run(plugin.engine.unprepare(ref))
            assert _label(api) is None
            assert ("PATCH", node_path(NODE)) not in api.requests  # no label, ever
        finally:
            plugin.close()
    assert compute_domain_slices(NODE, None, 1, daemons=False)[0]["spec"]["devices"] == [
        {"name": "channel-0", "attributes": {"type": {"string": "channel"}, "id": {"int": 0}}}
    ]


def test_channel_on_a_node_without_a_clique_names_no_cdi_device(
    api: MemoryApi, tmp_path: Path
) -> None:
    """NVIDIA's behaviour: without an NVLink clique a channel gets no IMEX channel nodes and
    the claim prepares with no CDI device (a device without edits makes the CDI library refuse
    the spec, so the container would never start); the daemon claim still gets its spec."""
    body = domain_body()
    body["status"] = {
        "status": "Ready",
        "nodes": [{"name": NODE, "ipAddress": "10.0.0.1", "cliqueID": "", "status": "Ready"}],
    }
    uid = str(
        api.put_object(object_path("ComputeDomain", "team-a", "cd1"), body)["metadata"]["uid"]
    )
    api.put_object(node_path(NODE), {"metadata": {"name": NODE, "labels": {}}})
    (tmp_path / "cdi").mkdir()
    plugin = Plugin(api, tmp_path, clique_id="")
    try:
        plugin.run(plugin.engine.start())
        channel = plugin.add(_claim(uid))
        devices = plugin.run(plugin.engine.prepare(channel))
        assert [(d.device_name, d.cdi_device_ids) for d in devices] == [("channel-0", ())]
        # The prepare succeeds, so the kubelet posts nothing: the claim's event says why.
        (event,) = plugin.events.claim_recorded
        assert event[0] == channel
        assert event[1] == NO_CLIQUE_REASON
        assert str(channel) in event[2]
        assert f"node {NODE} has no NVLink clique" in event[2]
        assert not (tmp_path / "cdi" / CDI_KIND.spec_file_name("claim-1")).exists()
        assert _label(api) == uid
        daemon = plugin.run(
            plugin.engine.prepare(
                plugin.add(_claim(uid, device="daemon-0", uid="d-1", namespace=DRIVER_NS))
            )
        )
        assert [d.cdi_device_ids for d in daemon] == [(CDI_KIND.device_id("d-1", "daemon-0"),)]
        assert "CLIQUE_ID=" in _spec(plugin, "d-1")["devices"][0]["containerEdits"]["env"]
        # A restarted plugin still knows the prepared channel claim; its unprepare is clean.
        plugin.start()
        plugin.run(plugin.engine.start())
        plugin.run(plugin.engine.unprepare(channel))
        assert _label(api) is None
    finally:
        plugin.close()
