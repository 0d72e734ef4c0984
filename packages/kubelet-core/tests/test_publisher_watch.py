"""The slice publisher's watch: an informer on this node's slices of this driver that
republishes within seconds of a deletion, in the served API version."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from dra_kube_client.testing import Answer, Call, MemoryApi, MockTransport
from dra_kubelet_core.health import HealthHub
from dra_kubelet_core.metrics import PluginMetrics
from dra_kubelet_core.publisher import SlicePublisher
from dra_kubelet_core.resource_api import ResourceApi

SLICES = "/apis/resource.k8s.io/v1/resourceslices"


def _slices(generation: int) -> list[dict[str, Any]]:
    """One slice with one device for node n1 of driver gpu.example.com."""
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"generateName": "n1-gpu.example.com-"},
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": generation, "resourceSliceCount": 1},
                "devices": [{"name": "dev-0"}],
            },
        }
    ]


def _through(api: MemoryApi) -> MockTransport:
    """``api`` behind a transport that records every call's query."""

    def answer(call: Call) -> Answer:
        if call.method == "WATCH":
            return api.watch_lines(call.path, query=call.query, timeout_s=call.timeout_s)
        return api.request(call.method, call.path, query=call.query, body=call.body)

    return MockTransport(answer)


def test_a_deleted_slice_is_republished_by_the_watch_not_the_resync() -> None:
    api = MemoryApi(watch_wait_s=2.0)
    # Someone else's slice on the same node: the field selector keeps it out of the watch.
    api.put_object(
        f"{SLICES}/other",
        {
            "metadata": {"name": "other"},
            "spec": {"driver": "other.example.com", "nodeName": "n1", "pool": {"name": "n1"}},
        },
    )
    transport = _through(api)

    async def go() -> None:
        hub = HealthHub("n1")
        publisher = SlicePublisher(
            transport=transport,
            driver_name="gpu.example.com",
            node_name="n1",
            slices=_slices,
            health=hub,
            metrics=PluginMetrics(),
            resync_s=600,
        )
        task = asyncio.get_running_loop().create_task(publisher.run())

        async def ours() -> list[dict[str, Any]]:
            for _ in range(200):
                mine = [
                    o
                    for o in api.kind_items("resourceslices")
                    if o["spec"]["driver"] == "gpu.example.com"
                ]
                if mine:
                    return mine
                await asyncio.sleep(0.05)
            raise AssertionError("no slice published")

        (first,) = await ours()
        api.request("DELETE", f"{SLICES}/{first['metadata']['name']}")
        (again,) = await ours()
        assert again["spec"]["pool"]["generation"] == 2
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    selector = {"fieldSelector": "spec.nodeName=n1,spec.driver=gpu.example.com"}
    watches = [c for c in transport.calls if c.method == "WATCH"]
    assert watches
    assert {c.path for c in watches} == {SLICES}
    assert all(
        dict(c.query)
        == {
            **selector,
            "resourceVersion": c.query["resourceVersion"],
            "allowWatchBookmarks": "true",
        }
        for c in watches
    )
    lists = [c for c in transport.calls if c.method == "GET" and "limit" in c.query]
    assert [dict(c.query) for c in lists] == [{**selector, "limit": "500"}]


def test_the_watch_reads_the_served_version() -> None:
    publisher = SlicePublisher(
        transport=MockTransport(lambda call: {}),
        driver_name="gpu.example.com",
        node_name="n1",
        slices=_slices,
        health=HealthHub("n1"),
        metrics=PluginMetrics(),
        api=ResourceApi("v1beta2"),
    )
    resource = publisher.slice_informer().resource
    assert resource.path == "/apis/resource.k8s.io/v1beta2/resourceslices"
    assert resource.api_version == "resource.k8s.io/v1beta2"
    assert resource.field_selector == "spec.nodeName=n1,spec.driver=gpu.example.com"


def test_a_cancel_arriving_with_a_trigger_stops_the_publisher() -> None:
    # On Python 3.11, asyncio.wait_for loses a cancel that arrives as the awaited event is
    # set: the publisher went on reconciling after the plugin's shutdown cancelled it, and
    # the plugin hung on SIGTERM (seen in CI).
    api = MemoryApi(watch_wait_s=0.5)

    async def go() -> None:
        publisher = SlicePublisher(
            transport=_through(api),
            driver_name="gpu.example.com",
            node_name="n1",
            slices=_slices,
            health=HealthHub("n1"),
            metrics=PluginMetrics(),
            resync_s=600,
        )
        task = asyncio.get_running_loop().create_task(publisher.run())
        for _ in range(200):
            if api.kind_items("resourceslices"):
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)  # the first reconcile returned: it waits for a trigger
        publisher.trigger()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(task), timeout=5)

    asyncio.run(go())
