"""Wire compatibility: a client built from the upstream protos drives the real plugin process
over its unix sockets (registration, DRA v1 and v1beta1, health)."""

from __future__ import annotations

import json
import time

import grpc
import pytest
from dra_kube_client.testing import free_port
from kubelet_plugin_support import (
    PluginDirs,
    PluginProcess,
    ReferenceProtos,
    make_claim,
    write_claim,
)


def test_get_info_answers_exactly_as_the_kubelet_expects(
    plugin: PluginProcess, reference: ReferenceProtos
) -> None:
    sock = plugin.dirs.registration_socket()
    with grpc.insecure_channel(f"unix://{sock}") as ch:
        info = reference.call(
            ch,
            "pluginregistration.Registration",
            "GetInfo",
            reference.message("pluginregistration.InfoRequest")(),
        )
    assert info.type == "DRAPlugin"
    assert info.name == "gpu.nvidia.com"
    assert info.endpoint == str(plugin.dirs.dra_socket().resolve())
    assert list(info.supported_versions) == [
        "v1.DRAPlugin",
        "v1beta1.DRAPlugin",
        "v1alpha1.DRAResourceHealth",
    ]


def test_notify_registration_status_is_accepted_and_failure_recreates_the_socket(
    plugin: PluginProcess, reference: ReferenceProtos
) -> None:
    sock = plugin.dirs.registration_socket()
    status = reference.message("pluginregistration.RegistrationStatus")
    with grpc.insecure_channel(f"unix://{sock}") as ch:
        reference.call(
            ch,
            "pluginregistration.Registration",
            "NotifyRegistrationStatus",
            status(plugin_registered=True),
        )
        reference.call(
            ch,
            "pluginregistration.Registration",
            "NotifyRegistrationStatus",
            status(plugin_registered=False, error="version mismatch"),
        )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and '"registration_retry"' not in plugin.logs():
        time.sleep(0.1)
    assert '"registration_retry"' in plugin.logs()
    # The kubelet's watcher sees a new socket and registers again: it must answer.
    with grpc.insecure_channel(f"unix://{sock}") as ch:
        info = reference.call(
            ch,
            "pluginregistration.Registration",
            "GetInfo",
            reference.message("pluginregistration.InfoRequest")(),
        )
    assert info.name == "gpu.nvidia.com"
    assert "registration_failed" in plugin.logs()


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_prepare_then_unprepare_round_trip(
    plugin: PluginProcess, reference: ReferenceProtos, version: str
) -> None:
    claim = make_claim(name="c1", devices=["gpu-3"])
    write_claim(plugin.dirs.claims, claim)
    uid = claim["metadata"]["uid"]
    with plugin.channel() as ch:
        response = reference.prepare(ch, [("default", "c1", uid)], version=version)
        entry = response.claims[uid]
        assert entry.error == ""
        assert len(entry.devices) == 1
        device = entry.devices[0]
        assert list(device.request_names) == ["gpu"]
        assert device.pool_name == "n1"
        assert device.device_name == "gpu-3"
        assert list(device.cdi_device_ids) == [f"k8s.gpu.nvidia.com/claim={uid}-gpu-3"]
        spec_path = plugin.dirs.cdi / f"k8s.gpu.nvidia.com-claim_{uid}.json"
        spec = json.loads(spec_path.read_text())
        assert spec["kind"] == "k8s.gpu.nvidia.com/claim"
        assert [d["name"] for d in spec["devices"]] == [f"{uid}-gpu-3"]

        again = reference.prepare(ch, [("default", "c1", uid)], version=version)
        assert again.claims[uid] == entry

        gone = reference.unprepare(ch, [("default", "c1", uid)], version=version)
        assert gone.claims[uid].error == ""
        assert not spec_path.exists()
        unknown = reference.unprepare(ch, [("default", "nope", "uid-unknown")], version=version)
        assert unknown.claims["uid-unknown"].error == ""


