"""Test support for the kubelet plugin's tests (imported by conftest and tests).

- :class:`ReferenceProtos`: an independent gRPC client built at test time by grpcio-tools
  directly from ``/work/shared/reference/*.proto`` (not from the plugin's own ``.proto``),
  loaded into a private descriptor pool so it can live next to the plugin's stubs.
- :func:`make_claim`: ResourceClaim JSON as the API server would return it.
- :class:`PluginProcess`: the real ``dra-kubelet-plugin`` program in a subprocess, with temp
  directories, the fake GPU backend and the directory claim source (the test double of the
  API server's claim endpoint).
- :func:`plugin_api_server`: the shared in-memory API server (``dra_kube_client.testing``)
  over real HTTP, for a plugin given a kubeconfig.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from dra_kube_client.testing import HttpFront, MemoryApi, serve_http
from dra_kubelet_plugin.core.sockets import SocketPaths
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
        result: dict[str, Any] = {
            "request": request,
            "driver": driver,
            "pool": pool,
            "device": device,
        }
        if admin_access:
            result["adminAccess"] = True
        results.append(result)
    claim: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or str(uuid.uuid4()),
            "resourceVersion": "1",
        },
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}
                ]
            }
        },
        "status": {},
    }
    if allocated:
        claim["status"]["allocation"] = {"devices": {"results": results, "config": list(configs)}}
    return claim


def gpu_config(
    parameters: dict[str, Any], *, source: str = "FromClaim", requests: Sequence[str] = ()
) -> dict[str, Any]:
    """An allocation config entry carrying ``parameters`` for this driver."""
    entry: dict[str, Any] = {
        "source": source,
        "opaque": {"driver": DRIVER, "parameters": parameters},
    }
    if requests:
        entry["requests"] = list(requests)
    return entry


def write_claim(claims_dir: Path, claim: dict[str, Any]) -> None:
    """Store a claim where the directory claim source (API-server double) finds it."""
    meta = claim["metadata"]
    path = claims_dir / meta["namespace"] / f"{meta['name']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(claim))
    tmp.replace(path)


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


class PluginProcess:
    """``python -m dra_kubelet_plugin`` with the fake backend and temp directories."""

    def __init__(
        self,
        dirs: PluginDirs,
        *,
        fake_gpus: str = "8xH100-80GB",
        extra: Sequence[str] = (),
        claims_directory: bool = True,
    ) -> None:
        self.dirs = dirs
        self.fake_gpus = fake_gpus
        self.extra = list(extra)
        self.claims_directory = claims_directory
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = dirs.root / "plugin.log"

    def args(self) -> list[str]:
        """The command line."""
        return [
            sys.executable,
            "-m",
            "dra_kubelet_plugin",
            "--node-name",
            "n1",
            "--device-backend",
            "fake",
            "--fake-gpus",
            self.fake_gpus,
            "--kubelet-registrar-directory-path",
            str(self.dirs.registrar),
            "--kubelet-plugins-directory-path",
            str(self.dirs.plugins),
            "--cdi-root",
            str(self.dirs.cdi),
            *(["--claims-directory", str(self.dirs.claims)] if self.claims_directory else []),
            "--boot-id-file",
            str(self.dirs.boot_id),
            *self.extra,
        ]

    def start(self, *, pod_uid: str = "", timeout_s: float = 30.0) -> None:
        """Start and wait until the registration socket answers."""
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NODE_NAME")}
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.args(), stdout=log, stderr=log, env=env)
        sock = self.dirs.registration_socket(pod_uid)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"plugin exited with {self.proc.returncode}:\n{self.logs()}")
            if sock.exists():
                with grpc.insecure_channel(f"unix://{sock}") as ch:
                    try:
                        grpc.channel_ready_future(ch).result(timeout=1)
                        return
                    except grpc.FutureTimeoutError:
                        pass
            time.sleep(0.05)
        raise RuntimeError(f"plugin did not start within {timeout_s}s:\n{self.logs()}")

    def logs(self) -> str:
        """Everything the plugin logged so far."""
        return self.log_path.read_text() if self.log_path.exists() else ""

    def stop(self, timeout_s: float = 15.0) -> int:
        """SIGTERM and wait; returns the exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout_s)

    def kill(self) -> None:
        """SIGKILL (crash)."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait(timeout=15)

    @contextlib.contextmanager
    def channel(self, pod_uid: str = "") -> Iterator[grpc.Channel]:
        """A channel to the DRA socket."""
        with grpc.insecure_channel(f"unix://{self.dirs.dra_socket(pod_uid)}") as ch:
            yield ch


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
