"""Test support for the kubelet plugin's tests (imported by conftest and tests).

- :class:`ReferenceProtos`: an independent gRPC client built at test time by grpcio-tools
  directly from ``/work/shared/reference/*.proto`` (not from the plugin's own ``.proto``),
  loaded into a private descriptor pool so it can live next to the plugin's stubs.
- :func:`make_claim`: ResourceClaim JSON as the API server would return it.
- :class:`PluginProcess`: the real ``dra-kubelet-plugin`` program in a subprocess, with temp
  directories, the fake GPU backend and the directory claim source (the test double of the
  API server's claim endpoint).
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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
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


class FakeApiServer:
    """Test double of the kube-apiserver's endpoints the plugin uses, over real HTTP.

    Serves the ``resource.k8s.io`` discovery document, ``GET /api/v1/nodes/NAME``,
    ``GET .../resourceclaims/NAME``, the ResourceSlice
    collection (list with field selectors, watch, create with generateName, update with
    resourceVersion checks, delete) and ``POST .../events``. Standing in for the real API
    server until the e2e harness provides one.
    """

    def __init__(self) -> None:
        import http.server
        import threading

        self.nodes: dict[str, dict[str, Any]] = {}
        self.claims: dict[tuple[str, str], dict[str, Any]] = {}
        self.slices: dict[str, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.slice_events: list[dict[str, Any]] = []
        self.authorizations: set[str] = set()
        self.cond = threading.Condition()
        self._rv = 0
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> dict[str, Any]:
                length = int(self.headers.get("Content-Length") or 0)
                decoded: dict[str, Any] = json.loads(self.rfile.read(length) or b"{}")
                return decoded

            def do_GET(self) -> None:
                server.handle(self, "GET")

            def do_POST(self) -> None:
                server.handle(self, "POST")

            def do_PUT(self) -> None:
                server.handle(self, "PUT")

            def do_DELETE(self) -> None:
                server.handle(self, "DELETE")

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        """Base URL."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig pointing at this server."""
        import yaml

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "u", "user": {"token": "test-token"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
            "current-context": "fake",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def close(self) -> None:
        """Stop serving."""
        with self.cond:
            self.cond.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _slice_event(self, kind: str, obj: dict[str, Any]) -> None:
        self.slice_events.append({"type": kind, "object": obj})
        self.cond.notify_all()

    def delete_slice(self, name: str) -> None:
        """Delete a slice as the kubelet does when it wipes a node's slices."""
        with self.cond:
            obj = self.slices.pop(name)
            self._slice_event("DELETED", obj)

    def handle(self, h: Any, method: str) -> None:
        from urllib.parse import parse_qs, urlparse

        url = urlparse(h.path)
        parts = [p for p in url.path.split("/") if p]
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        slices = ["apis", "resource.k8s.io", "v1", "resourceslices"]
        send: Callable[[int, dict[str, Any]], None] = h._send
        with self.cond:
            self.authorizations.add(str(h.headers.get("Authorization")))
            if parts == ["apis", "resource.k8s.io"] and method == "GET":
                versions = [
                    {"groupVersion": f"resource.k8s.io/{v}", "version": v}
                    for v in ("v1", "v1beta2", "v1beta1")
                ]
                return send(200, {"kind": "APIGroup", "versions": versions})
            if parts[:3] == ["api", "v1", "nodes"] and method == "GET":
                node = self.nodes.get(parts[3])
                if node is None:
                    return send(404, {"message": "not found"})
                return send(200, node)
            if parts[:4] == ["apis", "resource.k8s.io", "v1", "namespaces"] and len(parts) == 7:
                claim = self.claims.get((parts[4], parts[6]))
                if claim is None:
                    return send(404, {"message": "not found"})
                return send(200, claim)
            if parts == ["api", "v1", "namespaces", "default", "events"] and method == "POST":
                self.events.append(h._body())
                return send(201, {})
            if parts == slices and method == "GET" and query.get("watch") == "true":
                return self._watch(h, float(query.get("timeoutSeconds", "5")))
            if parts == slices and method == "GET":
                return send(200, {"items": list(self.slices.values())})
            if parts == slices and method == "POST":
                obj = h._body()
                obj["metadata"]["name"] = obj["metadata"].pop("generateName") + self._next_rv()
                obj["metadata"]["resourceVersion"] = self._next_rv()
                self.slices[obj["metadata"]["name"]] = obj
                self._slice_event("ADDED", obj)
                return send(201, obj)
            if parts[:4] == slices and len(parts) == 5:
                name = parts[4]
                if name not in self.slices:
                    return send(404, {"message": "not found"})
                if method == "PUT":
                    obj = h._body()
                    current = self.slices[name]["metadata"]["resourceVersion"]
                    if obj["metadata"].get("resourceVersion") != current:
                        return send(409, {"message": "conflict"})
                    obj["metadata"]["resourceVersion"] = self._next_rv()
                    self.slices[name] = obj
                    self._slice_event("MODIFIED", obj)
                    return send(200, obj)
                if method == "DELETE":
                    obj = self.slices.pop(name)
                    self._slice_event("DELETED", obj)
                    return send(200, obj)
        return send(404, {"message": f"unhandled {method} {h.path}"})

    def _watch(self, h: Any, timeout_s: float) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.end_headers()
        seen = len(self.slice_events)
        deadline = time.monotonic() + min(timeout_s, 5.0)
        while time.monotonic() < deadline:
            self.cond.wait(timeout=0.2)
            new = self.slice_events[seen:]
            seen = len(self.slice_events)
            if new:
                self.cond.release()
                try:
                    for event in new:
                        h.wfile.write(json.dumps(event).encode() + b"\n")
                    h.wfile.flush()
                except OSError:
                    return
                finally:
                    self.cond.acquire()
