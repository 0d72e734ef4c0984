"""Benchmark: ``kubectl dra explain`` at the scale run's size, in process, with no cluster.

Run: ``make bench BENCH=explain`` (on demand; ``--nodes N --claims N --rounds N`` for other
sizes). The cluster is the 1,000-node run's (docs/scale.md), built from the code that made
it there:

- 1,000 Nodes (``dra_e2e.kwok.kwok_node``, labelled with their fleet kind);
- their ResourceSlices published by the GPU plugin's own publisher into the tests' in-memory
  API server (``dra_e2e.kwok_slices``: GB200, H100 and MIG-partitioned A100 nodes in turn,
  8 GPUs each; GB200 nodes also publish the compute-domain plugin's slice);
- the chart's DeviceClasses;
- 5,000 allocated claims, as the resourceclaim controller makes them from the workload's
  templates (``dra_e2e.scale_workload``: whole GPU, 1g MIG, time-sliced GPU) and the
  scheduler allocates them (one device each, spread over the nodes, reserved for a pod),
  with the ``managedFields`` the API server lists with them;
- one pending claim asking for more GPUs than a node has (the benchmark's
  ``explain-pending``), and one allocated claim, both explained.

Figures (median of ``--rounds``), each next to the baseline measured in the same run: the
time ``json.loads`` takes to decode the list bodies explain reads. This process runs with
the cyclic garbage collector off, as the console script does (``console_main``), and
collects between rounds, outside the timing: with it on, the first allocation after each
command paid for a full collection of everything built before (~0.9 s here), which the
console script never does.

1. ``from documents``: the decoded lists to the explanation (snapshot and explain), what
   explain adds to decoding;
2. ``through HTTP``: ``kubectl_dra.cli.main`` in this process against a local HTTP server
   that sends the lists' bytes as the in-memory API server wrote them (the client's
   transport, the lists, the decoding; the server only sends);
3. ``process``: the ``kubectl-dra`` console script against that server, imports included
   (from bytecode written first, as an installed package has it), and its start alone
   (``kubectl-dra --version``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dra_allocator.explain_report import parse_target
from dra_allocator.features import Features
from dra_allocator.snapshot import build_snapshot
from dra_api_types.driver_classes import driver_device_classes
from dra_e2e.kwok import kwok_node, node_name
from dra_e2e.kwok_slices import (
    FLEET_LABEL,
    fleet_of,
    plugin_settings,
    publish_channel_slices,
    publish_node_slices,
)
from dra_e2e.process import write_bytecode
from dra_e2e.scale_workload import TEMPLATES, ClaimKind, claim_template, pending_claim, replicas
from dra_kube_client.testing import MemoryApi, Reply, Request, ScriptedServer, write_kubeconfig
from kubectl_dra.cli import explain_target, main, without_cycle_collection
from kubectl_dra.live import fetch_with

Obj = dict[str, Any]
NS = "scale"
GPUS = 8
RESOURCE = "/apis/resource.k8s.io/v1"
SCRIPT = Path(sys.executable).with_name("kubectl-dra")


def publish_fleet(api: MemoryApi, nodes: int) -> None:
    """The Nodes and the slices their plugins publish (the kwok nodes of the scale run)."""
    for i in range(nodes):
        name, fleet = node_name(i), fleet_of(i)
        api.put_object(f"/api/v1/nodes/{name}", kwok_node(i, labels={FLEET_LABEL: fleet.name}))
        publish_node_slices(api, plugin_settings(name, fleet.spec(GPUS)))
        if fleet.channels:
            publish_channel_slices(api, name)
    for cls in driver_device_classes():
        api.put_object(f"{RESOURCE}/deviceclasses/{cls['metadata']['name']}", cls)


def _free_devices(api: MemoryApi) -> dict[str, list[tuple[str, str]]]:
    """(pool, device) of every GPU plugin device, by the device class that selects it."""
    free: dict[str, list[tuple[str, str]]] = {"gpu.nvidia.com": [], "mig.nvidia.com": []}
    for item in api.kind_items("resourceslices"):
        spec = item["spec"]
        if spec["driver"] != "gpu.nvidia.com":
            continue
        for dev in spec.get("devices") or []:
            attrs = dev.get("attributes") or {}
            kind = (attrs.get("type") or {}).get("string")
            profile = (attrs.get("profile") or {}).get("string")
            if kind == "gpu":
                free["gpu.nvidia.com"].append((spec["pool"]["name"], dev["name"]))
            elif kind == "mig" and profile == "1g.5gb":
                free["mig.nvidia.com"].append((spec["pool"]["name"], dev["name"]))
    # The scheduler spreads pods: one device per node in turn, not a node's all first (the
    # lists are popped from their end).
    for devices in free.values():
        devices.sort(key=lambda pd: (int(pd[1].split("-")[1]), pd[0]), reverse=True)
    return free


def managed_fields(pod_uid: str, *, config: bool) -> list[Obj]:
    """``metadata.managedFields`` of a claim made for a pod and allocated, as the API server
    lists them (the shape read from the 1,000-node run's cluster: ~700 bytes a claim)."""

    def entry(manager: str, fields: Obj, subresource: str | None = None) -> Obj:
        out: Obj = {
            "manager": manager,
            "operation": "Update",
            "apiVersion": "resource.k8s.io/v1",
            "time": "2026-12-04T12:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": fields,
        }
        if subresource:
            out["subresource"] = subresource
        return out

    devices: Obj = {"f:config": {}, "f:requests": {}} if config else {"f:requests": {}}
    made: Obj = {
        "f:metadata": {
            "f:annotations": {".": {}, "f:resource.kubernetes.io/pod-claim-name": {}},
            "f:generateName": {},
            "f:ownerReferences": {".": {}, f'k:{{"uid":"{pod_uid}"}}': {}},
        },
        "f:spec": {"f:devices": devices},
    }
    finalizer: Obj = {
        "f:metadata": {
            "f:finalizers": {".": {}, 'v:"resource.kubernetes.io/delete-protection"': {}}
        }
    }
    status: Obj = {
        "f:status": {
            "f:allocation": {
                ".": {},
                "f:allocationTimestamp": {},
                "f:devices": {".": {}, "f:results": {}},
                "f:nodeSelector": {},
            },
            "f:reservedFor": {},
        }
    }
    return [
        entry("kube-controller-manager", made),
        entry("kube-scheduler", finalizer),
        entry("kube-scheduler", status, "status"),
    ]


def allocated_claim(kind: ClaimKind, index: int, pool: str, device: str) -> Obj:
    """Claim ``index`` of ``kind`` as the resourceclaim controller makes it for its pod and
    the scheduler allocates it on ``pool``'s ``device``."""
    pod = f"{kind.name}-{index:05d}"
    spec = claim_template(kind, NS)["spec"]["spec"]
    devices: Obj = {
        "results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool, "device": device}]
    }
    if "config" in spec["devices"]:
        devices["config"] = [{"source": "FromClaim", **c} for c in spec["devices"]["config"]]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": f"{pod}-gpu-x{index:05d}",
            "generateName": f"{pod}-gpu-",
            "namespace": NS,
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
            "finalizers": ["resource.kubernetes.io/delete-protection"],
            "managedFields": managed_fields(f"pod-uid-{index}", config="config" in spec["devices"]),
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod,
                    "uid": f"pod-uid-{index}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
        "status": {
            "allocation": {
                "devices": devices,
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [pool]}
                            ]
                        }
                    ]
                },
                "allocationTimestamp": "2026-12-04T12:00:00Z",
            },
            "reservedFor": [{"resource": "pods", "name": pod, "uid": f"pod-uid-{index}"}],
        },
    }


