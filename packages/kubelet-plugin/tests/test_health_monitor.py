"""The health monitor on the fake GPU backend: MIG-precise taints, ignored XIDs, errors while
waiting (logged, watch re-created), unmonitored devices and recovery to healthy."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from dra_kube_client import Backoff
from dra_kubelet_core._proto import dra_health_v1alpha1_pb2 as pb
from dra_kubelet_core.errors import ConfigurationError
from dra_kubelet_core.health import HealthHub, stream_status
from dra_kubelet_plugin.device_taints import TAINT_GPU_LOST, TAINT_UNMONITORED, TAINT_XID
from dra_kubelet_plugin.health_monitor import (
    DEFAULT_IGNORED_XIDS,
    HealthMonitor,
    health_backoff,
    parse_xid_list,
)
from dra_kubelet_plugin.inventory import NodeDevice, build_inventory
from dra_kubelet_plugin.slices import SliceSpec, build_resource_slices
from dra_nvlib import (
    DeviceLibConfig,
    FakeDeviceLib,
    HealthEvent,
    HealthEventKind,
    HealthWatch,
    NvmlCallError,
    open_device_lib,
)

SPEC = SliceSpec(driver_name="gpu.nvidia.com", node_name="n1")


def _fast_backoff() -> Backoff:
    return Backoff(initial_s=0.01, max_s=30.0)


def _lib(tmp_path: Path, fleet: str) -> FakeDeviceLib:
    lib = open_device_lib(
        DeviceLibConfig(
            backend="fake",
            node_name="n1",
            fake_fleet=fleet,
            fake_state_path=tmp_path / "fake.json",
        )
    )
    assert isinstance(lib, FakeDeviceLib)
    return lib


async def _hub(devices: Sequence[NodeDevice]) -> HealthHub:
    hub = HealthHub("n1")
    await hub.set_devices(d.name for d in devices)
    return hub


async def _until(check: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _taints(hub: HealthHub) -> dict[str, str | None]:
    return {h.device_name: h.taint_key for h in hub.snapshot() if not h.healthy}


async def _running(monitor: HealthMonitor, body: Callable[[], Awaitable[None]]) -> None:
    task = asyncio.get_running_loop().create_task(monitor.run())
    try:
        await body()
    finally:
        monitor.stop()
        await asyncio.wait_for(task, timeout=10)


def test_parse_xid_list() -> None:
    assert parse_xid_list("") == frozenset()
    assert parse_xid_list(" 94, 95,,13 ") == {13, 94, 95}
    with pytest.raises(ConfigurationError) as err:
        parse_xid_list("94,x9")
    assert err.value.setting == "--additional-xids-to-ignore"
    assert "'x9'" in str(err.value)


def test_each_gpu_backs_off_from_one_second_to_thirty_with_jitter_below_the_delay() -> None:
    draws = iter([0.0, 0.999, 0.5, 0.0, 0.0, 0.0, 0.0])
    backoff = replace(health_backoff(), rand=lambda: next(draws))
    delays = [backoff.next_delay() for _ in range(7)]
    assert delays[0] == 1.0
    assert 1.6 < delays[1] <= 2.0
    assert delays[2] == pytest.approx(4 * 0.9)
    assert delays[3:] == [8.0, 16.0, 30.0, 30.0]


def test_xid_on_one_mig_device_taints_only_that_device(tmp_path: Path) -> None:
    lib = _lib(tmp_path, "1xA100-40GB:mig,1xA100-40GB")
    gpu = lib.gpus()[0]
    first = lib.create_mig_device(gpu.uuid, profile_id=19, placement_start=0)
    second = lib.create_mig_device(gpu.uuid, profile_id=19, placement_start=1)
    devices = build_inventory(lib.gpus())
    names = {d.uuid: d.name for d in devices}

    async def go() -> None:
        hub = await _hub(devices)
        monitor = HealthMonitor(lib, hub, devices)
        assert await monitor.open() is True  # subscribed before the event

        async def body() -> None:
            lib.inject_xid(gpu.uuid, 94, gi_id=second.gi_id, ci_id=second.ci_id)
            await _until(lambda: bool(_taints(hub)), "taint")
            assert _taints(hub) == {names[second.uuid]: TAINT_XID}

        await _running(monitor, body)
        # As the NVML backend reported events before it named MIG devices: GI/CI ids only.
        await monitor.handle(
            HealthEvent(HealthEventKind.XID, gpu.uuid, xid=31 + 1, gi_id=first.gi_id, ci_id=0)
        )
        assert _taints(hub) == {names[first.uuid]: TAINT_XID, names[second.uuid]: TAINT_XID}
        # A whole-GPU XID taints every device of the GPU, not the other GPU.
        await monitor.handle(HealthEvent(HealthEventKind.XID, gpu.uuid, xid=79))
        assert set(_taints(hub)) == {names[first.uuid], names[second.uuid]}
        assert "gpu-1" not in _taints(hub)

    asyncio.run(go())


def test_default_and_additional_ignored_xids(tmp_path: Path) -> None:
    lib = _lib(tmp_path, "2xL4")
    devices = build_inventory(lib.gpus())
    uuid = devices[0].gpu.uuid
    assert {13, 31, 43, 45, 68, 109} == DEFAULT_IGNORED_XIDS

    async def go() -> None:
        hub = await _hub(devices)
        monitor = HealthMonitor(lib, hub, devices, additional_ignored_xids=parse_xid_list("94"))
        assert monitor.ignored_xids == DEFAULT_IGNORED_XIDS | {94}
        for xid in (*sorted(DEFAULT_IGNORED_XIDS), 94):
            await monitor.handle(HealthEvent(HealthEventKind.XID, uuid, xid=xid))
        assert _taints(hub) == {}
        await monitor.handle(HealthEvent(HealthEventKind.XID, uuid, xid=95))
        assert _taints(hub) == {"gpu-0": TAINT_XID}

    asyncio.run(go())


class _FlakyWatch(HealthWatch):
    """A real watch whose first ``failures`` waits fail as NVML's event wait can."""

    def __init__(self, inner: HealthWatch, failures: list[int]) -> None:
        self._inner = inner
        self._failures = failures

    def wait(self, timeout_s: float) -> HealthEvent | None:
        if self._failures[0] > 0:
            self._failures[0] -= 1
            raise NvmlCallError("*", "watch_health", "Unknown Error", code=999)
        return self._inner.wait(timeout_s)

    def close(self) -> None:
        self._inner.close()


