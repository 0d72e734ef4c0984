"""Benchmark: claim change -> updated metrics, and resident memory, of the allocation controller.

Run: ``uv run python packages/controller/bench/bench_allocation_controller.py [--quick]``

A fake API server (in memory, answering lists and watch events as JSON text, so that both
sides pay for decoding what they read) holds 500 nodes with one slice of 10 GPUs each and
5,000 claims, half of them allocated. Each measured change modifies one claim (allocating
or releasing it) and ends when the seed's metrics are recomputed from the new state:

* ours: the informer applies the one watch event to its cache, and the controller's
  reconcile (``AllocationController.reconcile``) re-reads only the changed claim
  (``ClusterView``) and recomputes only what depends on it (per-claim series, per-node
  counts);
* baseline, the informer-less full re-list: every collection listed again, every object
  parsed again (``build_snapshot``), then the same series computed.

Resident memory (VmHWM, the peak) is measured in a fresh process per side, after the
first full state and the measured changes; ``--claims 10000 --nodes 1000`` shows the
bound the issue asks for (10,000 claims and 1,000 slices).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dra_allocator.cel_engine import CelEngine
from dra_allocator.features import Features
from dra_allocator.inputs import Document
from dra_allocator.snapshot import Snapshot, build_snapshot
from dra_controller.allocation_controller import AllocationController, ControllerMetrics
from dra_controller.allocation_controller.availability import free_devices
from dra_controller.allocation_controller.caches import CONTROLLER_RESOURCES
from dra_controller.allocation_controller.claim_series import claim_series
from dra_controller.allocation_controller.diagnosis import make_cluster
from dra_kube_client.informers import Informer
from dra_kube_client.informers.resources import ALL_RESOURCES

DRIVER = "gpu.nvidia.com"
GPU_CLASS = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'"
PATHS = {r.kind: r.path for r in ALL_RESOURCES}


def _objects(nodes: int, gpus: int, claims: int) -> dict[str, list[dict[str, Any]]]:
    classes = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DRIVER, "resourceVersion": "1"},
            "spec": {"selectors": [{"cel": {"expression": GPU_CLASS}}]},
        }
    ]
    slices, node_objs = [], []
    for n in range(nodes):
        name = f"node-{n:04d}"
        node_objs.append(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "resourceVersion": "1"}}
        )
        devices = [
            {
                "name": f"gpu-{i}",
                "attributes": {
                    "type": {"string": "gpu"},
                    "productName": {"string": "NVIDIA A100-SXM4-40GB"},
                    "uuid": {"string": f"GPU-{n:04d}-{i}"},
                },
                "capacity": {"memory": {"value": "40Gi"}},
            }
            for i in range(gpus)
        ]
        slices.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-{DRIVER}", "resourceVersion": "1"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            }
        )
    claim_objs = [_claim(i, nodes, gpus, allocated=i % 2 == 0, rv=1) for i in range(claims)]
    return {
        "DeviceClass": classes,
        "ResourceSlice": slices,
        "Node": node_objs,
        "ResourceClaim": claim_objs,
        "Pod": [],
        "DeviceTaintRule": [],
    }


def _claim(i: int, nodes: int, gpus: int, *, allocated: bool, rv: int) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": f"claim-{i}",
            "namespace": "team",
            "uid": f"uid-{i}",
            "resourceVersion": str(rv),
        },
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}
        },
    }
    if allocated:
        node = f"node-{(i // gpus) % nodes:04d}"
        obj["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": DRIVER,
                            "pool": node,
                            "device": f"gpu-{i % gpus}",
                        }
                    ]
                }
            }
        }
    return obj


class FakeApi:
    """Lists and watch events as JSON text decoded per request (as over the wire)."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.lists = {
            PATHS[k]: json.dumps({"items": v, "metadata": {"resourceVersion": "1"}})
            for k, v in objects.items()
        }
        self.events: list[str] = []

    def request(
        self, method: str, path: str, *, query: Mapping[str, str] | None = None, **_: Any
    ) -> dict[str, Any]:
        """A list answer (every list is one page; ``method`` is always GET here)."""
        del method, query
        body: dict[str, Any] = json.loads(self.lists[path])
        return body

    def watch_lines(
        self, path: str, *, query: Mapping[str, str], timeout_s: float
    ) -> Iterator[dict[str, Any]]:
        """The recorded events, then the end of the stream (one collection changes here)."""
        del path, query, timeout_s
        while self.events:
            yield json.loads(self.events.pop(0))

    def change(self, claims: list[dict[str, Any]], obj: dict[str, Any]) -> None:
        """Record a claim change in the list (for re-listing) and as a watch event."""
        index = int(obj["metadata"]["name"].split("-")[1])
        claims[index] = obj
        self.lists[PATHS["ResourceClaim"]] = json.dumps(
            {"items": claims, "metadata": {"resourceVersion": "2"}}
        )
        self.events.append(json.dumps({"type": "MODIFIED", "object": obj}))


