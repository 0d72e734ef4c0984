"""The ``container`` label of ``nvidia_dra_device_allocation_info``: which containers use a
claim, as the kubelet's PodResources ``List`` says, asked at scrape time, cached, and never
failing a scrape (an empty label instead)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import grpc.aio
import pytest
from dra_kubelet_core._proto import podresources_v1_pb2 as pb
from dra_kubelet_core.allocation_info import AllocationInfo, DeviceIdentity
from dra_kubelet_core.errors import ConfigurationError
from dra_kubelet_core.metrics import ALLOCATION_INFO, PluginMetrics
from dra_kubelet_core.pod_containers import PodClaim, claim_containers, with_containers
from dra_kubelet_core.pod_resources import PodResourcesContainers
from dra_kubelet_core.settings import add_flags, common_flags, common_settings_from_args
from prometheus_client import CollectorRegistry


def _container(name: str, *claims: str, namespace: str = "team-a") -> pb.ContainerResources:
    return pb.ContainerResources(
        name=name,
        dynamic_resources=[
            pb.DynamicResource(
                claim_name=c,
                claim_namespace=namespace,
                claim_resources=[
                    pb.ClaimResource(
                        driver_name="gpu.nvidia.com", pool_name="n1", device_name="gpu-0"
                    )
                ],
            )
            for c in claims
        ],
    )


def _pod(
    name: str, *containers: pb.ContainerResources, namespace: str = "team-a"
) -> pb.PodResources:
    return pb.PodResources(name=name, namespace=namespace, containers=list(containers))


class FakeKubelet:
    """The kubelet's PodResources service on a unix socket: ``List`` answers ``response``
    (or aborts with ``fail``, or waits for ``release`` while ``hang``), counting calls."""

    def __init__(self, socket: Path) -> None:
        """Serve on ``socket`` from an event loop in a thread of its own (the client under
        test blocks)."""
        self.socket = socket
        self.response = pb.ListPodResourcesResponse()
        self.fail: grpc.StatusCode | None = None
        self.hang = False
        self.calls = 0
        self.release = asyncio.Event()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.server = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)

    async def _list(
        self, request: pb.ListPodResourcesRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.ListPodResourcesResponse:
        self.calls += 1
        if self.hang:
            await self.release.wait()
        if self.fail is not None:
            await context.abort(self.fail, "the test says no")
        return self.response

    async def _start(self) -> grpc.aio.Server:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "v1.PodResourcesLister",
                    {
                        "List": grpc.unary_unary_rpc_method_handler(
                            self._list,
                            request_deserializer=pb.ListPodResourcesRequest.FromString,
                            response_serializer=pb.ListPodResourcesResponse.SerializeToString,
                        )
                    },
                ),
            )
        )
        server.add_insecure_port(f"unix://{self.socket}")
        await server.start()
        return server

    def stop(self) -> None:
        """Stop serving and the loop (the socket file is removed by the server)."""
        self.loop.call_soon_threadsafe(self.release.set)
        asyncio.run_coroutine_threadsafe(self.server.stop(None), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture
def kubelet(tmp_path: Path) -> Iterator[FakeKubelet]:
    fake = FakeKubelet(tmp_path / "kubelet.sock")
    try:
        yield fake
    finally:
        fake.stop()


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _row(pod: str, claim: str, device: str = "gpu-0") -> AllocationInfo:
    return AllocationInfo(
        node="n1",
        driver="gpu.nvidia.com",
        namespace="team-a",
        pod=pod,
        pod_uid=f"uid-{pod}",
        claim=claim,
        claim_uid=f"uid-{claim}",
        request="gpu",
        device=device,
        identity=DeviceIdentity(uuid="GPU-a", index="0"),
    )


def _series(registry: CollectorRegistry) -> list[tuple[str, str, str]]:
    return sorted(
        (s.labels["pod"], s.labels["claim"], s.labels["container"])
        for family in registry.collect()
        if family.name == ALLOCATION_INFO
        for s in family.samples
    )


def test_claim_containers_lists_each_claims_containers_sorted_per_pod() -> None:
    response = pb.ListPodResourcesResponse(
        pod_resources=[
            _pod("trainer", _container("worker", "shared"), _container("main", "shared", "own")),
            # Same claim name in another pod and namespace: separate keys.
            _pod("other", _container("c", "shared", namespace="team-b"), namespace="team-b"),
            # A container with no claim, one with device-plugin devices only: no key.
            _pod("plain", pb.ContainerResources(name="c"), _container("d")),
        ]
    )
    assert claim_containers(response) == {
        PodClaim("team-a", "trainer", "shared"): ("main", "worker"),
        PodClaim("team-a", "trainer", "own"): ("main",),
        PodClaim("team-b", "other", "shared"): ("c",),
    }


def test_a_dynamic_resource_without_claim_namespace_is_in_the_pods() -> None:
    response = pb.ListPodResourcesResponse(
        pod_resources=[_pod("p", _container("c", "x", namespace=""), namespace="ns")]
    )
    assert claim_containers(response) == {PodClaim("ns", "p", "x"): ("c",)}


def test_with_containers_gives_a_row_per_container_and_keeps_unknown_ones_empty() -> None:
    rows = [_row("trainer", "shared"), _row("trainer", "other"), _row("", "unreserved")]
    index = {PodClaim("team-a", "trainer", "shared"): ("main", "worker")}
    got = with_containers(rows, index)
    assert [(r.pod, r.claim, r.container) for r in got] == [
        ("trainer", "shared", "main"),
        ("trainer", "shared", "worker"),
        ("trainer", "other", ""),
        ("", "unreserved", ""),
    ]
    # Every other label as it was.
    assert {r.device for r in got} == {"gpu-0"}
    assert got[1].values()[5] == "worker"


def test_the_series_get_the_containers_the_kubelet_lists(kubelet: FakeKubelet) -> None:
    kubelet.response = pb.ListPodResourcesResponse(
        pod_resources=[_pod("trainer", _container("main", "shared"), _container("side", "shared"))]
    )
    metrics = PluginMetrics()
    metrics.set_allocation_info([_row("trainer", "shared"), _row("idle", "spare")])
    # No source: today's series, container empty, the kubelet not asked.
    assert _series(metrics.registry) == [("idle", "spare", ""), ("trainer", "shared", "")]
    metrics.set_container_source(PodResourcesContainers(kubelet.socket))
    assert _series(metrics.registry) == [
        ("idle", "spare", ""),
        ("trainer", "shared", "main"),
        ("trainer", "shared", "side"),
    ]
    assert kubelet.calls == 1


def test_nothing_prepared_asks_the_kubelet_nothing(kubelet: FakeKubelet) -> None:
    metrics = PluginMetrics()
    metrics.set_container_source(PodResourcesContainers(kubelet.socket))
    assert _series(metrics.registry) == []
    assert kubelet.calls == 0


def test_an_answer_is_reused_for_the_ttl_then_asked_again(kubelet: FakeKubelet) -> None:
    clock = Clock()
    source = PodResourcesContainers(kubelet.socket, ttl_s=5.0, clock=clock)
    kubelet.response = pb.ListPodResourcesResponse(pod_resources=[_pod("p", _container("a", "c"))])
    assert source() == {PodClaim("team-a", "p", "c"): ("a",)}
    kubelet.response = pb.ListPodResourcesResponse(pod_resources=[_pod("p", _container("b", "c"))])
    clock.now += 4.9
    assert source() == {PodClaim("team-a", "p", "c"): ("a",)}
    assert kubelet.calls == 1
    clock.now += 0.1
    assert source() == {PodClaim("team-a", "p", "c"): ("b",)}
    assert kubelet.calls == 2


def test_a_failing_kubelet_leaves_the_label_empty_and_is_logged_once(
    kubelet: FakeKubelet, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    source = PodResourcesContainers(kubelet.socket, ttl_s=5.0, clock=clock)
    kubelet.fail = grpc.StatusCode.UNIMPLEMENTED
    caplog.set_level(logging.DEBUG, logger="dra_kubelet_core.pod_resources")
    for _ in range(3):
        assert source() == {}
        clock.now += 5
    assert kubelet.calls == 3
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "UNIMPLEMENTED: the test says no" in warnings[0].__dict__["reason"]

    kubelet.fail = None
    kubelet.response = pb.ListPodResourcesResponse(pod_resources=[_pod("p", _container("a", "c"))])
    assert source() == {PodClaim("team-a", "p", "c"): ("a",)}
    assert any(r.__dict__.get("event") == "pod_resources_recovered" for r in caplog.records)
    # A new outage after a success is worth a warning again.
    kubelet.fail = grpc.StatusCode.UNAVAILABLE
    clock.now += 5
    assert source() == {}
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 2


def test_a_hung_kubelet_costs_one_scrape_the_timeout_then_the_ttl_nothing(
    kubelet: FakeKubelet,
) -> None:
    clock = Clock()
    source = PodResourcesContainers(kubelet.socket, timeout_s=0.2, ttl_s=5.0, clock=clock)
    kubelet.hang = True
    metrics = PluginMetrics()
    metrics.set_allocation_info([_row("trainer", "shared")])
    metrics.set_container_source(source)
    assert _series(metrics.registry) == [("trainer", "shared", "")]
    assert _series(metrics.registry) == [("trainer", "shared", "")]
    assert kubelet.calls == 1


def test_a_missing_socket_leaves_the_label_empty(tmp_path: Path) -> None:
    metrics = PluginMetrics()
    metrics.set_allocation_info([_row("trainer", "shared")])
    metrics.set_container_source(PodResourcesContainers(tmp_path / "absent.sock"))
    assert _series(metrics.registry) == [("trainer", "shared", "")]


def test_a_socket_nobody_serves_leaves_the_label_empty(tmp_path: Path) -> None:
    # A file where the socket should be: the kubelet is down, its old socket left behind.
    stale = tmp_path / "kubelet.sock"
    stale.write_text("")
    assert PodResourcesContainers(stale, timeout_s=0.5)() == {}


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_flags(parser, list(common_flags("gpu.nvidia.com").values()), {})
    return parser.parse_args(["--node-name=n1", *argv])


def test_the_socket_flag_defaults_to_the_kubelets_and_empty_turns_it_off() -> None:
    default = common_settings_from_args(_parse())
    assert default["pod_resources_socket"] == Path("/var/lib/kubelet/pod-resources/kubelet.sock")
    assert (
        common_settings_from_args(_parse("--kubelet-pod-resources-socket="))["pod_resources_socket"]
        is None
    )
    with pytest.raises(ConfigurationError, match="--kubelet-pod-resources-socket"):
        common_settings_from_args(_parse("--kubelet-pod-resources-socket=kubelet.sock"))
