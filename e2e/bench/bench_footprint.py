"""Per-node footprint (issue #27 item 4): the two kubelet plugins' memory and start time on the
fake backend, next to a minimal Python gRPC server (the floor) started in the same run.

Run: ``make bench BENCH=footprint``.

Each process is started from nothing (a fresh interpreter, bytecode already written, as in the
image), the way the DaemonSet starts it:

- the GPU plugin (``python -m dra_kubelet_plugin``), 8 fake H100 GPUs;
- the compute-domain plugin (``dra_computedomain.plugin_cli``), 8 fake GB200 GPUs;
- the floor: ``grpc.aio`` server on a unix socket with one empty handler, nothing else.

Both plugins talk to the in-memory API server of the tests (``dra_kube_client.testing``) over
real HTTP with a JSON kubeconfig (read without YAML, as a pod reads its in-cluster
configuration), as in a cluster. Figures:

- start-to-registered: from spawn to the kubelet registration socket existing (the floor: its
  one socket existing); the kubelet dials it as soon as it appears;
- peak RSS idle: the kernel's high-water mark (``VmHWM``) after start plus 3 s of idling;
- peak RSS preparing 100 claims: ``VmHWM`` after 100 NodePrepareResources calls (one claim
  each, 16 in flight, as the kubelet sends one pod's claims) over the real DRA gRPC socket,
  then their unprepare. The GPU plugin's claims each take a GPU, the compute-domain plugin's
  the node's IMEX channel of a ComputeDomain whose daemon on the node is Ready (its clique
  object in the API server, as the controller and the daemon write it). The claims use admin
  access so 100 claims fit 8 GPUs and one channel (the work per claim is the same).
  The floor's figure is after 100 calls of its empty handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from dra_api_types import COMPUTE_DOMAIN_DRIVER
from dra_api_types.testing import (
    allocation,
    device_result,
    exactly,
    opaque_config,
    resource_claim,
)
from dra_computedomain.api_paths import node_path, object_path
from dra_computedomain.names import (
    COMPUTE_DOMAIN_LABEL,
    DEFAULT_CHANNEL_CLASS,
    clique_object_name,
)
from dra_e2e.footprint import FootprintRow, MemoryFigures, format_row, parse_proc_status
from dra_e2e.process import write_bytecode
from dra_e2e.scale_domains import compute_domain
from dra_kube_client.testing import HttpFront
from dra_kube_client.testing.http_front import serve_http
from dra_kube_client.testing.memory import MemoryApi
from dra_kubelet_core._proto import dra_v1_pb2 as pb

_PREPARE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"
_UNPREPARE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources"
GPUS = 8
CLAIMS = 100
IN_FLIGHT = 16
IDLE_S = 3.0
MB = 1_000_000
TARGETS = {"gpu plugin": 45 * MB, "cd plugin": 40 * MB}
REGISTERED_TARGET_S = 1.0
NODE = "n1"
#: the claims' namespace, and the ComputeDomain's
NAMESPACE = "bench"
#: the compute-domain plugin's ``--namespace`` (where the controller writes the cliques)
DRIVER_NAMESPACE = "dra-driver"

# The floor: the least a Python gRPC server on a unix socket costs (same interpreter, grpcio).
_FLOOR = """
import asyncio, sys, grpc, grpc.aio
async def main():
    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(lambda req, ctx: b"")
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(
            "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin", {"NodePrepareResources": handler}),))
    server.add_insecure_port("unix://" + sys.argv[1])
    await server.start()
    await server.wait_for_termination()
asyncio.run(main())
"""


def memory(pid: int) -> MemoryFigures:
    """The process's memory figures, from /proc."""
    return parse_proc_status(Path(f"/proc/{pid}/status").read_text())


