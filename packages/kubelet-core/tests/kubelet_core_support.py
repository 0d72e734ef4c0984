"""Test support shared by the kubelet plugin core's tests and the plugins' tests.

- :class:`ReferenceProtos`: an independent gRPC client built at test time by grpcio-tools
  directly from ``/work/shared/reference/*.proto`` (not from the core's own ``.proto``),
  loaded into a private descriptor pool so it can live next to the core's stubs.
- :func:`make_claim`: ResourceClaim JSON as the API server would return it.
- :class:`PluginDirs`: the temp directories of one plugin instance.
- :func:`plugin_api_server`: the shared in-memory API server (``dra_kube_client.testing``)
  over real HTTP, for a plugin given a kubeconfig.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from dra_api_types.testing import allocation, device_result, exactly, resource_claim
from dra_kube_client.testing import HttpFront, MemoryApi, serve_http
from dra_kubelet_core.sockets import SocketPaths
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

REFERENCE_DIR = Path(os.environ.get("DRA_REFERENCE_DIR", "/work/shared/reference"))
REFERENCE_PROTOS = (
    "pluginregistration-v1.proto",
    "dra-v1.proto",
    "dra-v1beta1.proto",
    "dra-health-v1alpha1.proto",
    "dra-health-v1.proto",
)
DRIVER = "gpu.nvidia.com"


class ReferenceProtos:
    """Message classes and method callers built from the upstream reference protos."""

    def __init__(self, out_dir: Path) -> None:
        import grpc_tools  # type: ignore[import-untyped]
        from grpc_tools import protoc

        out_dir.mkdir(parents=True, exist_ok=True)
        descriptor_set = out_dir / "reference.pb"
        include = Path(grpc_tools.__file__).parent / "_proto"
        rc = protoc.main(
            [
                "protoc",
                f"-I{REFERENCE_DIR}",
                f"-I{include}",
                f"--descriptor_set_out={descriptor_set}",
                "--include_imports",
                *REFERENCE_PROTOS,
            ]
        )
        if rc != 0:
            raise RuntimeError(f"protoc failed on {REFERENCE_DIR} (exit {rc})")
        files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set.read_bytes())
        self.pool = descriptor_pool.DescriptorPool()
        for f in files.file:
            self.pool.Add(f)

    def message(self, full_name: str) -> type[Message]:
        """The message class of ``full_name`` (e.g. ``pluginregistration.PluginInfo``)."""
        return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(full_name))

    def call(
        self,
        channel: grpc.Channel,
        service: str,
        method: str,
        request: Message,
        timeout: float = 10,
    ) -> Any:
        """Call a unary method by its fully qualified service name."""
        desc = self.pool.FindServiceByName(service).FindMethodByName(method)
        response_cls = message_factory.GetMessageClass(desc.output_type)
        stub = channel.unary_unary(
            f"/{service}/{method}",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_cls.FromString,
        )
        return stub(request, timeout=timeout)

    def stream(self, channel: grpc.Channel, service: str, method: str, request: Message) -> Any:
        """Call a server-streaming method; returns the response iterator (cancel when done)."""
        desc = self.pool.FindServiceByName(service).FindMethodByName(method)
        response_cls = message_factory.GetMessageClass(desc.output_type)
        stub = channel.unary_stream(
            f"/{service}/{method}",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_cls.FromString,
        )
        return stub(request, timeout=30)

    def dra_service(self, version: str) -> str:
        """``k8s.io.kubelet.pkg.apis.dra.<version>.DRAPlugin``."""
        return f"k8s.io.kubelet.pkg.apis.dra.{version}.DRAPlugin"

    def prepare(
        self, channel: grpc.Channel, claims: Sequence[tuple[str, str, str]], *, version: str = "v1"
    ) -> Any:
        """NodePrepareResources for ``(namespace, name, uid)`` claims."""
        pkg = f"k8s.io.kubelet.pkg.apis.dra.{version}"
        request = self.message(f"{pkg}.NodePrepareResourcesRequest")(
            claims=[{"namespace": ns, "name": n, "uid": u} for ns, n, u in claims]
        )
        return self.call(channel, self.dra_service(version), "NodePrepareResources", request)

    def unprepare(
        self, channel: grpc.Channel, claims: Sequence[tuple[str, str, str]], *, version: str = "v1"
    ) -> Any:
        """NodeUnprepareResources for ``(namespace, name, uid)`` claims."""
        pkg = f"k8s.io.kubelet.pkg.apis.dra.{version}"
        request = self.message(f"{pkg}.NodeUnprepareResourcesRequest")(
            claims=[{"namespace": ns, "name": n, "uid": u} for ns, n, u in claims]
        )
        return self.call(channel, self.dra_service(version), "NodeUnprepareResources", request)


def make_claim(
    *,
    name: str,
    devices: Sequence[str | tuple[str, str]],
    namespace: str = "default",
    uid: str | None = None,
    pool: str = "n1",
    driver: str = DRIVER,
    configs: Sequence[dict[str, Any]] = (),
    admin_access: bool = False,
    allocated: bool = True,
) -> dict[str, Any]:
    """A v1 ResourceClaim as stored by the API server.

    ``devices`` are device names (request ``gpu``) or ``(request, device)`` pairs.
    """
    results = []
    for item in devices:
        request, device = ("gpu", item) if isinstance(item, str) else item
        results.append(
            device_result(
                device, request=request, driver=driver, pool=pool, admin_access=admin_access
            )
        )
    return resource_claim(
        name,
        namespace=namespace,
        uid=uid or str(uuid.uuid4()),
        resource_version="1",
        requests=[exactly("gpu", device_class="gpu.nvidia.com", count=1)],
        status={"allocation": allocation(results, config=configs)} if allocated else {},
    )


@dataclass
class PluginDirs:
    """Temp directories of one plugin instance."""

    root: Path
    registrar: Path = field(init=False)
    plugins: Path = field(init=False)
    cdi: Path = field(init=False)
    claims: Path = field(init=False)
    boot_id: Path = field(init=False)

    def __post_init__(self) -> None:
        self.registrar = self.root / "plugins_registry"
        self.plugins = self.root / "plugins"
        self.cdi = self.root / "cdi"
        self.claims = self.root / "claims"
        self.boot_id = self.root / "boot_id"
        for d in (self.registrar, self.plugins, self.cdi, self.claims):
            d.mkdir(parents=True, exist_ok=True)
        if not self.boot_id.exists():
            self.boot_id.write_text(str(uuid.uuid4()) + "\n")

    @property
    def plugin_dir(self) -> Path:
        """``<plugins>/gpu.nvidia.com``."""
        return self.plugins / DRIVER

    @property
    def checkpoint(self) -> Path:
        """The checkpoint file."""
        return self.plugin_dir / "checkpoint.json"

    def sockets(self, pod_uid: str = "") -> SocketPaths:
        """The plugin's socket paths (per-pod names with ``pod_uid``)."""
        return SocketPaths.build(
            driver_name=DRIVER,
            registrar_dir=self.registrar,
            plugins_dir=self.plugins,
            pod_uid=pod_uid or None,
        )

    def registration_socket(self, pod_uid: str = "") -> Path:
        """Where the registration socket is."""
        return self.sockets(pod_uid).registration

    def dra_socket(self, pod_uid: str = "") -> Path:
        """Where the DRA socket is."""
        return self.sockets(pod_uid).dra


RESOURCE_SLICES = "/apis/resource.k8s.io/v1/resourceslices"
NODE_EVENTS = "/api/v1/namespaces/default/events"


def claim_path(namespace: str, name: str) -> str:
    """Where the API server keeps a ResourceClaim (v1)."""
    return f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"


def plugin_api_server(node_uid: str, node_name: str = "n1") -> HttpFront:
    """The shared in-memory API server over real HTTP, holding what the plugin reads when it
    starts: the ``resource.k8s.io`` discovery document and its Node."""
    api = MemoryApi(watch_wait_s=5.0)
    versions = [
        {"groupVersion": f"resource.k8s.io/{v}", "version": v} for v in ("v1", "v1beta2", "v1beta1")
    ]
    api.documents["/apis/resource.k8s.io"] = {"kind": "APIGroup", "versions": versions}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name, "uid": node_uid}}
    api.put_object(f"/api/v1/nodes/{node_name}", node)
    return serve_http(api)
