"""Benchmark: full enumeration of an 8-GPU node, time per ``gpus()`` call.

Run: ``uv run python packages/nvlib/bench/enumeration.py [--calls N]``

Baseline (named ``json-load``): reading and parsing the fake node's state file, the I/O floor
any enumeration of the fake pays. Each backend row prints its time per call and its ratio to
that baseline. The NVML rows run in child processes: over the mock libnvidia-ml.so built from
NVIDIA's go-nvml mock systems (dgxa100, 8 GPUs) when it can be built, otherwise the row says
why it is missing; and
over tests/nvml_stub (our C stand-in, 8 A100s), which measures the nvidia-ml-py/ctypes cost.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dra_nvlib import DeviceLibConfig, FakeDeviceLib, open_device_lib
from dra_nvlib.mock_nvml_build import MockNvmlBuildError, MockNvmlUnavailable, build_mock_nvml


def per_call(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call, best of three rounds."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def fake_node(state: Path, fleet: str) -> FakeDeviceLib:
    """An 8-GPU fake node."""
    lib = open_device_lib(
        DeviceLibConfig(backend="fake", node_name="bench", fake_fleet=fleet, fake_state_path=state)
    )
    assert isinstance(lib, FakeDeviceLib)
    return lib


_CHILD = """
import sys, time
from pathlib import Path
from dra_nvlib import DeviceLibConfig, open_device_lib
lib = open_device_lib(DeviceLibConfig(backend="nvml", nvml_library=Path(sys.argv[1])))
calls = int(sys.argv[2])
assert len(lib.gpus()) == 8, len(lib.gpus())
best = float("inf")
for _ in range(3):
    start = time.perf_counter()
    for _ in range(calls):
        lib.gpus()
    best = min(best, (time.perf_counter() - start) / calls)
print(best)
"""


def nvml_per_call(library: Path, env: dict[str, str], calls: int) -> tuple[float | None, str]:
    """Seconds per ``gpus()`` over ``library`` in a child process (NVML is per process)."""
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(library), str(calls)],
        capture_output=True,
        text=True,
        env={**env, "PATH": "/usr/bin:/bin"},
        check=False,
    )
    if proc.returncode != 0:
        return None, (proc.stderr.strip().splitlines() or ["child failed"])[-1]
    return float(proc.stdout.strip()), ""


def mock_nvml_per_call(calls: int) -> tuple[float | None, str]:
    """Seconds per call over the go-nvml mock (dgxa100), or None and the reason."""
    try:
        mock = build_mock_nvml()
    except (MockNvmlUnavailable, MockNvmlBuildError, OSError) as exc:
        return None, str(exc).splitlines()[0]
    seconds, error = nvml_per_call(mock.library, mock.env("dgxa100"), calls)
    return seconds, error or "go-nvml dgxa100"


def stub_nvml_per_call(calls: int, workdir: Path) -> tuple[float | None, str]:
    """Seconds per call over tests/nvml_stub with 8 GPUs, or None and the reason."""
    source = Path(__file__).resolve().parents[1] / "tests" / "nvml_stub" / "nvml_stub.c"
    library = workdir / "libnvidia-ml.so.1"
    built = subprocess.run(
        ["cc", "-shared", "-fPIC", "-O2", "-o", str(library), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        return None, f"cannot compile the stub: {built.stderr.strip()[:200]}"
    seconds, error = nvml_per_call(library, {"NVML_STUB_GPUS": "8"}, calls)
    return seconds, error or "nvidia-ml-py + ctypes cost, C stand-in"


def main() -> None:
    """Print one row per backend: time per call and ratio to the json-load baseline."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain = fake_node(Path(tmp) / "plain.json", "8xH100-80GB")
        carved = fake_node(Path(tmp) / "mig.json", "8xA100-40GB:mig")
        for gpu in carved.gpus():
            for start in range(7):
                carved.create_mig_device(gpu.uuid, profile_id=19, placement_start=start)
        state = Path(tmp) / "mig.json"
        baseline = per_call(lambda: json.loads(state.read_text()), args.calls)
        rows: list[tuple[str, float | None, str]] = [
            ("json-load (baseline)", baseline, "parse the 8xA100 + 56 MIG state file"),
            ("fake 8xH100-80GB", per_call(plain.gpus, args.calls), "no MIG devices"),
            ("fake 8xA100-40GB:mig", per_call(carved.gpus, args.calls), "56 MIG devices"),
        ]
        mock_time, note = mock_nvml_per_call(args.calls)
        rows.append(("nvml over mock 8xA100", mock_time, note))
        stub_time, note = stub_nvml_per_call(args.calls, Path(tmp))
        rows.append(("nvml over C stub 8xA100", stub_time, note))
    print(f"{'backend':<26} {'per call':>12} {'x baseline':>11}  note")
    for name, seconds, note in rows:
        if seconds is None:
            print(f"{name:<26} {'n/a':>12} {'n/a':>11}  unavailable: {note}")
        else:
            ratio = seconds / baseline
            print(f"{name:<26} {seconds * 1e3:>9.3f} ms {ratio:>10.1f}x  {note}")


if __name__ == "__main__":
    main()
