"""The allocation controller: seed metrics, DRAUnsatisfiable text and Events, Lease, HTTP."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from typing import Any

import pytest
from controller_objects import (
    DRIVER,
    GPU_CLASS,
    MIG_CLASS,
    claim,
    gpu,
    mig,
    node,
    pod,
    slice_,
    stores,
)
from dra_allocator.cel_engine import CelEngine
from dra_allocator.features import Features
from dra_allocator.gaps import capacity_bounds
from dra_controller.allocation_controller import (
    AllocationController,
    AvailableSeries,
    ClaimSeries,
    ControllerMetrics,
    Settings,
    claim_series,
    free_devices,
)
from dra_controller.allocation_controller import view as view_module
from dra_controller.allocation_controller.controller import pause_after
from dra_controller.allocation_controller.diagnosis import make_cluster
from dra_controller.allocation_controller.events import EventPublisher, TokenBucket
from dra_controller.allocation_controller.view import ClusterView
from dra_controller.metrics_http import serve
from dra_kube_client import DelegatedAuth, ServingSecurity
from dra_kube_client.testing import MemoryApi, Reviews
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

MEM_40 = f"device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0"


def _cluster(objects: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    snap = ClusterView(stores=stores(objects)).snapshot()
    return snap, make_cluster(snap, engine=CelEngine(), features=Features())


def _fleet() -> list[dict[str, Any]]:
    return [
        GPU_CLASS,
        MIG_CLASS,
        node("n1"),
        node("n2"),
        node("n3"),
        slice_("n1", [gpu("gpu-0", "8Gi"), gpu("gpu-1", "8Gi")]),
        slice_("n2", [gpu("gpu-0", "12Gi")]),
        slice_("n3", [gpu("gpu-0", "16Gi", product="NVIDIA H100"), mig("mig-0", "1g.5gb")]),
    ]


def test_claim_series_by_class_allocated_pending_deleting() -> None:
    objs = [
        *_fleet(),
        claim("held", allocated_on=("n1", "gpu-0")),
        claim("waiting", cls="mig.nvidia.com"),
        claim("going")
        | {
            "metadata": {
                "name": "going",
                "namespace": "team",
                "deletionTimestamp": "2026-01-01T00:00:00Z",
                "resourceVersion": "1",
            }
        },
    ]
    snap, _ = _cluster(objs)
    allocated, pending = claim_series(snap.claims)
    assert allocated == [ClaimSeries("team", "held", "gpu.nvidia.com")]
    assert pending == [ClaimSeries("team", "waiting", "mig.nvidia.com")]


def test_free_devices_match_classes_and_skip_held_and_tainted() -> None:
    tainted = gpu("gpu-1", "8Gi", taints=[{"key": "broken", "effect": "NoSchedule"}])
    objs = [
        *_fleet()[:-3],
        slice_("n1", [gpu("gpu-0", "8Gi"), tainted]),
        slice_("n3", [gpu("gpu-0", "16Gi", product="NVIDIA H100"), mig("mig-0", "1g.5gb")]),
        claim("held", allocated_on=("n3", "gpu-0")),
    ]
    _, cluster = _cluster(objs)
    free = free_devices(cluster)
    assert free[AvailableSeries("n1", "gpu.nvidia.com", "NVIDIA A100")] == 1
    assert free[AvailableSeries("n3", "gpu.nvidia.com", "NVIDIA H100")] == 0  # held, still listed
    assert AvailableSeries("n3", "gpu.nvidia.com", "NVIDIA H100") in free
    assert free[AvailableSeries("n3", "mig.nvidia.com", "1g.5gb")] == 1
    assert AvailableSeries("n1", "mig.nvidia.com", "NVIDIA A100") not in free


def test_free_devices_respect_shared_counters() -> None:
    counters = [{"name": "gpu-0-counters", "counters": {"memory": {"value": "10Gi"}}}]
    whole = gpu(
        "gpu-0",
        "10Gi",
        consumesCounters=[
            {"counterSet": "gpu-0-counters", "counters": {"memory": {"value": "10Gi"}}}
        ],
    )
    part = mig(
        "mig-0",
        "1g.5gb",
        consumesCounters=[
            {"counterSet": "gpu-0-counters", "counters": {"memory": {"value": "5Gi"}}}
        ],
    )
    shared = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "n1-counters", "resourceVersion": "1"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 2},
            "sharedCounters": counters,
        },
    }
    devices = slice_("n1", [whole, part])
    devices["spec"]["pool"]["resourceSliceCount"] = 2
    objs = [
        GPU_CLASS,
        MIG_CLASS,
        node("n1"),
        shared,
        devices,
        claim("m", cls="mig.nvidia.com", allocated_on=("n1", "mig-0")),
    ]
    _, cluster = _cluster(objs)
    free = free_devices(cluster)
    # The MIG device holds half the counter: the whole GPU no longer fits.
    assert free[AvailableSeries("n1", "gpu.nvidia.com", "NVIDIA A100")] == 0
    assert free[AvailableSeries("n1", "mig.nvidia.com", "1g.5gb")] == 0


def test_capacity_bounds_parsed_from_selectors() -> None:
    bounds = capacity_bounds(
        MEM_40 + f" && device.capacity['{DRIVER}'].memory.isGreaterThan(quantity('1Gi'))"
    )
    assert [(b.name, b.op, b.text) for b in bounds] == [
        ("memory", ">=", "40Gi"),
        ("memory", ">", "1Gi"),
    ]


def _controller(
    objs: list[dict[str, Any]],
    api: MemoryApi,
    *,
    leader: bool = True,
    clock: list[float] | None = None,
) -> tuple[AllocationController, ControllerMetrics]:
    now = clock if clock is not None else [0.0]
    metrics = ControllerMetrics()
    publisher = EventPublisher(
        api,
        instance="ctl-0",
        repeat_s=600,
        bucket=TokenBucket(100, 100, clock=lambda: now[0]),
        clock=lambda: now[0],
        on_outcome=lambda reason, outcome: metrics.events.labels(reason, outcome).inc(),
    )
    ctl = AllocationController(
        stores(objs),
        metrics=metrics,
        publisher=publisher,
        is_leader=lambda: leader,
        settings=Settings(diagnose_every_s=30),
        clock=lambda: now[0],
    )
    return ctl, metrics


def posted(api: MemoryApi) -> list[dict[str, Any]]:
    """The Events the controller created, oldest first."""
    events = api.kind_items("events")
    return sorted(events, key=lambda e: int(e["metadata"]["resourceVersion"]))


def test_unschedulable_pod_gets_events_naming_the_memory_gap() -> None:
    objs = [*_fleet(), claim("big", selector=MEM_40), pod("trainer", "big")]
    api = MemoryApi()
    ctl, _ = _controller(objs, api)
    _, findings = ctl.reconcile()
    expected = (
        "ResourceClaim team/big cannot be allocated on any of 3 node(s): request gpu: "
        "memory >= 40Gi: best node n3 has 16Gi"
    )
    assert [f.message for f in findings] == [expected]
    assert [p for m, p in api.requests if m == "POST"] == ["/api/v1/namespaces/team/events"] * 2
    events = posted(api)
    assert [(e["involvedObject"]["kind"], e["reason"], e["message"]) for e in events] == [
        ("Pod", "DRAUnsatisfiable", expected),
        ("ResourceClaim", "DRAUnsatisfiable", expected),
    ]
    assert events[0]["involvedObject"]["uid"] == "uid-pod-trainer"


def test_count_shortfall_names_closest_node() -> None:
    objs = [*_fleet(), claim("two", cls="mig.nvidia.com"), pod("p", "two")]
    objs[-2]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    ctl, _ = _controller(objs, MemoryApi())
    _, findings = ctl.reconcile()
    assert len(findings) == 1
    assert (
        "closest node n3: request gpu needs 2 device(s) of class mig.nvidia.com, 1 usable"
        in findings[0].message
    )


def test_events_are_deduplicated_rate_limited_and_leader_only() -> None:
    objs = [*_fleet(), claim("big", selector=MEM_40), pod("trainer", "big")]
    now = [0.0]
    api = MemoryApi()
    ctl, metrics = _controller(objs, api, clock=now)
    ctl.reconcile()
    now[0] = 31.0  # diagnosed again, same message: not posted again
    ctl.reconcile()
    assert len(posted(api)) == 2
    text = generate_latest(metrics.registry).decode()
    assert (
        _sample(
            text,
            "dra_allocation_controller_events_total",
            outcome="deduplicated",
            reason="DRAUnsatisfiable",
        )
        == 2.0
    )
    follower_api = MemoryApi()
    follower, _ = _controller(objs, follower_api, leader=False)
    follower.reconcile()
    assert posted(follower_api) == []
    bucket = TokenBucket(rate_per_s=1, burst=2, clock=lambda: 0.0)
    assert [bucket.take() for _ in range(3)] == [True, True, False]


def test_schedulable_or_fitting_pods_get_no_event() -> None:
    objs = [
        *_fleet(),
        claim("small"),
        pod("fits", "small"),
        claim("big", selector=MEM_40),
        pod("new", "big", unschedulable=False),
    ]
    api = MemoryApi()
    ctl, _ = _controller(objs, api)
    _, findings = ctl.reconcile()
    assert findings == []
    assert posted(api) == []


def test_metrics_exposition_has_the_seed_series() -> None:
    objs = [*_fleet(), claim("held", allocated_on=("n1", "gpu-0")), claim("big", selector=MEM_40)]
    ctl, metrics = _controller(objs, MemoryApi())
    ctl.reconcile()
    text = generate_latest(metrics.registry).decode()
    assert (
        _sample(
            text,
            "kube_resourceclaim_allocated",
            name="held",
            namespace="team",
            resource_class="gpu.nvidia.com",
        )
        == 1.0
    )
    assert (
        _sample(
            text,
            "kube_resourceclaim_pending",
            name="big",
            namespace="team",
            resource_class="gpu.nvidia.com",
        )
        == 1.0
    )
    assert (
        _sample(
            text,
            "node_dra_resource_available",
            attribute="NVIDIA A100",
            node="n1",
            resource_class="gpu.nvidia.com",
        )
        == 1.0
    )
    assert (
        _sample(
            text,
            "node_dra_resource_available",
            attribute="1g.5gb",
            node="n3",
            resource_class="mig.nvidia.com",
        )
        == 1.0
    )
    assert "dra_allocation_controller_reconcile_duration_seconds_count 1.0" in text


def test_view_rereads_only_changed_objects_and_skips_unreadable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    st = stores([*_fleet(), claim("a"), claim("b")])
    errors: list[str] = []
    view = ClusterView(stores=st, on_error=lambda kind, key, exc: errors.append(key))
    first = view.snapshot()
    second = view.snapshot()
    assert second.slices[0] is first.slices[0]  # same parse, same device selector caches
    bad = claim("b", rv="2")
    bad["spec"]["devices"]["requests"] = "not a list"
    st["ResourceClaim"].upsert(bad)
    third = view.snapshot()
    assert [c.name for c in third.claims] == ["a"]
    view.snapshot()
    assert errors == ["team/b"]  # once per resourceVersion, not per reconcile


def test_view_looks_only_into_objects_the_caches_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    st = stores([*_fleet(), claim("a"), claim("b")])
    view = ClusterView(stores=st)
    first = view.snapshot()
    looked: list[object] = []
    real = view_module.resource_version

    def counting(obj: Any) -> str:
        looked.append(obj)
        return real(obj)

    monkeypatch.setattr(view_module, "resource_version", counting)
    view.snapshot()
    assert looked == []  # every cached object is still the one read last time
    # A relist hands over new objects at the same resourceVersion: looked at, not re-read.
    relisted = claim("a")
    st["ResourceClaim"].upsert(relisted)
    again = view.snapshot()
    assert looked == [relisted]
    assert again.claims[0] is first.claims[0]


def _sample(text: str, metric: str, /, **labels: str) -> float | None:
    """The value of one sample of an exposition text."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == metric and sample.labels == labels:
                return float(sample.value)
    return None


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.read()


