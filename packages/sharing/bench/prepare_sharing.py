"""Benchmark: NodePrepareResources latency of shared claims next to a plain GPU claim.

Run: ``uv run python packages/sharing/bench/prepare_sharing.py [--rounds N]``

The real plugin process on the fake backend (the same harness as the kubelet plugin's
``prepare_latency`` benchmark), one claim per request, unprepared between rounds (not timed):

- plugin with ``TimeSlicingSettings`` and ``MPSSupport`` on (8 H100s): a plain GPU claim
  (baseline ``plain``), a time-sliced claim (compute mode + time-slice on the fake GPU), an
  MPS claim (compute mode + a control daemon started and ready);
- plugin with ``DynamicMIG`` on (8 A100s; the gate excludes MPS): a plain GPU claim
  (baseline ``plain``) and a 1g.5gb claim (MIG mode, GPU and compute instance created).

Each row prints p50/p99 and the p50 ratio to the ``plain`` claim of the same plugin.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import grpc.aio
from dra_kubelet_core._proto import dra_v1_pb2 as pb

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "kubelet-plugin" / "bench"))
from prepare_latency import (  # the shared harness, found by path
    _PREPARE,
    _UNPREPARE,
    Plugin,
    claim_json,
    percentile,
    timed,
)

API = "resource.nvidia.com/v1beta1"
TIME_SLICED = {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Medium"}}
MPS = {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50}}


def shared_claim(name: str, device: str, sharing: dict[str, Any] | None) -> dict[str, Any]:
    """A claim of one device, with a GpuConfig asking for ``sharing`` (none: plain)."""
    claim = claim_json(name, [device], admin=False)
    if sharing is not None:
        claim["status"]["allocation"]["devices"]["config"] = [
            {
                "source": "FromClaim",
                "requests": ["gpu"],
                "opaque": {
                    "driver": "gpu.nvidia.com",
                    "parameters": {"apiVersion": API, "kind": "GpuConfig", "sharing": sharing},
                },
            }
        ]
    return claim


async def measure(
    plugin: Plugin, label: str, device: str, sharing: dict[str, Any] | None, rounds: int
) -> list[float]:
    """Prepare latencies of ``rounds`` claims of ``device``."""
    async with grpc.aio.insecure_channel(f"unix://{plugin.socket}") as channel:
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
        samples = []
        for r in range(rounds + 3):
            ref = plugin.add(shared_claim(f"{label}-{r}", device, sharing))
            elapsed = await timed(prepare, pb.NodePrepareResourcesRequest(claims=[ref]))
            response = await unprepare(pb.NodeUnprepareResourcesRequest(claims=[ref]), timeout=60)
            for uid, entry in response.claims.items():
                if entry.error:
                    raise RuntimeError(f"unprepare {uid}: {entry.error}")
            if r >= 3:  # the first rounds warm up the channel and the plugin
                samples.append(elapsed)
        return samples


def report(label: str, samples: list[float], base: float) -> None:
    """One row: p50, p99 and the ratio to the plain claim."""
    p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
    print(f"{label:<34}{len(samples):>6}{p50 * 1e3:>10.2f}{p99 * 1e3:>10.2f}{p50 / base:>12.2f}x")


async def run_plugin(
    fleet: str, gates: str, cases: list[tuple[str, str, dict[str, Any] | None]], rounds: int
) -> None:
    """Start a plugin with ``gates``, measure ``cases`` (the first is the plain baseline)."""
    root = Path(tempfile.mkdtemp(prefix="sharing-bench-", dir="/tmp"))
    (root / "boot_id").write_text("bench\n")
    plugin = Plugin(root, fleet=fleet, extra_args=[f"--feature-gates={gates}"])
    try:
        results = [
            (label, await measure(plugin, label.split()[0], device, sharing, rounds))
            for label, device, sharing in cases
        ]
        base = percentile(results[0][1], 0.5)
        print(f"\nplugin {fleet} --feature-gates={gates}")
        print(f"{'case':<34}{'n':>6}{'p50 ms':>10}{'p99 ms':>10}{'p50/plain':>13}")
        for label, samples in results:
            report(label, samples, base)
    finally:
        plugin.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    """Parse arguments and run both plugins' cases."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40, help="claims per case")
    args = parser.parse_args()
    print("dra-sharing: NodePrepareResources latency of shared claims vs a plain GPU claim")
    asyncio.run(
        run_plugin(
            "8xH100-80GB",
            "TimeSlicingSettings=true,MPSSupport=true",
            [
                ("plain (baseline)", "gpu-0", None),
                ("time-sliced (Medium)", "gpu-1", TIME_SLICED),
                ("mps (daemon per claim)", "gpu-2", MPS),
            ],
            args.rounds,
        )
    )
    asyncio.run(
        run_plugin(
            "8xA100-40GB",
            "DynamicMIG=true",
            [
                ("plain (baseline)", "gpu-0", None),
                ("dynamic-mig 1g.5gb", "gpu-1-mig-1g5gb-19-0", None),
            ],
            args.rounds,
        )
    )


if __name__ == "__main__":
    main()
