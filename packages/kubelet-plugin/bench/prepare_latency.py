"""Benchmark: NodePrepareResources latency (p50/p99) of the real plugin process.

Run: ``uv run python packages/kubelet-plugin/bench/prepare_latency.py [--rounds N]``

Cases: claims of 1 and 8 GPUs, sent 1 at a time and 16 at once (each request carries one
claim, as the kubelet sends one pod's claims). Every prepare reads the claim (directory claim
source), writes the checkpoint twice with fsync and the claim's CDI spec; claims are
unprepared between rounds (not timed). With 16 concurrent 8-GPU claims the fake node has
too few GPUs for disjoint allocations, so those claims use admin access (exempt from the
double-preparation guard), which does the same work.

Baseline (named ``grpc-empty``): an empty NodePrepareResources over the same unix socket,
the transport floor every call pays. Each row prints p50/p99 and the p50 ratio to it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
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
from dra_kubelet_core._proto import dra_v1_pb2 as pb

_PREPARE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"
_UNPREPARE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources"
GPUS = 64


def claim_json(name: str, devices: list[str], *, admin: bool) -> dict[str, Any]:
    """A ResourceClaim allocated to ``devices`` on node ``n1``."""
    results = [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": d}
        | ({"adminAccess": True} if admin else {})
        for d in devices
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "bench", "uid": str(uuid.uuid4())},
        "spec": {"devices": {"requests": []}},
        "status": {"allocation": {"devices": {"results": results}}},
    }


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Plugin:
    """The plugin program with the fake backend in a temp directory."""

    def __init__(
        self, root: Path, *, fleet: str = f"{GPUS}xH100-80GB", extra_args: Sequence[str] = ()
    ) -> None:
        self.root = root
        self.claims = root / "claims"
        self.claims.mkdir()
        self.socket = root / "plugins" / "gpu.nvidia.com" / "dra.sock"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dra_kubelet_plugin",
                "--node-name=n1",
                "--device-backend=fake",
                f"--fake-gpus={fleet}",
                f"--kubelet-registrar-directory-path={root / 'reg'}",
                f"--kubelet-plugins-directory-path={root / 'plugins'}",
                f"--cdi-root={root / 'cdi'}",
                f"--claims-directory={self.claims}",
                f"--boot-id-file={root / 'boot_id'}",
                *extra_args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(root / "plugin.log", "wb"),  # noqa: SIM115 -- lives with the process
        )
        deadline = time.monotonic() + 60
        while not (root / "reg" / "gpu.nvidia.com-reg.sock").exists():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError((root / "plugin.log").read_text())
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the plugin with SIGTERM and wait until it exited."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)

    def add(self, claim: dict[str, Any]) -> pb.Claim:
        """Write ``claim`` into the claims directory; its reference for a request."""
        meta = claim["metadata"]
        path = self.claims / meta["namespace"] / f"{meta['name']}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(claim))
        return pb.Claim(namespace=meta["namespace"], name=meta["name"], uid=meta["uid"])


async def timed(call: Any, request: Any) -> float:
    """Seconds one call of ``request`` took; raises if a claim in the response failed."""
    start = time.perf_counter()
    response = await call(request, timeout=60)
    elapsed = time.perf_counter() - start
    for uid, entry in response.claims.items():
        if entry.error:
            raise RuntimeError(f"claim {uid}: {entry.error}")
    return elapsed


async def run_case(
    plugin: Plugin, channel: grpc.aio.Channel, *, gpus: int, concurrent: int, rounds: int
) -> list[float]:
    """Prepare latencies of ``rounds`` rounds of ``concurrent`` claims of ``gpus`` GPUs each,
    unpreparing them after each round."""
    prepare = channel.unary_unary(
        _PREPARE,
        request_serializer=pb.NodePrepareResourcesRequest.SerializeToString,
        response_deserializer=pb.NodePrepareResourcesResponse.FromString,
    )
    unprepare = channel.unary_unary(
        _UNPREPARE,
        request_serializer=pb.NodeUnprepareResourcesRequest.SerializeToString,
        response_deserializer=pb.NodeUnprepareResourcesResponse.FromString,
    )
    admin = gpus * concurrent > GPUS
    samples: list[float] = []
    for r in range(rounds):
        claims = [
            plugin.add(
                claim_json(
                    f"c-{gpus}-{concurrent}-{r}-{i}",
                    [f"gpu-{(i * gpus + k) % GPUS}" for k in range(gpus)],
                    admin=admin,
                )
            )
            for i in range(concurrent)
        ]
        samples += await asyncio.gather(
            *(timed(prepare, pb.NodePrepareResourcesRequest(claims=[c])) for c in claims)
        )
        await unprepare(pb.NodeUnprepareResourcesRequest(claims=claims), timeout=60)
    return samples


async def bench(rounds: int) -> None:
    """Start a plugin, measure the grpc-empty baseline, then print every case's row."""
    root = Path(tempfile.mkdtemp(prefix="kp-bench-", dir="/tmp"))
    (root / "boot_id").write_text("bench\n")
    plugin = Plugin(root)
    try:
        async with grpc.aio.insecure_channel(f"unix://{plugin.socket}") as channel:
            empty = channel.unary_unary(
                _PREPARE,
                request_serializer=pb.NodePrepareResourcesRequest.SerializeToString,
                response_deserializer=pb.NodePrepareResourcesResponse.FromString,
            )
            for _ in range(20):  # warm up the channel and the plugin
                await timed(empty, pb.NodePrepareResourcesRequest())
            floor = [await timed(empty, pb.NodePrepareResourcesRequest()) for _ in range(200)]
            base = statistics.median(floor)
            print(
                f"baseline grpc-empty: p50 {base * 1e3:7.3f} ms  p99 "
                f"{percentile(floor, 0.99) * 1e3:7.3f} ms"
            )
            print(f"{'case':<28}{'n':>6}{'p50 ms':>10}{'p99 ms':>10}{'p50/grpc-empty':>16}")
            for gpus in (1, 8):
                for concurrent in (1, 16):
                    n_rounds = rounds if concurrent == 1 else max(1, rounds // 4)
                    samples = await run_case(
                        plugin, channel, gpus=gpus, concurrent=concurrent, rounds=n_rounds
                    )
                    p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
                    label = f"{gpus} GPU x {concurrent} concurrent"
                    print(
                        f"{label:<28}{len(samples):>6}{p50 * 1e3:>10.2f}{p99 * 1e3:>10.2f}"
                        f"{p50 / base:>15.1f}x"
                    )
    finally:
        plugin.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    """Parse arguments and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100, help="rounds of the 1-claim cases")
    args = parser.parse_args()
    print(f"dra-kubelet-plugin NodePrepareResources latency (pid {os.getpid()})")
    asyncio.run(bench(args.rounds))


if __name__ == "__main__":
    main()
