"""Stopping the plugin while the API server leaves one of its requests unanswered (the
publisher's list of the slices, its write of one, the slice watch): the stop, as SIGTERM
asks it, returns without waiting for the request's read timeout (30 s per try, and a list
is tried four times), no thread of the plugin is left running, the publisher's lease and the
sockets are given up, and a new instance starts and publishes from there."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from dra_kube_client.testing import HttpFront, MemoryApi
from dra_kubelet_core.health import HealthHub
from dra_kubelet_core.metrics import PluginMetrics
from dra_kubelet_core.node_lock import InstanceLease
from dra_kubelet_core.publisher import SlicePublisher
from kubelet_core_support import PluginDirs, plugin_api_server
from toy_plugin import (
    DRIVER,
    RunningPlugin,
    ToyDriver,
    toy_paths,
    toy_settings,
    toy_slices,
    wait_for,
)

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
#: A test timeout only: how long the server may take to see the request that it holds.
SEEN_S = 20.0


@pytest.fixture
def server() -> Iterator[HttpFront]:
    with plugin_api_server("u-n1") as front:
        yield front


@pytest.mark.parametrize(
    "method",
    ["GET", "POST", "WATCH"],
    ids=["list-of-slices", "write-of-a-slice", "slice-watch"],
)
def test_stop_does_not_wait_for_a_request_the_api_server_holds(
    server: HttpFront, plugin_dirs: PluginDirs, method: str
) -> None:
    held = server.api.hold(method, SLICES)
    settings = toy_settings(plugin_dirs, server)
    state_dir = plugin_dirs.root / "toy"
    state_dir.mkdir()
    plugin = RunningPlugin(settings, ToyDriver(state_dir))
    try:
        assert held.entered.wait(SEEN_S), f"the plugin never sent {method} {SLICES}"
    finally:
        # Stops as SIGTERM does, and fails unless the plugin's event loop (and with it the
        # loop's executor, which runs the publisher's requests) ended within its bound.
        plugin.stop()
    publisher = plugin.runner.publisher
    assert publisher is not None
    assert publisher.join(0), "the publisher's watch or reconcile thread still runs"
    lease = InstanceLease(plugin_dirs.plugins / DRIVER / "publisher.lock")
    assert lease.try_acquire(), "the stopped plugin still holds the publisher lease"
    lease.release()
    paths = toy_paths(plugin_dirs)
    assert not paths.registration.exists()
    assert not paths.dra.exists()
    # The server answers again: a new instance takes over and publishes.
    held.release()
    restarted = RunningPlugin(settings, ToyDriver(state_dir))
    try:
        wait_for(lambda: len(server.api.kind_items("resourceslices")) == 1, "the toy slice")
        (published,) = server.api.kind_items("resourceslices")
        assert [d["name"] for d in published["spec"]["devices"]] == ["dev-0"]
    finally:
        restarted.stop()


def test_a_stopped_publisher_keeps_the_lease_until_its_write_in_flight_returns(
    tmp_path: Path,
) -> None:
    """Cancelling the publisher returns at once, but a write of a slice still in flight keeps
    the instance lease until it returns: a next instance never publishes alongside it."""
    api = MemoryApi(watch_wait_s=1.0)
    held = api.hold("POST", SLICES)
    lease = InstanceLease(tmp_path / "publisher.lock")
    publisher = SlicePublisher(
        transport=api,
        driver_name=DRIVER,
        node_name="n1",
        slices=toy_slices("n1", ("dev-0",)),
        health=HealthHub("n1"),
        metrics=PluginMetrics(),
        lease=lease,
    )

    async def stop_while_writing() -> None:
        task = asyncio.get_running_loop().create_task(publisher.run())
        while not held.entered.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert lease.held, "the lease was given up while our write was in flight"
        assert not InstanceLease(tmp_path / "publisher.lock").try_acquire()
        held.release()
        assert await asyncio.to_thread(publisher.join, SEEN_S)

    asyncio.run(asyncio.wait_for(stop_while_writing(), SEEN_S * 2))
    assert not lease.held
    (written,) = api.kind_items("resourceslices")
    assert written["spec"]["driver"] == DRIVER
    other = InstanceLease(tmp_path / "publisher.lock")
    assert other.try_acquire()
    other.release()
