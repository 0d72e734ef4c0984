"""NVIDIA's metric names, labels and types (``nvidia_dra_*``), unit by unit and through the
real plugin process, so dashboards and alerts built for NVIDIA's driver keep working."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import pytest
from dra_kube_client.testing import free_port
from dra_kubelet_core import dra_service
from dra_kubelet_core._proto import dra_v1_pb2
from dra_kubelet_core.checkpoint import Checkpoint, ClaimState, PreparedClaim, PreparedDevice
from dra_kubelet_core.claims import PrepareOutcome, UnprepareOutcome
from dra_kubelet_core.errors import ClaimRef
from dra_kubelet_core.metrics import (
    NVIDIA_REQUEST_BUCKETS,
    PluginMetrics,
    nvidia_error_type,
    serve_metrics,
)
from dra_kubelet_plugin.gpu_driver import prepared_device_types
from kubelet_plugin_support import (
    PluginDirs,
    PluginProcess,
    ReferenceProtos,
    make_claim,
    write_claim,
)
from prometheus_client import CollectorRegistry

DRIVER = "gpu.nvidia.com"

#: name -> (type, label names), as NVIDIA's pkg/metrics registers them.
NVIDIA_FAMILIES = {
    "nvidia_dra_requests": ("counter", ("driver", "operation")),
    "nvidia_dra_request_duration_seconds": ("histogram", ("driver", "operation")),
    "nvidia_dra_requests_inflight": ("gauge", ("driver", "operation")),
    "nvidia_dra_prepared_devices": ("gauge", ("node", "driver", "device_type")),
    "nvidia_dra_node_prepare_errors": ("counter", ("driver", "error_type")),
    "nvidia_dra_node_unprepare_errors": ("counter", ("driver", "error_type")),
}


def _families(registry: CollectorRegistry) -> dict[str, Any]:
    return {f.name: f for f in registry.collect()}


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_families_have_nvidias_names_types_and_labels() -> None:
    metrics = PluginMetrics()
    metrics.init_driver(DRIVER)
    metrics.claim_failed(DRIVER, "prepare", "DeviceConfig")
    metrics.claim_failed(DRIVER, "unprepare", "Internal")
    metrics.set_prepared_devices("n1", DRIVER, {})
    families = _families(metrics.registry)
    for name, (kind, labels) in NVIDIA_FAMILIES.items():
        family = families[name]
        assert family.type == kind, name
        assert family.samples, name
        for sample in family.samples:
            assert tuple(k for k in sample.labels if k != "le") == labels, sample


def test_request_series_exist_at_zero_before_any_request() -> None:
    metrics = PluginMetrics()
    metrics.init_driver(DRIVER)
    for operation in ("prepare", "unprepare"):
        labels = {"driver": DRIVER, "operation": operation}
        assert _value(metrics.registry, "nvidia_dra_requests_total", **labels) == 0
        assert _value(metrics.registry, "nvidia_dra_requests_inflight", **labels) == 0
        assert _value(metrics.registry, "nvidia_dra_request_duration_seconds_count", **labels) == 0


def test_duration_buckets_are_nvidias() -> None:
    assert pytest.approx(NVIDIA_REQUEST_BUCKETS) == (0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8)
    metrics = PluginMetrics()
    metrics.claim_succeeded(DRIVER, "prepare", 0.3)
    bounds = [
        s.labels["le"]
        for s in _families(metrics.registry)["nvidia_dra_request_duration_seconds"].samples
        if s.name.endswith("_bucket")
    ]
    assert bounds == ["0.05", "0.1", "0.2", "0.4", "0.8", "1.6", "3.2", "6.4", "12.8", "+Inf"]
    labels = {"driver": DRIVER, "operation": "prepare"}
    assert (
        _value(metrics.registry, "nvidia_dra_request_duration_seconds_bucket", le="0.2", **labels)
        == 0
    )
    assert (
        _value(metrics.registry, "nvidia_dra_request_duration_seconds_bucket", le="0.4", **labels)
        == 1
    )


@pytest.mark.parametrize(
    ("operation", "reason", "error_type"),
    [
        ("prepare", "LockTimeout", "lock_acquire"),
        ("unprepare", "LockTimeout", "lock_acquire"),
        ("prepare", "DeviceConfig", "prepare_devices"),
        ("prepare", "Internal", "prepare_devices"),
        ("unprepare", "Checkpoint", "unprepare_devices"),
    ],
)
def test_error_types_are_nvidias(operation: str, reason: str, error_type: str) -> None:
    assert nvidia_error_type(operation, reason) == error_type


def test_prepared_devices_count_completed_claims_by_type() -> None:
    def claim(uid: str, state: ClaimState, *names: str) -> PreparedClaim:
        devices = tuple(
            PreparedDevice((), "n1", n, (f"k8s.gpu.nvidia.com/claim={uid}-{n}",)) for n in names
        )
        return PreparedClaim(uid=uid, namespace="ns", name=uid, state=state, devices=devices)

    checkpoint = Checkpoint(
        boot_id="b",
        claims={
            "a": claim("a", ClaimState.PREPARE_COMPLETED, "gpu-0", "gpu-1"),
            "b": claim("b", ClaimState.PREPARE_COMPLETED, "gpu-2-mig-0", "gone"),
            # Not yet usable by a container: NVIDIA's gauge leaves it out.
            "c": claim("c", ClaimState.PREPARE_STARTED, "gpu-3"),
        },
    )

    class _Dev:
        def __init__(self, kind: str) -> None:
            self.type = kind

    devices: Any = {
        "gpu-0": _Dev("gpu"),
        "gpu-1": _Dev("gpu"),
        "gpu-2-mig-0": _Dev("mig"),
        "gpu-3": _Dev("gpu"),
    }
    counts = prepared_device_types(checkpoint, devices)
    assert counts == {"gpu": 2, "mig": 1, "unknown": 1}
    metrics = PluginMetrics()
    metrics.set_prepared_devices("n1", DRIVER, counts)
    metrics.set_prepared_devices("n1", DRIVER, {"gpu": 1})
    for device_type, expected in (("gpu", 1), ("mig", 0), ("vfio", 0), ("unknown", 0)):
        assert (
            _value(
                metrics.registry,
                "nvidia_dra_prepared_devices",
                node="n1",
                driver=DRIVER,
                device_type=device_type,
            )
            == expected
        )


class _Driver:
    """A ClaimDriver whose outcomes are given; records the in-flight gauge while it runs."""

    def __init__(self, metrics: PluginMetrics, failing: set[str]) -> None:
        self.metrics = metrics
        self.failing = failing
        self.inflight_seen: list[float | None] = []

    def _seen(self, operation: str) -> None:
        self.inflight_seen.append(
            _value(
                self.metrics.registry,
                "nvidia_dra_requests_inflight",
                driver=DRIVER,
                operation=operation,
            )
        )

    async def prepare_claims(self, claims: Sequence[ClaimRef]) -> dict[str, PrepareOutcome]:
        self._seen("prepare")
        return {
            c.uid: PrepareOutcome(error="bad", reason="DeviceConfig")
            if c.uid in self.failing
            else PrepareOutcome()
            for c in claims
        }

    async def unprepare_claims(self, claims: Sequence[ClaimRef]) -> dict[str, UnprepareOutcome]:
        self._seen("unprepare")
        return {
            c.uid: UnprepareOutcome(error="held", reason="LockTimeout")
            if c.uid in self.failing
            else UnprepareOutcome()
            for c in claims
        }


def test_grpc_handlers_count_each_claim_like_nvidia() -> None:
    metrics = PluginMetrics()
    driver = _Driver(metrics, failing={"u3"})
    dra_service.dra_handlers(driver, metrics, DRIVER)
    prepare = dra_service._prepare(driver, metrics, DRIVER, "v1", dra_v1_pb2)
    unprepare = dra_service._unprepare(driver, metrics, DRIVER, "v1", dra_v1_pb2)
    claims = [dra_v1_pb2.Claim(namespace="ns", name=u, uid=u) for u in ("u1", "u2", "u3")]

    async def run() -> None:
        await prepare(dra_v1_pb2.NodePrepareResourcesRequest(claims=claims), None)  # type: ignore[arg-type]
        await unprepare(dra_v1_pb2.NodeUnprepareResourcesRequest(claims=claims), None)  # type: ignore[arg-type]

    asyncio.run(run())
    reg = metrics.registry
    assert driver.inflight_seen == [3, 3]
    for operation in ("prepare", "unprepare"):
        labels = {"driver": DRIVER, "operation": operation}
        # Counted and timed on success, as NVIDIA's ObserveRequest is.
        assert _value(reg, "nvidia_dra_requests_total", **labels) == 2
        assert _value(reg, "nvidia_dra_request_duration_seconds_count", **labels) == 2
        assert _value(reg, "nvidia_dra_requests_inflight", **labels) == 0
    assert (
        _value(
            reg, "nvidia_dra_node_prepare_errors_total", driver=DRIVER, error_type="prepare_devices"
        )
        == 1
    )
    assert (
        _value(
            reg, "nvidia_dra_node_unprepare_errors_total", driver=DRIVER, error_type="lock_acquire"
        )
        == 1
    )
    # Ours keep counting per gRPC call, with our reasons.
    assert (
        _value(
            reg,
            "dra_kubelet_plugin_requests_total",
            method="NodePrepareResources",
            api_version="v1",
        )
        == 1
    )


def test_metrics_are_served_on_the_configured_path_only() -> None:
    metrics = PluginMetrics()
    metrics.init_driver(DRIVER)
    server = serve_metrics(metrics.registry, "127.0.0.1", 0, "custom/path")
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/custom/path", timeout=10) as r:
            assert "nvidia_dra_requests_total" in r.read().decode()
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10)
        assert info.value.code == 404
        info.value.close()
    finally:
        server.shutdown()
        server.server_close()


def _scrape(port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text: str = r.read().decode()
    return text.splitlines()


def test_plugin_process_exports_nvidias_series(
    plugin_dirs: PluginDirs, reference: ReferenceProtos
) -> None:
    port = free_port()
    proc = PluginProcess(
        plugin_dirs,
        extra=[
            "--http-endpoint",
            f"127.0.0.1:{port}",
            "--metrics-path",
            "/metrics",
            "--metrics-insecure=true",
        ],
    )
    proc.start()
    try:
        claim = make_claim(name="metered", namespace="team-a", devices=["gpu-0", "gpu-1"])
        write_claim(plugin_dirs.claims, claim)
        uid = claim["metadata"]["uid"]
        with proc.channel() as ch:
            assert reference.prepare(ch, [("team-a", "metered", uid)]).claims[uid].error == ""
            assert reference.prepare(ch, [("team-a", "absent", "uid-x")]).claims["uid-x"].error
            during = _scrape(port)
            assert reference.unprepare(ch, [("team-a", "metered", uid)]).claims[uid].error == ""
        after = _scrape(port)
    finally:
        proc.stop()
    prepare = f'driver="{DRIVER}",operation="prepare"'
    unprepare = f'driver="{DRIVER}",operation="unprepare"'
    gpus = f'device_type="gpu",driver="{DRIVER}",node="n1"'
    assert "# TYPE nvidia_dra_requests_total counter" in during
    assert "# TYPE nvidia_dra_request_duration_seconds histogram" in during
    assert "# TYPE nvidia_dra_requests_inflight gauge" in during
    assert "# TYPE nvidia_dra_prepared_devices gauge" in during
    assert f"nvidia_dra_requests_total{{{prepare}}} 1.0" in during
    assert f"nvidia_dra_requests_total{{{unprepare}}} 0.0" in during
    assert f"nvidia_dra_requests_inflight{{{prepare}}} 0.0" in during
    assert f"nvidia_dra_prepared_devices{{{gpus}}} 2.0" in during
    assert (
        f'nvidia_dra_node_prepare_errors_total{{driver="{DRIVER}",error_type="prepare_devices"}}'
        " 1.0" in during
    )
    assert f"nvidia_dra_requests_total{{{unprepare}}} 1.0" in after
    assert f"nvidia_dra_request_duration_seconds_count{{{unprepare}}} 1.0" in after
    assert f"nvidia_dra_prepared_devices{{{gpus}}} 0.0" in after