def test_one_bad_claim_gets_its_own_error_and_the_others_are_prepared(
    plugin: PluginProcess, reference: ReferenceProtos
) -> None:
    good = make_claim(name="good", devices=["gpu-0", "gpu-1"])
    stale = make_claim(name="recreated", devices=["gpu-2"])
    unallocated = make_claim(name="pending", devices=[], allocated=False)
    foreign = make_claim(name="elsewhere", devices=["gpu-4"], pool="other-node")
    for c in (good, stale, unallocated, foreign):
        write_claim(plugin.dirs.claims, c)
    refs = [
        ("default", "good", good["metadata"]["uid"]),
        ("default", "recreated", "old-uid-of-recreated"),
        ("default", "missing", "uid-missing"),
        ("default", "pending", unallocated["metadata"]["uid"]),
        ("default", "elsewhere", foreign["metadata"]["uid"]),
    ]
    with plugin.channel() as ch:
        response = reference.prepare(ch, refs)
    assert set(response.claims) == {r[2] for r in refs}
    ok = response.claims[good["metadata"]["uid"]]
    assert ok.error == ""
    assert [d.device_name for d in ok.devices] == ["gpu-0", "gpu-1"]
    assert "metadata.uid" in response.claims["old-uid-of-recreated"].error
    assert "not found" in response.claims["uid-missing"].error
    assert "status.allocation" in response.claims[unallocated["metadata"]["uid"]].error
    assert "other-node" in response.claims[foreign["metadata"]["uid"]].error
    assert "default/missing" in response.claims["uid-missing"].error


@pytest.mark.parametrize("version", ["v1alpha1", "v1"])
def test_health_stream_lists_every_device_in_each_message(
    plugin: PluginProcess, reference: ReferenceProtos, version: str
) -> None:
    with plugin.channel() as ch:
        stream = reference.stream(
            ch,
            f"{version}.DRAResourceHealth",
            "NodeWatchResources",
            reference.message(f"{version}.NodeWatchResourcesRequest")(),
        )
        first = next(stream)
        stream.cancel()
    names = [d.device.device_name for d in first.devices]
    assert names == [f"gpu-{i}" for i in range(8)]
    assert {d.device.pool_name for d in first.devices} == {"n1"}
    healthy = reference.pool.FindEnumTypeByName(f"{version}.HealthStatus").values_by_name["HEALTHY"]
    assert {d.health for d in first.devices} == {healthy.number}


def test_rolling_update_mode_uses_pod_uid_socket_names_and_two_instances_overlap(
    plugin_dirs: PluginDirs, reference: ReferenceProtos
) -> None:
    old = PluginProcess(plugin_dirs, extra=["--pod-uid", "pod-old"])
    new = PluginProcess(plugin_dirs, extra=["--pod-uid", "pod-new"])
    old.start(pod_uid="pod-old")
    try:
        new.start(pod_uid="pod-new")
        claim = make_claim(name="c", devices=["gpu-5"])
        write_claim(plugin_dirs.claims, claim)
        uid = claim["metadata"]["uid"]
        with old.channel("pod-old") as ch_old, new.channel("pod-new") as ch_new:
            first = reference.prepare(ch_old, [("default", "c", uid)])
            second = reference.prepare(ch_new, [("default", "c", uid)])
            assert first.claims[uid] == second.claims[uid]
            other = make_claim(name="d", devices=["gpu-5"])
            write_claim(plugin_dirs.claims, other)
            clash = reference.prepare(ch_new, [("default", "d", other["metadata"]["uid"])])
            assert "already prepared" in clash.claims[other["metadata"]["uid"]].error
        sock = plugin_dirs.registration_socket("pod-new")
        with grpc.insecure_channel(f"unix://{sock}") as ch:
            info = reference.call(
                ch,
                "pluginregistration.Registration",
                "GetInfo",
                reference.message("pluginregistration.InfoRequest")(),
            )
        assert info.endpoint == str(plugin_dirs.dra_socket("pod-new").resolve())
    finally:
        for p in (old, new):
            if p.proc is not None and p.proc.poll() is None:
                p.stop()
    assert old.proc is not None
    assert old.proc.returncode == 0
    assert not plugin_dirs.registration_socket("pod-old").exists()


def test_sigterm_stops_cleanly_and_removes_the_registration_socket(plugin: PluginProcess) -> None:
    assert plugin.stop() == 0
    assert not plugin.dirs.registration_socket().exists()
    assert '"event": "stopped"' in plugin.logs()


def test_healthcheck_port_reports_serving_when_the_sockets_answer(
    plugin_dirs: PluginDirs, tmp_path_factory: pytest.TempPathFactory
) -> None:
    port = free_port()
    proc = PluginProcess(plugin_dirs, extra=["--healthcheck-port", str(port)])
    proc.start()
    try:
        from dra_kubelet_core._proto import grpc_health_v1_pb2 as hpb

        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            check = ch.unary_unary(
                "/grpc.health.v1.Health/Check",
                request_serializer=hpb.HealthCheckRequest.SerializeToString,
                response_deserializer=hpb.HealthCheckResponse.FromString,
            )
            answer = check(hpb.HealthCheckRequest(service="liveness"), timeout=10)
        assert answer.status == hpb.HealthCheckResponse.SERVING
    finally:
        proc.stop()