class Process:
    """One process under measurement: spawned, waited for until ``ready`` exists."""

    def __init__(self, name: str, argv: Sequence[str], ready: Path, log: Path) -> None:
        self.name = name
        self.ready = ready
        self.log = log
        start = time.monotonic()
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=open(log, "wb"),  # noqa: SIM115 -- lives with the process
        )
        deadline = start + 60
        while not ready.exists():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"{name} did not start:\n{log.read_text()}")
            time.sleep(0.005)
        self.registered_s = time.monotonic() - start

    def stop(self) -> None:
        """SIGTERM, then wait."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def api_server() -> HttpFront:
    """The in-memory API server holding what the plugins read at start."""
    api = MemoryApi(watch_wait_s=5.0)
    versions = [
        {"groupVersion": f"resource.k8s.io/{v}", "version": v} for v in ("v1", "v1beta2", "v1beta1")
    ]
    api.documents["/apis/resource.k8s.io"] = {"kind": "APIGroup", "versions": versions}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "uid": "node-uid"}}
    api.put_object(node_path(NODE), node)
    return serve_http(api)


def plugin_args(root: Path, kubeconfig: Path, fleet: str) -> list[str]:
    """The flags both plugins share."""
    return [
        f"--node-name={NODE}",
        "--device-backend=fake",
        f"--fake-gpus={fleet}",
        f"--kubeconfig={kubeconfig}",
        f"--kubelet-registrar-directory-path={root / 'reg'}",
        f"--kubelet-plugins-directory-path={root / 'plugins'}",
        f"--cdi-root={root / 'cdi'}",
        f"--boot-id-file={root / 'boot_id'}",
        "--healthcheck-port=-1",
    ]


def gpu_claim(name: str, device: str) -> dict[str, Any]:
    """An allocated claim of one GPU (admin access: many claims may share a GPU)."""
    return resource_claim(
        name,
        namespace=NAMESPACE,
        uid=str(uuid.uuid4()),
        requests=[exactly("gpu", admin_access=True)],
        allocation=allocation([device_result(device, pool=NODE, admin_access=True)]),
    )


def channel_claim(name: str, domain_uid: str) -> dict[str, Any]:
    """An allocated claim of the node's IMEX channel in the ComputeDomain ``domain_uid``, as
    the domain's template asks for it (admin access: many claims may share the channel)."""
    parameters = {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomainChannelConfig",
        "domainID": domain_uid,
    }
    result = device_result(
        "channel-0", pool=NODE, request="channel", driver=COMPUTE_DOMAIN_DRIVER, admin_access=True
    )
    config = opaque_config(
        COMPUTE_DOMAIN_DRIVER, parameters, requests=["channel"], source="FromClaim"
    )
    return resource_claim(
        name,
        namespace=NAMESPACE,
        uid=str(uuid.uuid4()),
        requests=[exactly("channel", device_class=DEFAULT_CHANNEL_CLASS, admin_access=True)],
        allocation=allocation([result], config=[config]),
    )


def ready_domain(api: MemoryApi, clique_id: str) -> str:
    """A ComputeDomain in the claims' namespace whose daemon on the node is Ready (its clique
    object, as the controller and the daemon write it); its UID."""
    # The scale benchmark's domain body; a channel prepare reads neither its size nor its
    # template, only its UID and its clique object.
    body = compute_domain(0, NAMESPACE)
    domain = api.put_object(object_path("ComputeDomain", NAMESPACE, body["metadata"]["name"]), body)
    uid = str(domain["metadata"]["uid"])
    name = clique_object_name(uid, clique_id)
    daemon = {
        "nodeName": NODE,
        "ipAddress": "10.0.0.1",
        "cliqueID": clique_id,
        "index": 0,
        "status": "Ready",
    }
    api.put_object(
        object_path("ComputeDomainClique", DRIVER_NAMESPACE, name),
        {
            "apiVersion": "resource.nvidia.com/v1beta1",
            "kind": "ComputeDomainClique",
            "metadata": {
                "name": name,
                "namespace": DRIVER_NAMESPACE,
                "labels": {COMPUTE_DOMAIN_LABEL: uid},
            },
            "daemons": [daemon],
        },
    )
    return uid


def logged_clique_id(log: Path) -> str:
    """The clique ID the compute-domain plugin found for its node (its ``clique_id`` log
    event)."""
    for line in log.read_text().splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict) and event.get("event") == "clique_id":
                return str(event["clique_id"])
    raise RuntimeError(f"no clique_id event in {log}")


def put_claims(api: MemoryApi, bodies: list[dict[str, Any]]) -> list[pb.Claim]:
    """Store ``bodies`` (allocated claims) in the API server; their kubelet references."""
    claims = []
    for body in bodies:
        meta = body["metadata"]
        path = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims/{meta['name']}"
        api.put_object(path, body)
        claims.append(pb.Claim(namespace=NAMESPACE, name=meta["name"], uid=meta["uid"]))
    return claims


async def prepare_many(socket: Path, claims: list[pb.Claim], *, unprepare: bool) -> None:
    """NodePrepareResources for each claim (``IN_FLIGHT`` at a time), then unprepare them."""
    async with grpc.aio.insecure_channel(f"unix://{socket}") as channel:
        prepare = channel.unary_unary(
            _PREPARE,
            request_serializer=pb.NodePrepareResourcesRequest.SerializeToString,
            response_deserializer=pb.NodePrepareResourcesResponse.FromString,
        )
        gate = asyncio.Semaphore(IN_FLIGHT)

        async def one(c: pb.Claim) -> None:
            async with gate:
                response = await prepare(pb.NodePrepareResourcesRequest(claims=[c]), timeout=60)
            for uid, entry in response.claims.items():
                if entry.error:
                    raise RuntimeError(f"claim {uid}: {entry.error}")

        await asyncio.gather(*(one(c) for c in claims))
        if unprepare:
            done = channel.unary_unary(
                _UNPREPARE,
                request_serializer=pb.NodeUnprepareResourcesRequest.SerializeToString,
                response_deserializer=pb.NodeUnprepareResourcesResponse.FromString,
            )
            await done(pb.NodeUnprepareResourcesRequest(claims=claims), timeout=60)