def test_http_endpoints() -> None:
    metrics = ControllerMetrics()
    ready = [False]
    server = serve(("127.0.0.1", 0), registry=metrics.registry, ready=lambda: ready[0])
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert _get(f"{base}/healthz") == (200, b"ok\n")
        assert _get(f"{base}/readyz")[0] == 503
        ready[0] = True
        assert _get(f"{base}/readyz")[0] == 200
        status, body = _get(f"{base}/metrics")
        assert status == 200
        assert "# TYPE kube_resourceclaim_pending gauge" in body.decode()
    finally:
        server.shutdown()
        server.server_close()


def test_metrics_over_https_need_an_allowed_token_and_probes_stay_open() -> None:
    metrics = ControllerMetrics()
    reviews = Reviews(
        tokens={"prom": "prometheus", "user": "alice"}, allowed={("prometheus", "/metrics", "get")}
    )
    server = serve(
        ("127.0.0.1", 0),
        registry=metrics.registry,
        ready=lambda: True,
        tls=ServingSecurity().tls_context("127.0.0.1"),
        auth=DelegatedAuth(reviews.transport()),
    )
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE

    def get(path: str, token: str | None = None) -> tuple[int, str]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        request = urllib.request.Request(f"{base}{path}", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            with err:
                return err.code, err.read().decode()

    base = f"https://127.0.0.1:{server.server_address[1]}"
    try:
        assert get("/healthz") == (200, "ok\n")
        assert get("/readyz")[0] == 200
        unauthenticated, denied = get("/metrics"), get("/metrics", "user")
        assert (unauthenticated[0], denied[0]) == (401, 403)
        assert "kube_resourceclaim" not in unauthenticated[1] + denied[1]
        status, body = get("/metrics", "prom")
        assert status == 200
        assert "# TYPE kube_resourceclaim_pending gauge" in body
    finally:
        server.shutdown()
        server.server_close()


def test_reconciles_keep_node_pools_until_a_slice_changes() -> None:
    ctl, _ = _controller([*_fleet(), pod("p", "a")], MemoryApi())
    key = AvailableSeries("n1", "gpu.nvidia.com", "NVIDIA A100")
    series, _ = ctl.reconcile()
    pools = ctl._availability_cache._nodes["n1"].pools
    assert series.available[key] == 2
    store = ctl.view.stores
    store["ResourceClaim"].upsert(claim("a", allocated_on=("n1", "gpu-0")))
    series, _ = ctl.reconcile()
    # A claim changed, no slice did: the same pools, the counts of the new allocations.
    assert ctl._availability_cache._nodes["n1"].pools is pools
    assert series.available[key] == 1
    store["ResourceSlice"].upsert(slice_("n1", [gpu("gpu-0", "8Gi")], rv="2"))
    series, _ = ctl.reconcile()
    assert ctl._availability_cache._nodes["n1"].pools is not pools
    assert series.available[key] == 0


def test_pause_bounds_the_share_of_a_core_reconciles_take() -> None:
    settings = Settings(debounce_s=0.2, max_busy=0.1, max_pause_s=1.0)
    assert pause_after(0.001, settings) == 0.2  # fast reconciles: the debounce
    assert pause_after(0.05, settings) == pytest.approx(0.45)  # 0.05 s of every 0.5 s
    assert pause_after(5.0, settings) == 1.0  # slow ones: the metrics lag stays bounded
    assert pause_after(5.0, Settings(debounce_s=0.2, max_busy=1.0)) == 0.2


def test_availability_cache_recomputes_only_changed_nodes() -> None:
    """Clusters built without a pool cache (each with its own slice index): every node's
    key is checked, and a node nothing changed on keeps its counts (the controller's own
    wiring, with a pool cache, is tested in test_availability_cache.py)."""
    from dra_controller.allocation_controller.availability import AvailabilityCache

    st = stores(_fleet())
    view = ClusterView(stores=st)
    cache = AvailabilityCache()

    def counts() -> dict[AvailableSeries, int]:
        snap = view.snapshot()
        return dict(
            free_devices(make_cluster(snap, engine=CelEngine(), features=Features()), cache)
        )

    before = counts()
    n2 = cache._nodes["n2"].counts
    st["ResourceClaim"].upsert(claim("held", allocated_on=("n1", "gpu-0")))
    after = counts()
    assert cache._nodes["n2"].counts is n2  # nothing on n2 changed
    key = AvailableSeries("n1", "gpu.nvidia.com", "NVIDIA A100")
    assert (before[key], after[key]) == (2, 1)


def test_unsatisfiable_series_counts_only_claims_a_waiting_pod_cannot_get() -> None:
    objs = [
        *_fleet(),
        claim("big", selector=MEM_40),
        pod("trainer", "big"),
        claim("ahead", selector=MEM_40),  # created before its job: pending, no pod waits
        claim("small"),
        pod("fits", "small"),  # unschedulable for another reason: the claim fits somewhere
    ]
    ctl, metrics = _controller(objs, MemoryApi())
    series, _ = ctl.reconcile()
    assert series.unsatisfiable == [ClaimSeries("team", "big", "gpu.nvidia.com")]
    assert {s.name for s in series.pending} == {"big", "ahead", "small"}
    text = generate_latest(metrics.registry).decode()
    assert (
        _sample(
            text,
            "kube_resourceclaim_unsatisfiable",
            name="big",
            namespace="team",
            resource_class="gpu.nvidia.com",
        )
        == 1.0
    )
    names = {
        s.labels["name"]
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "kube_resourceclaim_unsatisfiable"
    }
    assert names == {"big"}


def test_unsatisfiable_series_without_events_and_not_on_followers() -> None:
    objs = [*_fleet(), claim("big", selector=MEM_40), pod("trainer", "big")]
    quiet = AllocationController(stores(objs), metrics=ControllerMetrics(), publisher=None)
    series, _ = quiet.reconcile()
    assert [s.name for s in series.unsatisfiable] == ["big"]
    follower, _ = _controller(objs, MemoryApi(), leader=False)
    series, _ = follower.reconcile()
    assert series.unsatisfiable == []


def test_unsatisfiable_series_ends_when_the_pod_goes() -> None:
    objs = [*_fleet(), claim("big", selector=MEM_40), pod("trainer", "big")]
    stores_by_kind = stores(objs)
    ctl = AllocationController(stores_by_kind, metrics=ControllerMetrics())
    assert [s.name for s in ctl.reconcile()[0].unsatisfiable] == ["big"]
    pods = stores_by_kind["Pod"]
    for key in list(pods.items()):
        pods.delete(key)
    assert ctl.reconcile()[0].unsatisfiable == []