def add_claims(api: MemoryApi, claims: int) -> str:
    """``claims`` allocated claims in the workload's shares, and the pending one; return the
    name of one allocated claim."""
    free = _free_devices(api)
    counts = replicas(claims, TEMPLATES)
    first = ""
    index = 0
    for kind in TEMPLATES:
        pool_devices = free[kind.device_class]
        for _ in range(counts[kind.name]):
            pool, device = pool_devices.pop()
            claim = allocated_claim(kind, index, pool, device)
            first = first or claim["metadata"]["name"]
            path = f"{RESOURCE}/namespaces/{NS}/resourceclaims/{claim['metadata']['name']}"
            api.put_object(path, claim)
            index += 1
    pending = pending_claim(NS, GPUS)
    api.put_object(f"{RESOURCE}/namespaces/{NS}/resourceclaims/explain-pending", pending)
    return first


def median_s(rounds: int, run: Callable[[], object]) -> float:
    """The median wall seconds of ``rounds`` calls of ``run``."""
    times = []
    for _ in range(rounds):
        gc.collect()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class Bodies:
    """The list bodies as the API server sent them (bytes), decoded afresh on each request:
    a transport without the network, so only decoding and explain are timed."""

    def __init__(self, api: MemoryApi) -> None:
        """Serialise every list explain reads, once."""
        self.raw: dict[str, bytes] = {}
        for path in (
            f"{RESOURCE}/deviceclasses",
            f"{RESOURCE}/resourceslices",
            f"{RESOURCE}/resourceclaims",
            f"{RESOURCE}/resourceclaimtemplates",
            f"{RESOURCE}/devicetaintrules",
            "/api/v1/nodes",
        ):
            self.raw[path] = json.dumps(api.request("GET", path)).encode()

    def request(self, method: str, path: str, **_: object) -> dict[str, Any]:
        """The list at ``path``, freshly decoded."""
        del method
        body: dict[str, Any] = json.loads(self.raw[path])
        return body

    def answer(self, request: Request) -> Reply:
        """The HTTP answer to a GET of a list: its bytes as they are (the server's cost is
        then only the sending, not the in-memory API server's copying and encoding)."""
        raw = self.raw.get(urlsplit(request.path).path)
        if raw is None:
            return Reply.status_error(404, f"{request.path} not found", reason="NotFound")
        return Reply(200, raw)

    def decode_all(self) -> None:
        """Decode every body (the baseline)."""
        for raw in self.raw.values():
            json.loads(raw)