def run(root: Path) -> list[FootprintRow]:
    """Start the three processes one after another and measure them."""
    (root / "boot_id").write_text("bench\n")
    server = api_server()
    kubeconfig = server.write_kubeconfig(root / "kubeconfig")
    rows: list[FootprintRow] = []
    try:
        floor_sock = root / "floor.sock"
        floor = Process(
            "floor", [sys.executable, "-c", _FLOOR, str(floor_sock)], floor_sock, root / "f.log"
        )
        try:
            time.sleep(IDLE_S)
            floor_idle = memory(floor.proc.pid).peak_rss
            asyncio.run(prepare_many(floor_sock, [pb.Claim()] * CLAIMS, unprepare=False))
            floor_busy = memory(floor.proc.pid).peak_rss
        finally:
            floor.stop()

        gpu_root = root / "gpu"
        gpu_root.mkdir()
        gpu = Process(
            "gpu plugin",
            [
                sys.executable,
                "-m",
                "dra_kubelet_plugin",
                *plugin_args(gpu_root, kubeconfig, f"{GPUS}xH100-80GB"),
            ],
            gpu_root / "reg" / "gpu.nvidia.com-reg.sock",
            root / "gpu.log",
        )
        try:
            time.sleep(IDLE_S)
            gpu_idle = memory(gpu.proc.pid).peak_rss
            bodies = [gpu_claim(f"c-{i}", f"gpu-{i % GPUS}") for i in range(CLAIMS)]
            claims = put_claims(server.api, bodies)
            socket = gpu_root / "plugins" / "gpu.nvidia.com" / "dra.sock"
            asyncio.run(prepare_many(socket, claims, unprepare=True))
            gpu_busy = memory(gpu.proc.pid).peak_rss
        finally:
            gpu.stop()

        cd_root = root / "cd"
        cd_root.mkdir()
        cd_main = "import sys; from dra_computedomain.plugin_cli import main; sys.exit(main())"
        cd = Process(
            "cd plugin",
            [
                sys.executable,
                "-c",
                cd_main,
                *plugin_args(cd_root, kubeconfig, f"{GPUS}xGB200"),
                f"--namespace={DRIVER_NAMESPACE}",
            ],
            cd_root / "reg" / "compute-domain.nvidia.com-reg.sock",
            root / "cd.log",
        )
        try:
            time.sleep(IDLE_S)
            cd_idle = memory(cd.proc.pid).peak_rss
            domain_uid = ready_domain(server.api, logged_clique_id(root / "cd.log"))
            bodies = [channel_claim(f"ch-{i}", domain_uid) for i in range(CLAIMS)]
            claims = put_claims(server.api, bodies)
            socket = cd_root / "plugins" / COMPUTE_DOMAIN_DRIVER / "dra.sock"
            asyncio.run(prepare_many(socket, claims, unprepare=True))
            cd_busy = memory(cd.proc.pid).peak_rss
        finally:
            cd.stop()
    finally:
        server.close()

    for name, proc, idle, busy in (
        ("gpu plugin", gpu, gpu_idle, gpu_busy),
        ("cd plugin", cd, cd_idle, cd_busy),
    ):
        rows += [
            FootprintRow(
                name,
                "start-to-registered",
                proc.registered_s,
                REGISTERED_TARGET_S,
                floor.registered_s,
                "s",
            ),
            FootprintRow(name, "peak RSS idle", idle, TARGETS[name], floor_idle, "MB"),
            FootprintRow(name, f"peak RSS {CLAIMS} prepares", busy, None, floor_busy, "MB"),
        ]
    rows += [
        FootprintRow("floor", "start-to-registered", floor.registered_s, None, None, "s"),
        FootprintRow("floor", "peak RSS idle", floor_idle, None, None, "MB"),
        FootprintRow("floor", f"peak RSS {CLAIMS} calls", floor_busy, None, None, "MB"),
    ]
    return rows


def main() -> None:
    """Run once and print the report."""
    print(
        f"per-node footprint: {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )
    # Bytecode first, as the image ships it: a process compiling its modules at start would
    # be measured with the compiler's memory and time (pynvml alone: +12 MB).
    write_bytecode("dra_kubelet_plugin.cli", "dra_computedomain.plugin_cli", "pynvml")
    root = Path(tempfile.mkdtemp(prefix="footprint-", dir="/tmp"))
    try:
        for row in run(root):
            print(format_row(row))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
