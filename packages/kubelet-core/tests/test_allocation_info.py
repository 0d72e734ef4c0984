"""``nvidia_dra_device_allocation_info``: one series per prepared device and pod, with
the labels that join dcgm-exporter's, dropped on unprepare and rebuilt from the checkpoint
after a restart."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from dra_kube_client.testing import HttpFront
from dra_kubelet_core.allocation_info import (
    ALLOCATION_INFO_LABELS,
    DeviceIdentity,
    allocation_rows,
)
from dra_kubelet_core.checkpoint import (
    Checkpoint,
    ClaimState,
    PodRef,
    PreparedClaim,
    PreparedDevice,
    decode_checkpoint,
    encode_checkpoint,
)
from dra_kubelet_core.metrics import ALLOCATION_INFO, PluginMetrics
from kubelet_core_support import (
    PluginDirs,
    ReferenceProtos,
    claim_path,
    make_claim,
    plugin_api_server,
)
from prometheus_client import CollectorRegistry
from toy_plugin import DRIVER, RunningPlugin, ToyDriver, toy_paths, toy_settings


@pytest.fixture
def server() -> Iterator[HttpFront]:
    with plugin_api_server("u-n1") as front:
        yield front


def info_series(registry: CollectorRegistry) -> list[dict[str, str]]:
    return [
        dict(s.labels)
        for family in registry.collect()
        if family.name == ALLOCATION_INFO
        for s in family.samples
        if s.value == 1
    ]


def test_a_prepared_claim_has_one_series_per_device_and_pod_until_unprepared_and_after_restart(
    server: HttpFront, plugin_dirs: PluginDirs, reference: ReferenceProtos
) -> None:
    settings = toy_settings(plugin_dirs, server)
    paths = toy_paths(plugin_dirs)
    state_dir = plugin_dirs.root / "toy"
    state_dir.mkdir()
    claim = make_claim(name="train", namespace="team-a", devices=["dev-0"], driver=DRIVER)
    claim["status"]["reservedFor"] = [
        {"resource": "pods", "name": "trainer-0", "uid": "pod-uid-0"},
        {"apiGroup": "example.com", "resource": "jobs", "name": "not-a-pod", "uid": "j"},
    ]
    server.api.put_object(claim_path("team-a", "train"), claim)
    ref = ("team-a", "train", claim["metadata"]["uid"])
    expected = {
        "node": "n1",
        "driver": DRIVER,
        "namespace": "team-a",
        "pod": "trainer-0",
        "pod_uid": "pod-uid-0",
        # No PodResources source in this plugin: which container is not known.
        "container": "",
        "claim": "train",
        "claim_uid": ref[2],
        "request": "gpu",
        "device": "dev-0",
        "UUID": "GPU-dev-0",
        "gpu": "0",
        "GPU_I_ID": "",
        "mig_uuid": "",
    }
    plugin = RunningPlugin(settings, ToyDriver(state_dir))
    try:
        assert info_series(plugin.runner.metrics.registry) == []
        with grpc.insecure_channel(f"unix://{paths.dra.resolve()}") as ch:
            assert reference.prepare(ch, [ref]).claims[ref[2]].error == ""
        assert info_series(plugin.runner.metrics.registry) == [expected]
        stored = decode_checkpoint((plugin_dirs.plugins / DRIVER / "checkpoint.json").read_bytes())
        assert stored.claims[ref[2]].pods == (PodRef("trainer-0", "pod-uid-0"),)
    finally:
        plugin.stop()

    # A new process: the series is back from the checkpoint before any kubelet call.
    plugin = RunningPlugin(settings, ToyDriver(state_dir))
    try:
        assert info_series(plugin.runner.metrics.registry) == [expected]
        with grpc.insecure_channel(f"unix://{paths.dra.resolve()}") as ch:
            assert reference.unprepare(ch, [ref]).claims[ref[2]].error == ""
        assert info_series(plugin.runner.metrics.registry) == []
    finally:
        plugin.stop()


def _claim(uid: str, *, state: ClaimState, pods: tuple[PodRef, ...]) -> PreparedClaim:
    return PreparedClaim(
        uid=uid,
        namespace="ns",
        name=f"c-{uid}",
        state=state,
        devices=(
            PreparedDevice(("gpu",), "n1", "gpu-0", ("k/claim=x",)),
            PreparedDevice(("mig",), "n1", "gpu-1-mig-1g", ("k/claim=y",)),
            PreparedDevice(("chan",), "n1", "channel-0", ("k/claim=z",)),
        ),
        pods=pods,
    )


def _identify(claim: PreparedClaim, device: PreparedDevice) -> DeviceIdentity | None:
    if device.device_name == "gpu-0":
        return DeviceIdentity(uuid="GPU-a", index="0")
    if device.device_name == "gpu-1-mig-1g":
        return DeviceIdentity(uuid="GPU-b", index="1", gpu_instance_id="7", mig_uuid="MIG-c")
    return None


def test_rows_cover_completed_claims_each_pod_and_only_devices_the_driver_knows() -> None:
    shared = (PodRef("p1", "u1"), PodRef("p2", "u2"))
    checkpoint = Checkpoint(
        boot_id="b",
        claims={
            "a": _claim("a", state=ClaimState.PREPARE_COMPLETED, pods=shared),
            "b": _claim("b", state=ClaimState.PREPARE_STARTED, pods=shared),
            "c": _claim("c", state=ClaimState.PREPARE_COMPLETED, pods=()),
        },
    )
    rows = allocation_rows(checkpoint, node="n1", driver="gpu.nvidia.com", identify=_identify)
    metrics = PluginMetrics()
    metrics.set_allocation_info(rows)
    got = {
        (s["claim"], s["pod"], s["device"], s["UUID"], s["GPU_I_ID"], s["mig_uuid"])
        for s in info_series(metrics.registry)
    }
    assert got == {
        ("c-a", "p1", "gpu-0", "GPU-a", "", ""),
        ("c-a", "p2", "gpu-0", "GPU-a", "", ""),
        ("c-a", "p1", "gpu-1-mig-1g", "GPU-b", "7", "MIG-c"),
        ("c-a", "p2", "gpu-1-mig-1g", "GPU-b", "7", "MIG-c"),
        ("c-c", "", "gpu-0", "GPU-a", "", ""),
        ("c-c", "", "gpu-1-mig-1g", "GPU-b", "7", "MIG-c"),
    }
    assert all(set(s) == set(ALLOCATION_INFO_LABELS) for s in info_series(metrics.registry))
    metrics.set_allocation_info([])
    assert info_series(metrics.registry) == []


def test_pods_round_trip_through_the_checkpoint_and_old_files_have_none() -> None:
    checkpoint = Checkpoint(
        boot_id="b",
        claims={"a": _claim("a", state=ClaimState.PREPARE_COMPLETED, pods=(PodRef("p", "u"),))},
    )
    decoded = decode_checkpoint(encode_checkpoint(checkpoint))
    assert decoded.claims["a"].pods == (PodRef("p", "u"),)
    assert "pods" not in decoded.claims["a"].extra
    old = Checkpoint(
        boot_id="b", claims={"a": _claim("a", state=ClaimState.PREPARE_COMPLETED, pods=())}
    )
    raw = encode_checkpoint(old)
    assert b'"pods"' not in raw
    assert decode_checkpoint(raw).claims["a"].pods == ()


def test_a_malformed_pods_entry_names_the_claim_and_field() -> None:
    with pytest.raises(ValueError, match=r"claims\['a'\]\.pods\[0\]\.uid: expected a string"):
        PreparedClaim.from_json(
            "a",
            {"state": "PrepareCompleted", "namespace": "n", "name": "c", "devices": [],
             "pods": [{"name": "p", "uid": 3}]},
        )  # fmt: skip