def explain_from(bodies: Bodies, claim: str) -> str:
    """The explanation of ``claim`` from the lists (decoded, read, explained)."""
    target = parse_target(f"resourceclaim/{claim}", NS)
    with without_cycle_collection():  # as kubectl_dra.cli.main runs every command
        docs = fetch_with(bodies, namespace=NS, pod=None)  # type: ignore[arg-type]
        snapshot = build_snapshot(docs)
        return explain_target(snapshot, target, features=Features(), node=None).text


@contextlib.contextmanager
def quiet() -> Iterator[io.StringIO]:
    """stdout captured (the CLI's report)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        yield out


def cli_once(kubeconfig: Path, claim: str) -> None:
    """``kubectl dra explain`` in this process against the HTTP server."""
    argv = ["explain", f"resourceclaim/{claim}", "-n", NS, "--kubeconfig", str(kubeconfig)]
    with quiet():
        main(argv)


def process_once(argv: list[str]) -> None:
    """The console script, run once (its output discarded)."""
    subprocess.run([str(SCRIPT), *argv], capture_output=True, check=False)


def report(name: str, seconds: float, base: float, base_name: str) -> None:
    """One figure and its ratio to the baseline."""
    print(f"  {name:<44} {seconds * 1000:9.1f} ms   {seconds / base:7.1f}x {base_name}")


def main_bench(argv: list[str]) -> None:
    """Build the cluster, then time explain from documents, through HTTP and as a process."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--claims", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    gc.disable()
    start = time.perf_counter()
    api = MemoryApi()
    publish_fleet(api, args.nodes)
    allocated = add_claims(api, args.claims)
    bodies = Bodies(api)
    size = sum(len(b) for b in bodies.raw.values())
    slices = len(api.kind_items("resourceslices"))
    print(
        f"cluster: {args.nodes} nodes, {slices} ResourceSlices, {args.claims + 1} claims, "
        f"{size / 1e6:.1f} MB of JSON (built in {time.perf_counter() - start:.1f} s)"
    )
    decode = median_s(args.rounds, bodies.decode_all)
    base = "json.loads"
    print(f"  {'baseline: json.loads of the lists':<44} {decode * 1000:9.1f} ms")
    for label, claim in (("pending", "explain-pending"), ("allocated", allocated)):
        seconds = median_s(args.rounds, lambda c=claim: explain_from(bodies, c))  # type: ignore[misc]
        report(f"from documents, {label} claim", seconds, decode, base)
    write_bytecode("kubectl_dra.cli")  # the console script runs as installed
    with ScriptedServer(bodies.answer) as server, tempfile.TemporaryDirectory() as tmp:
        kubeconfig = write_kubeconfig(Path(tmp) / "kubeconfig", url=server.url)
        for label, claim in (("pending", "explain-pending"), ("allocated", allocated)):
            seconds = median_s(args.rounds, lambda c=claim: cli_once(kubeconfig, c))  # type: ignore[misc]
            report(f"through HTTP, in process, {label} claim", seconds, decode, base)
        argv_pending = ["explain", "resourceclaim/explain-pending", "-n", NS]
        seconds = median_s(
            args.rounds, lambda: process_once([*argv_pending, "--kubeconfig", str(kubeconfig)])
        )
        report("process, through HTTP, pending claim", seconds, decode, base)
    seconds = median_s(args.rounds, lambda: process_once(["--version"]))
    report("process start: kubectl-dra --version", seconds, decode, base)


if __name__ == "__main__":
    main_bench(sys.argv[1:])
