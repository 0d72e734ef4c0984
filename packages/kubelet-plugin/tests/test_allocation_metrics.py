"""``nvidia_dra_device_allocation_info`` from the real plugin process: a full GPU, a MIG
device and MIG devices created at prepare (DynamicMIG) labelled with the UUIDs and GPU
instance that dcgm-exporter reports for them."""

from __future__ import annotations

import urllib.request

from dra_kube_client.testing import free_port
from dra_nvlib import DeviceLibConfig, FakeDeviceLib, GpuInfo, open_device_lib
from kubelet_plugin_support import (
    PluginDirs,
    PluginProcess,
    ReferenceProtos,
    make_claim,
    write_claim,
)
from prometheus_client.parser import text_string_to_metric_families

DRIVER = "gpu.nvidia.com"


def _info_series(port: int) -> list[dict[str, str]]:
    """The scraped series' label sets (each with value 1)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text: str = r.read().decode()
    out = []
    for family in text_string_to_metric_families(text):
        if family.name == "nvidia_dra_device_allocation_info":
            for sample in family.samples:
                assert sample.value == 1
                out.append(dict(sample.labels))
    return sorted(out, key=lambda labels: labels["device"])


def test_gpu_and_mig_devices_of_a_pod_carry_dcgm_join_labels(
    plugin_dirs: PluginDirs, reference: ReferenceProtos
) -> None:
    config = DeviceLibConfig(
        backend="fake", node_name="n1", fake_state_path=plugin_dirs.plugin_dir / "fake-gpus.json"
    )
    port = free_port()
    proc = PluginProcess(
        plugin_dirs,
        fake_gpus="1xA100-40GB:mig,1xA100-40GB",
        extra=["--http-endpoint", f"127.0.0.1:{port}", "--metrics-insecure=true"],
    )
    proc.start()
    proc.stop()  # the first start wrote the fake GPUs' state; now add a MIG device to it
    with open_device_lib(config) as lib:
        parent, other = lib.gpus()
        mig = lib.create_mig_device(parent.uuid, profile_id=19, placement_start=0)
    proc.start()
    try:
        claim = make_claim(
            name="train", namespace="team-a", devices=["gpu-1", "gpu-0-mig-1g5gb-19-0"]
        )
        claim["status"]["reservedFor"] = [{"resource": "pods", "name": "job-0", "uid": "p-0"}]
        write_claim(plugin_dirs.claims, claim)
        uid = claim["metadata"]["uid"]
        with proc.channel() as ch:
            assert reference.prepare(ch, [("team-a", "train", uid)]).claims[uid].error == ""
            during = _info_series(port)
            assert reference.unprepare(ch, [("team-a", "train", uid)]).claims[uid].error == ""
        after = _info_series(port)
    finally:
        proc.stop()
    common = {
        "node": "n1",
        "driver": DRIVER,
        "namespace": "team-a",
        "pod": "job-0",
        "pod_uid": "p-0",
        # No kubelet PodResources socket here: which container is not known.
        "container": "",
        "claim": "train",
        "claim_uid": uid,
        "request": "gpu",
    }
    mig_labels = {
        "device": "gpu-0-mig-1g5gb-19-0",
        "UUID": parent.uuid,
        "gpu": str(parent.index),
        "GPU_I_ID": str(mig.gi_id),
        "mig_uuid": mig.uuid,
    }
    gpu_labels = {
        "device": "gpu-1",
        "UUID": other.uuid,
        "gpu": str(other.index),
        "GPU_I_ID": "",
        "mig_uuid": "",
    }
    assert during == [common | mig_labels, common | gpu_labels]
    assert after == []


def test_dynamic_mig_device_carries_the_gpu_instance_created_for_it(
    plugin_dirs: PluginDirs, reference: ReferenceProtos
) -> None:
    """A MIG device made at prepare (DynamicMIG) joins dcgm-exporter's series as a static
    one does: its parent's UUID and the GPU instance NVML gave it, also after a restart
    (the instance id comes from the checkpoint, not from the GPU)."""
    state = plugin_dirs.root / "gpus.json"
    port = free_port()
    proc = PluginProcess(
        plugin_dirs,
        fake_gpus="1xH100-80GB",
        extra=[
            "--http-endpoint",
            f"127.0.0.1:{port}",
            "--metrics-insecure=true",
            "--feature-gates",
            "DynamicMIG=true",
            "--fake-gpu-state-file",
            str(state),
        ],
    )
    # Two devices: their GPU instance ids differ, so a label taken from the wrong one shows.
    claim = make_claim(
        name="dyn", namespace="team-a", devices=["gpu-0-mig-1g10gb-19-0", "gpu-0-mig-3g40gb-9-4"]
    )
    claim["status"]["reservedFor"] = [{"resource": "pods", "name": "job-0", "uid": "p-0"}]
    write_claim(plugin_dirs.claims, claim)
    uid = claim["metadata"]["uid"]

    def gpu() -> GpuInfo:
        (only,) = FakeDeviceLib.open(state_path=state, fleet=None, node_name="n1").gpus()
        return only

    proc.start()
    try:
        with proc.channel() as ch:
            assert reference.prepare(ch, [("team-a", "dyn", uid)]).claims[uid].error == ""
        during = _info_series(port)
        made = gpu()
        proc.stop()
        proc.start()
        after_restart = _info_series(port)
        with proc.channel() as ch:
            assert reference.unprepare(ch, [("team-a", "dyn", uid)]).claims[uid].error == ""
    finally:
        proc.stop()
    instances = {m.uuid: str(m.gi_id) for m in made.mig_devices}
    assert len(instances) == 2
    assert [(s["device"], s["UUID"], s["gpu"]) for s in during] == [
        ("gpu-0-mig-1g10gb-19-0", made.uuid, str(made.index)),
        ("gpu-0-mig-3g40gb-9-4", made.uuid, str(made.index)),
    ]
    assert {s["mig_uuid"]: s["GPU_I_ID"] for s in during} == instances
    assert after_restart == during
    assert gpu().mig_devices == ()  # unprepare destroyed them again