def _series(snap: Snapshot, engine: CelEngine) -> int:
    cluster = make_cluster(snap, engine=engine, features=Features())
    allocated, pending = claim_series(snap.claims)
    free = free_devices(cluster)
    return len(allocated) + len(pending) + sum(free.values())


def run_side(side: str, nodes: int, gpus: int, claims: int, changes: int) -> dict[str, Any]:
    """One side in this process: first state, then ``changes`` measured claim changes."""
    objects = _objects(nodes, gpus, claims)
    claim_list = list(objects["ResourceClaim"])
    api = FakeApi(objects)
    engine = CelEngine()
    started = time.perf_counter()
    if side == "informers":
        informers = {r.kind: Informer(api, r) for r in CONTROLLER_RESOURCES}
        for informer in informers.values():
            informer.list_once()
        controller = AllocationController(
            {k: i.store for k, i in informers.items()}, metrics=ControllerMetrics(), engine=engine
        )
        controller.reconcile()
    else:
        _series(_relist(api), engine)
    first_s = time.perf_counter() - started
    latencies = []
    for n in range(changes):
        i = (n * 7919) % claims
        obj = _claim(i, nodes, gpus, allocated=i % 2 == 1, rv=10 + n)
        api.change(claim_list, obj)
        t0 = time.perf_counter()
        if side == "informers":
            informers["ResourceClaim"].watch_once("1")
            series, _ = controller.reconcile()
            total = len(series.allocated) + len(series.pending) + sum(series.available.values())
        else:
            total = _series(_relist(api), engine)
        latencies.append(time.perf_counter() - t0)
        assert total > 0
    return {
        "first_s": first_s,
        "p50_s": statistics.median(latencies),
        "max_s": max(latencies),
        "hwm_mib": _vm("VmHWM"),
        "rss_mib": _vm("VmRSS"),
    }


def _relist(api: FakeApi) -> Snapshot:
    docs = []
    for kind, path in PATHS.items():
        for i, item in enumerate(api.request("GET", path)["items"]):
            item.setdefault("kind", kind)
            docs.append(Document(source=path, index=i, data=item))
    return build_snapshot(docs)


def _vm(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    """Parse arguments; run each side in a fresh process and print both with their ratios
    (with ``--side``, run that one side here and print its figures as JSON)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="50 nodes, 500 claims, 5 changes")
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--gpus", type=int, default=10)
    parser.add_argument("--claims", type=int, default=5000)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--side", choices=["informers", "relist"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.claims, args.changes = 50, 500, 5
    if args.side:
        print(json.dumps(run_side(args.side, args.nodes, args.gpus, args.claims, args.changes)))
        return 0
    print(
        f"claim change -> updated metrics: {args.nodes} nodes x {args.gpus} GPUs, "
        f"{args.claims} claims, {args.changes} changes"
    )
    results = {}
    for side in ("informers", "relist"):
        cmd = [
            sys.executable,
            __file__,
            "--side",
            side,
            "--nodes",
            str(args.nodes),
            "--gpus",
            str(args.gpus),
            "--claims",
            str(args.claims),
            "--changes",
            str(args.changes),
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        results[side] = json.loads(out.strip().splitlines()[-1])
    labels = {"informers": "ours (informers, incremental)", "relist": "baseline full re-list"}
    for side, r in results.items():
        print(
            f"  {labels[side]:32s} p50 {r['p50_s'] * 1000:9.1f} ms   "
            f"max {r['max_s'] * 1000:9.1f} ms   first state {r['first_s']:6.2f} s   "
            f"peak RSS {r['hwm_mib']:7.1f} MiB"
        )
    ours, base = results["informers"], results["relist"]
    print(
        f"  ratio latency baseline/ours: {base['p50_s'] / ours['p50_s']:6.1f}x   "
        f"peak memory ours/baseline: {ours['hwm_mib'] / base['hwm_mib']:5.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