def test_wait_error_is_logged_and_only_that_gpus_watch_recreated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    lib = _lib(tmp_path, "2xL4")
    devices = build_inventory(lib.gpus())
    bad, good = devices[0].gpu.uuid, devices[1].gpu.uuid
    real_watch = lib.watch_health
    opened: list[str] = []
    failures = [2]

    def watch_health(gpu_uuids: Sequence[str] | None = None) -> HealthWatch:
        assert gpu_uuids is not None
        opened.extend(gpu_uuids)
        inner = real_watch(gpu_uuids)
        return _FlakyWatch(inner, failures) if list(gpu_uuids) == [bad] else inner

    monkeypatch.setattr(lib, "watch_health", watch_health)

    async def go() -> None:
        hub = await _hub(devices)
        monitor = HealthMonitor(lib, hub, devices, backoff=_fast_backoff)

        async def body() -> None:
            # The other GPU is watched (and taints) while the bad one fails.
            await _until(lambda: good in monitor.watched_gpus, "the good GPU watched")
            lib.inject_xid(good, 79)
            await _until(lambda: bool(_taints(hub)), "taint on the good GPU")
            await _until(lambda: failures[0] == 0 and opened.count(bad) >= 3, "re-created")
            await _until(lambda: bad in monitor.watched_gpus, "the bad GPU watched again")
            lib.inject_xid(bad, 79)
            await _until(lambda: len(_taints(hub)) == 2, "taint after the errors")

        with caplog.at_level(logging.INFO, logger="dra_kubelet_plugin.health_monitor"):
            await _running(monitor, body)
        assert _taints(hub) == {"gpu-0": TAINT_XID, "gpu-1": TAINT_XID}
        assert opened.count(good) == 1  # never re-created: the bad GPU did not touch it

    asyncio.run(go())
    errors = [r for r in caplog.records if getattr(r, "event", None) == "health_watch_error"]
    assert len(errors) == 2
    assert errors[0].levelno == logging.ERROR
    assert {getattr(r, "gpu", None) for r in errors} == {bad}
    assert "Unknown Error" in str(getattr(errors[0], "error", ""))
    assert [getattr(r, "attempt", None) for r in errors] == [1, 2]


