"""Benchmark: our allocator next to upstream's Go allocator, same workloads, same run.

Run: ``uv run python e2e/bench/bench_go_allocator.py [--quick]`` (or ``make bench
BENCH=allocator``). The Go side is ``dra-go-allocate`` (``dra_e2e.go_allocator``: the
``k8s.io/dynamic-resource-allocation`` structured allocator at the harness's Kubernetes
version, built from the Go module proxy into the cache on first use). Both get the same
objects and place the same claims one after the other, each on the first node (by name)
that fits, each placed claim holding its devices for the next; the placements must be
identical, then claims/s of each and the ratio are printed.

Workloads:

1. fill: 500 nodes x 10 GPUs, 5,000 single-GPU claims (``--quick``: 50 x 10, 500);
2. backtracking: 16 GPUs x 6 partitions with shared counters (room for 3 each but the
   last), one claim for 4 partitions with matchAttribute on the parent GPU;
3. partitionable MIG fleet: 20 nodes x 8 GPUs, each GPU a counter set of 7 memory
   slices with 1g/2g/3g/7g partitions (as with DynamicMIG), 600 claims for 1g or 3g.

The Go timing covers the allocation loop of ``dra-go-allocate`` (not process start-up or JSON
decoding); it re-gathers the allocated state from every claim before each allocation, which
the kube-scheduler keeps incrementally, so Go's fill rate here is a lower bound at large
claim counts. Ours covers ``Cluster.allocate`` + ``commit``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from dra_allocator.cel_engine import CelEngine
from dra_allocator.cluster import Cluster
from dra_allocator.model import parse_objects
from dra_e2e.go_allocator import ensure_go_allocator

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "packages" / "allocator" / "bench"))
from bench_allocator import DRIVER, claim, gpu_class, node_slice, partition_objects

Obj = dict[str, Any]


def mig_fleet(nodes: int, gpus: int, claims: int) -> tuple[list[Obj], list[str]]:
    """Nodes of partitionable GPUs: one counter set per GPU, MIG-like partitions."""
    objects: list[Obj] = [gpu_class()]
    profiles = {"1g": 1, "2g": 2, "3g": 3, "7g": 7}
    for n in range(nodes):
        node = f"node-{n:03d}"
        counters = []
        devices = []
        for g in range(gpus):
            counters.append({"name": f"gpu-{g}", "counters": {"slices": {"value": "7"}}})
            for profile, size in profiles.items():
                for k in range(7 // size):
                    devices.append(
                        {
                            "name": f"gpu-{g}-{profile}-{k}",
                            "attributes": {
                                "type": {"string": "gpu"},
                                "profile": {"string": profile},
                                "parentIndex": {"int": g},
                            },
                            "consumesCounters": [
                                {
                                    "counterSet": f"gpu-{g}",
                                    "counters": {"slices": {"value": str(size)}},
                                }
                            ],
                        }
                    )
        pool = {"name": node, "generation": 1, "resourceSliceCount": 2}
        objects.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-counters"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node,
                    "pool": pool,
                    "sharedCounters": counters,
                },
            }
        )
        objects.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-devices"},
                "spec": {"driver": DRIVER, "nodeName": node, "pool": pool, "devices": devices},
            }
        )
    keys = []
    for i in range(claims):
        profile = "1g" if i % 2 == 0 else "3g"
        body = claim(f"mig-{i:05d}")
        body["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
            {"cel": {"expression": f"device.attributes['{DRIVER}'].profile == '{profile}'"}}
        ]
        objects.append(body)
        keys.append(f"bench/mig-{i:05d}")
    return objects, keys


def fill(nodes: int, gpus: int, claims: int) -> tuple[list[Obj], list[str]]:
    """The fill workload of bench_allocator: node-local pools of whole GPUs."""
    objects: list[Obj] = [gpu_class()]
    objects += [node_slice(f"node-{i:04d}", gpus) for i in range(nodes)]
    objects += [claim(f"pod-{i:05d}") for i in range(claims)]
    return objects, [f"bench/pod-{i:05d}" for i in range(claims)]


def backtracking() -> tuple[list[Obj], list[str]]:
    """The backtracking workload of bench_allocator (16 GPUs x 6 partitions)."""
    return partition_objects(16, 6), ["bench/four-partitions"]


def ours(objects: list[Obj], keys: list[str]) -> tuple[float, list[str]]:
    """Place the claims one after the other with our allocator; seconds and nodes."""
    classes, slices, claims, _ = parse_objects(objects)
    by_key = {c.key: c for c in claims}
    cluster = Cluster(classes=classes, slices=slices, engine=CelEngine())
    placed = []
    start = time.perf_counter()
    for key in keys:
        pending = [by_key[key]]
        outcome = cluster.allocate(pending)
        if outcome.allocated is None:
            placed.append("")
            continue
        cluster.commit(pending, outcome.allocated)
        placed.append(outcome.allocated.node)
    return time.perf_counter() - start, placed


def go(binary: Path, objects: list[Obj], keys: list[str]) -> tuple[float, list[str]]:
    """The same with ``dra-go-allocate --sequence``; seconds as it measured them."""
    case = json.dumps({"id": "bench", "objects": objects, "claims": keys, "node": ""})
    proc = subprocess.run(
        [str(binary), "--sequence"], input=case, capture_output=True, text=True, check=True
    )
    out = json.loads(proc.stdout)
    return float(out["seconds"]), list(out["nodes"])


def compare(name: str, binary: Path, objects: list[Obj], keys: list[str]) -> None:
    """Run one workload through both and print claims/s, the ratio and the agreement."""
    go_s, go_nodes = go(binary, objects, keys)
    our_s, our_nodes = ours(objects, keys)
    same = sum(a == b for a, b in zip(our_nodes, go_nodes, strict=True))
    print(f"{name}: {len(keys)} claim(s)")
    print(
        f"  Go (upstream structured allocator): {len(keys) / go_s:10.1f} claims/s  ({go_s:.3f} s)"
    )
    print(
        f"  ours (dra_allocator):               {len(keys) / our_s:10.1f} claims/s  ({our_s:.3f} s)"
    )
    print(f"  ratio ours/Go: {go_s / our_s:6.2f}x   same placements: {same}/{len(keys)}")
    if same != len(keys):
        raise SystemExit(f"{name}: placements differ from upstream")


def main() -> None:
    """Build the Go side if needed, then run every workload through both."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller workloads (smoke run)")
    args = parser.parse_args()
    binary = ensure_go_allocator(progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    if args.quick:
        compare("fill 50 nodes x 10 GPUs", binary, *fill(50, 10, 500))
        compare("backtracking 16 GPUs x 6 partitions", binary, *backtracking())
        compare("partitionable MIG fleet 5 nodes x 8 GPUs", binary, *mig_fleet(5, 8, 150))
    else:
        compare("fill 500 nodes x 10 GPUs", binary, *fill(500, 10, 5000))
        compare("backtracking 16 GPUs x 6 partitions", binary, *backtracking())
        compare("partitionable MIG fleet 20 nodes x 8 GPUs", binary, *mig_fleet(20, 8, 600))


if __name__ == "__main__":
    main()
