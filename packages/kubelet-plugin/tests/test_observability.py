"""Health events reach the kubelet's health stream; metrics and structured logs describe
what the plugin did. Drives the real plugin process."""

from __future__ import annotations

import json
import urllib.request

from dra_kube_client.testing import free_port
from dra_nvlib import DeviceLibConfig, FakeDeviceLib, open_device_lib
from kubelet_plugin_support import (
    PluginDirs,
    PluginProcess,
    ReferenceProtos,
    make_claim,
    write_claim,
)


def test_xid_event_turns_the_device_unhealthy_on_the_health_stream(
    plugin: PluginProcess, reference: ReferenceProtos
) -> None:
    state = plugin.dirs.plugin_dir / "fake-gpus.json"
    config = DeviceLibConfig(backend="fake", node_name="n1", fake_state_path=state)
    status = reference.pool.FindEnumTypeByName("v1alpha1.HealthStatus").values_by_name
    with plugin.channel() as ch:
        stream = reference.stream(
            ch,
            "v1alpha1.DRAResourceHealth",
            "NodeWatchResources",
            reference.message("v1alpha1.NodeWatchResourcesRequest")(),
        )
        first = next(stream)
        assert {d.health for d in first.devices} == {status["HEALTHY"].number}
        with open_device_lib(config) as lib:
            assert isinstance(lib, FakeDeviceLib)
            gpu2 = lib.gpus()[2]
            lib.inject_xid(gpu2.uuid, 13)  # application fault: ignored
            lib.inject_xid(gpu2.uuid, 79)  # fell off the bus
        update = next(stream)
        stream.cancel()
    by_name = {d.device.device_name: d for d in update.devices}
    assert len(by_name) == 8
    assert by_name["gpu-2"].health == status["UNHEALTHY"].number
    assert "XID 79" in by_name["gpu-2"].message
    assert by_name["gpu-2"].last_updated_time > 0
    assert {d.health for n, d in by_name.items() if n != "gpu-2"} == {status["HEALTHY"].number}


def test_metrics_endpoint_counts_requests_devices_and_errors_and_logs_name_the_claim(
    plugin_dirs: PluginDirs, reference: ReferenceProtos
) -> None:
    port = free_port()
    proc = PluginProcess(
        plugin_dirs, extra=["--http-endpoint", f"127.0.0.1:{port}", "--metrics-insecure=true"]
    )
    proc.start()
    try:
        claim = make_claim(name="metered", namespace="team-a", devices=["gpu-0", "gpu-1"])
        write_claim(plugin_dirs.claims, claim)
        uid = claim["metadata"]["uid"]
        with proc.channel() as ch:
            assert reference.prepare(ch, [("team-a", "metered", uid)]).claims[uid].error == ""
            bad = reference.prepare(ch, [("team-a", "absent", "uid-absent")])
            assert bad.claims["uid-absent"].error
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
    finally:
        proc.stop()
    lines = text.splitlines()
    assert (
        'dra_kubelet_plugin_requests_total{api_version="v1",method="NodePrepareResources"} 2.0'
        in lines
    )
    assert "dra_kubelet_plugin_prepared_devices 2.0" in lines
    assert (
        'dra_kubelet_plugin_claim_errors_total{method="NodePrepareResources",'
        'reason="ClaimNotFound"} 1.0' in lines
    )
    assert any(
        line.startswith("dra_kubelet_plugin_request_duration_seconds_count") for line in lines
    )
    events = [json.loads(line) for line in proc.logs().splitlines() if line.startswith("{")]
    prepared = [e for e in events if e.get("event") == "prepared"]
    assert len(prepared) == 1
    assert prepared[0]["claim_uid"] == uid
    assert prepared[0]["claim_namespace"] == "team-a"
    assert prepared[0]["claim_name"] == "metered"
    assert prepared[0]["request_id"]
    failed = [e for e in events if e.get("event") == "prepare_failed"]
    assert failed[0]["claim_name"] == "absent"