def test_devices_unmonitored_while_the_event_set_cannot_be_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = _lib(tmp_path, "2xL4")
    devices = build_inventory(lib.gpus())
    real_watch = lib.watch_health
    refuse = [True]

    def watch_health(gpu_uuids: Sequence[str] | None = None) -> HealthWatch:
        if refuse[0]:
            raise NvmlCallError("*", "watch_health", "event set: Unknown Error", code=999)
        return real_watch(gpu_uuids)

    monkeypatch.setattr(lib, "watch_health", watch_health)

    async def go() -> None:
        hub = await _hub(devices)
        await hub.mark_unhealthy("gpu-1", message="XID 48", taint_key=TAINT_XID, taint_value="48")
        monitor = HealthMonitor(lib, hub, devices, backoff=_fast_backoff)
        assert await monitor.open() is False
        # The XID taint stays (more specific); the other device's health is unknown.
        assert _taints(hub) == {"gpu-0": TAINT_UNMONITORED, "gpu-1": TAINT_XID}
        state = hub.get("gpu-0")
        assert state is not None
        assert stream_status(pb, state) == pb.UNKNOWN
        (data,) = build_resource_slices(
            SPEC, devices, generation=1, health={h.device_name: h for h in hub.snapshot()}
        )
        assert data["spec"]["devices"][0]["taints"] == [
            {"key": TAINT_UNMONITORED, "effect": "None"}
        ]

        async def body() -> None:
            await asyncio.sleep(0.1)  # retries keep failing
            assert _taints(hub)["gpu-0"] == TAINT_UNMONITORED
            refuse[0] = False
            await _until(lambda: "gpu-0" not in _taints(hub), "unmonitored cleared")
            assert _taints(hub) == {"gpu-1": TAINT_XID}

        await _running(monitor, body)

    asyncio.run(go())


def test_xid_taint_recovers_after_the_quiet_period(tmp_path: Path) -> None:
    lib = _lib(tmp_path, "2xL4")
    devices = build_inventory(lib.gpus())
    uuid = devices[0].gpu.uuid
    now = [1000.0]

    async def go() -> None:
        hub = await _hub(devices)
        monitor = HealthMonitor(lib, hub, devices, xid_recovery_s=60, clock=lambda: now[0])
        await monitor.handle(HealthEvent(HealthEventKind.XID, uuid, xid=79))
        await monitor.handle(HealthEvent(HealthEventKind.GPU_LOST, devices[1].gpu.uuid))
        now[0] += 59
        await monitor.recover()
        assert _taints(hub) == {"gpu-0": TAINT_XID, "gpu-1": TAINT_GPU_LOST}
        await monitor.handle(HealthEvent(HealthEventKind.XID, uuid, xid=79))  # again
        now[0] += 59
        await monitor.recover()
        assert "gpu-0" in _taints(hub)
        now[0] += 1
        await monitor.recover()
        # Healthy again; a lost GPU does not recover by waiting.
        assert _taints(hub) == {"gpu-1": TAINT_GPU_LOST}
        state = hub.get("gpu-0")
        assert state is not None
        assert stream_status(pb, state) == pb.HEALTHY
        # An XID on a lost GPU does not replace (and so never recovers) the lost taint.
        await monitor.handle(HealthEvent(HealthEventKind.XID, devices[1].gpu.uuid, xid=79))
        now[0] += 120
        await monitor.recover()
        assert _taints(hub) == {"gpu-1": TAINT_GPU_LOST}

    asyncio.run(go())


def test_without_a_recovery_period_taints_stay(tmp_path: Path) -> None:
    lib = _lib(tmp_path, "1xL4")
    devices = build_inventory(lib.gpus())
    now = [0.0]

    async def go() -> None:
        hub = await _hub(devices)
        monitor = HealthMonitor(lib, hub, devices, clock=lambda: now[0])
        await monitor.handle(HealthEvent(HealthEventKind.XID, devices[0].gpu.uuid, xid=79))
        now[0] += 10**6
        await monitor.recover()
        assert _taints(hub) == {"gpu-0": TAINT_XID}

    asyncio.run(go())
