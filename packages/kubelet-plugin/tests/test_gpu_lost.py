"""A GPU lost to Xid 79 costs that GPU only: the plugin starts on such a node and publishes
the others (the lost one tainted ``gpu-lost`` NoExecute, or absent where nothing identifies
it), the health monitor backs off on the lost GPU, watches each GPU on its own and picks up
GPUs that appear later. All on the fake backend, which fails as NVML fails."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import yaml
from dra_kube_client import Backoff
from dra_kubelet_core.health import HealthHub
from dra_kubelet_plugin.device_taints import TAINT_GPU_LOST, TAINT_XID
from dra_kubelet_plugin.health_monitor import HealthMonitor, mark_lost_gpus
from dra_kubelet_plugin.inventory import build_inventory
from dra_kubelet_plugin.plugin import render_resource_slices
from dra_kubelet_plugin.settings import build_parser, settings_from_args
from dra_nvlib import DeviceLibConfig, FakeDeviceLib, open_device_lib
from kubelet_plugin_support import PluginDirs, PluginProcess


def _lib(state: Path, fleet: str = "4xH100-80GB") -> FakeDeviceLib:
    lib = open_device_lib(
        DeviceLibConfig(backend="fake", node_name="n1", fake_fleet=fleet, fake_state_path=state)
    )
    assert isinstance(lib, FakeDeviceLib)
    return lib


def _taints(hub: HealthHub) -> dict[str, str | None]:
    return {h.device_name: h.taint_key for h in hub.snapshot() if not h.healthy}


async def _until(check: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def _running(monitor: HealthMonitor, body: Callable[[], Awaitable[None]]) -> None:
    task = asyncio.get_running_loop().create_task(monitor.run())
    try:
        await body()
    finally:
        monitor.stop()
        await asyncio.wait_for(task, timeout=10)


def test_lost_gpu_is_tainted_and_backed_off_while_the_others_are_watched(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lib = _lib(tmp_path / "s.json")
    devices = build_inventory(lib.gpus())  # this process saw GPU 1 before it was lost
    lost = devices[1].gpu.uuid
    lib.mark_gpu_lost(lost)
    devices = build_inventory(lib.gpus())
    assert devices[1].gpu.lost

    async def go() -> None:
        hub = HealthHub("n1")
        await hub.set_devices(d.name for d in devices)
        await mark_lost_gpus(hub, devices)
        assert _taints(hub) == {"gpu-1": TAINT_GPU_LOST}
        monitor = HealthMonitor(
            lib, hub, devices, backoff=lambda: Backoff(initial_s=0.01, max_s=0.04)
        )
        assert await monitor.open() is False  # the lost GPU cannot be registered ...
        assert monitor.watched_gpus == {d.gpu.uuid for d in devices} - {lost}  # ... only it

        async def body() -> None:
            lib.inject_xid(devices[3].gpu.uuid, 79)
            await _until(lambda: "gpu-3" in _taints(hub), "XID taint on a healthy GPU")
            await _until(lambda: len(_retries(caplog)) >= 5, "retries of the lost GPU")

        with caplog.at_level(logging.DEBUG, logger="dra_kubelet_plugin.health_monitor"):
            await _running(monitor, body)
        assert _taints(hub) == {"gpu-1": TAINT_GPU_LOST, "gpu-3": TAINT_XID}

    asyncio.run(go())
    retries = _retries(caplog)
    assert {getattr(r, "gpu", None) for r in retries} == {lost}
    delays = [float(getattr(r, "retry_in_s", 0)) for r in retries]
    # Exponential, capped, jittered below each step: no busy loop.
    for delay, full in zip(delays[:5], [0.01, 0.02, 0.04, 0.04, 0.04], strict=True):
        assert full * 0.8 <= delay <= full


def _retries(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == "health_watch_retry"]


def test_gpu_lost_while_watched_gets_gpu_lost_and_the_others_keep_working(
    tmp_path: Path,
) -> None:
    lib = _lib(tmp_path / "s.json")
    devices = build_inventory(lib.gpus())

    async def go() -> None:
        hub = HealthHub("n1")
        await hub.set_devices(d.name for d in devices)
        monitor = HealthMonitor(
            lib, hub, devices, backoff=lambda: Backoff(initial_s=0.01, max_s=0.04)
        )
        assert await monitor.open() is True

        async def body() -> None:
            lib.mark_gpu_lost(devices[0].gpu.uuid)
            await _until(lambda: "gpu-0" in _taints(hub), "gpu-lost taint")
            lib.inject_xid(devices[2].gpu.uuid, 48)
            await _until(lambda: "gpu-2" in _taints(hub), "XID taint after the loss")

        await _running(monitor, body)
        # One bad GPU never blinds the rest: no device is unmonitored.
        assert _taints(hub) == {"gpu-0": TAINT_GPU_LOST, "gpu-2": TAINT_XID}

    asyncio.run(go())


def test_gpus_that_appear_later_are_watched_and_gone_ones_closed(tmp_path: Path) -> None:
    lib = _lib(tmp_path / "s.json")
    everything = build_inventory(lib.gpus())
    first = [d for d in everything if d.name == "gpu-0"]

    async def go() -> None:
        hub = HealthHub("n1")
        await hub.set_devices(d.name for d in everything)
        monitor = HealthMonitor(lib, hub, first)

        async def body() -> None:
            await _until(lambda: len(monitor.watched_gpus) == 1, "first GPU watched")
            monitor.set_devices(everything)  # the inventory refresh found more GPUs
            await _until(lambda: len(monitor.watched_gpus) == 4, "new GPUs watched")
            lib.inject_xid(everything[3].gpu.uuid, 79)
            await _until(lambda: "gpu-3" in _taints(hub), "taint on a hot-added GPU")
            monitor.set_devices(first)
            await _until(lambda: len(monitor.watched_gpus) == 1, "removed GPUs closed")

        await _running(monitor, body)

    asyncio.run(go())


def _settings(state: Path, *extra: str) -> list[str]:
    return [
        "--device-backend",
        "fake",
        "--fake-gpus",
        "4xH100-80GB",
        "--node-name",
        "n1",
        "--fake-gpu-state-file",
        str(state),
        *extra,
    ]


def test_print_resource_slices_leaves_a_gpu_lost_before_start_out(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    uuids = [g.uuid for g in _lib(state).gpus()]
    nvlib = [sys.executable, "-m", "dra_nvlib", "--backend", "fake", "--node", "n1"]
    lost = subprocess.run([*nvlib, "--state", str(state), "lose-gpu", uuids[2]], check=True)
    assert lost.returncode == 0
    out = subprocess.run(
        [sys.executable, "-m", "dra_kubelet_plugin", *_settings(state), "--print-resource-slices"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    (doc,) = list(yaml.safe_load_all(out.stdout))
    devices = doc["spec"]["devices"]
    # NVML cannot identify a GPU lost before the process saw it: absent, the others listed
    # under their own names (minor numbers do not shift).
    assert [d["name"] for d in devices] == ["gpu-0", "gpu-1", "gpu-3"]
    assert uuids[2] not in json.dumps(devices)
    assert "gpu_lost_unidentified" in out.stderr


def test_rendered_slices_taint_a_known_lost_gpu_noexecute_or_leave_it_out(
    tmp_path: Path,
) -> None:
    lib = _lib(tmp_path / "s.json")
    lib.gpus()
    lib.mark_gpu_lost(lib.gpus()[0].uuid)
    devices = build_inventory(lib.gpus())
    parser = build_parser({})
    on = settings_from_args(parser.parse_args(_settings(tmp_path / "s.json")))
    (doc,) = list(yaml.safe_load_all(render_resource_slices(on, devices)))
    by_name = {d["name"]: d for d in doc["spec"]["devices"]}
    assert by_name["gpu-0"]["taints"] == [{"key": TAINT_GPU_LOST, "effect": "NoExecute"}]
    assert all("taints" not in by_name[f"gpu-{i}"] for i in (1, 2, 3))
    off = settings_from_args(
        parser.parse_args(_settings(tmp_path / "s.json", "--feature-gates", "DeviceTaints=false"))
    )
    (doc,) = list(yaml.safe_load_all(render_resource_slices(off, devices)))
    assert [d["name"] for d in doc["spec"]["devices"]] == ["gpu-1", "gpu-2", "gpu-3"]


def test_plugin_starts_on_a_node_with_a_lost_gpu(plugin_dirs: PluginDirs) -> None:
    state = plugin_dirs.root / "gpus.json"
    lib = _lib(state, fleet="8xH100-80GB")
    lib.mark_gpu_lost(lib.gpus()[5].uuid)
    proc = PluginProcess(plugin_dirs, extra=["--fake-gpu-state-file", str(state)])
    proc.start()  # serves: before, the whole enumeration failed and the plugin exited 1
    try:
        started = [
            json.loads(line)
            for line in proc.logs().splitlines()
            if line.startswith("{") and '"event": "started"' in line
        ]
        assert [s["devices"] for s in started] == [7]
        assert '"gpu_lost_unidentified"' in proc.logs()
    finally:
        assert proc.stop() == 0
