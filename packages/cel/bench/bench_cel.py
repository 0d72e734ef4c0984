"""Benchmark: DRA CEL selector evaluation per device.

Run: ``uv run python packages/cel/bench/bench_cel.py [--quick]``

Times each selector over a realistic NVIDIA device set (full GPUs and MIG devices as
the gpu.nvidia.com driver publishes them) with:

* ours: ``dra_cel`` (closures compiled from cel-python's parse tree);
* cel-python's interpreter (``celpy.InterpretedRunner``);
* cel-python's compiled runner (``celpy.CompiledRunner``), the named baseline;
* ``common-expression-language`` (import name ``cel``, Rust ``cel-interpreter``).

cel-python gets small extension functions (``quantity``, ``semver``, ``compareTo``,
``isGreaterThan``, ``major``, ``lowerAscii``) over the same Quantity/Version classes so
that every selector has a baseline; the Rust engine gets ``lowerAscii`` only and prints
``n/a`` where a selector needs the Kubernetes quantity/semver libraries. Times are CPU
time per device; "Nx ours" means that engine takes N times as long as ours.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

import cel as rust_cel
import celpy
import celpy.celparser
import celpy.evaluation
from celpy import celtypes
from dra_api_types import Quantity, Version
from dra_cel import CelDevice, compile_selector

GPU_CLASS = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"

SELECTORS: list[tuple[str, str]] = [
    ("gpu.nvidia.com DeviceClass", GPU_CLASS),
    (
        "MIG 1g.12gb DeviceClass",
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
        " && device.attributes['gpu.nvidia.com'].profile == '1g.12gb'",
    ),
    (
        "memory compareTo quantity",
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    ),
    (
        "driverVersion semver",
        "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))"
        " && device.attributes['gpu.nvidia.com'].driverVersion.major() < 600",
    ),
    (
        "productName matches (demo gpu-test6)",
        "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$')"
        " && (device.attributes['gpu.nvidia.com'].index == 0"
        " || device.attributes['gpu.nvidia.com'].index == 2"
        " || device.attributes['gpu.nvidia.com'].index == 4"
        " || device.attributes['gpu.nvidia.com'].index == 6)",
    ),
    (
        "productName matches (portable)",
        "device.attributes['gpu.nvidia.com'].productName.matches('A100')",
    ),
]


def make_devices() -> list[CelDevice]:
    """8 full GPUs and 7 MIG 1g.5gb/1g.12gb devices on each of the first 4."""
    devices: list[CelDevice] = []
    for index in range(8):
        product = "NVIDIA A100-SXM4-40GB" if index < 6 else "NVIDIA H100 80GB HBM3"
        common: dict[str, Any] = {
            "gpu.nvidia.com/productName": product,
            "gpu.nvidia.com/brand": "Nvidia",
            "gpu.nvidia.com/architecture": "Ampere" if index < 6 else "Hopper",
            "gpu.nvidia.com/cudaComputeCapability": Version.parse("8.0.0"),
            "gpu.nvidia.com/driverVersion": Version.parse("550.54.15"),
            "gpu.nvidia.com/cudaDriverVersion": Version.parse("12.4.0"),
            "resource.kubernetes.io/pcieRoot": f"pci0000:{index:02x}",
        }
        devices.append(
            CelDevice(
                driver="gpu.nvidia.com",
                attributes={
                    **common,
                    "gpu.nvidia.com/type": "gpu",
                    "gpu.nvidia.com/uuid": f"GPU-{index:08d}-aaaa-bbbb-cccc-dddddddddddd",
                    "gpu.nvidia.com/index": index,
                    "gpu.nvidia.com/minor": index,
                },
                capacity={"gpu.nvidia.com/memory": Quantity.parse("40Gi" if index < 6 else "80Gi")},
            )
        )
        if index < 4:
            for mig in range(7):
                profile = "1g.5gb" if mig < 5 else "1g.12gb"
                devices.append(
                    CelDevice(
                        driver="gpu.nvidia.com",
                        attributes={
                            **common,
                            "gpu.nvidia.com/type": "mig",
                            "gpu.nvidia.com/uuid": f"MIG-{index}-{mig}",
                            "gpu.nvidia.com/profile": profile,
                            "gpu.nvidia.com/parentIndex": index,
                            "gpu.nvidia.com/index": mig,
                        },
                        capacity={
                            "gpu.nvidia.com/memory": Quantity.parse(
                                "5Gi" if profile == "1g.5gb" else "12Gi"
                            )
                        },
                    )
                )
    return devices


def _plain(value: Any) -> Any:
    if isinstance(value, Version | Quantity):
        return str(value)
    return value


def as_nested_dict(device: CelDevice, *, typed: bool) -> dict[str, Any]:
    """The device as nested maps: what the baseline engines get as ``device``.

    ``typed`` keeps Quantity and Version objects (cel-python, whose extension
    functions below work on them); otherwise they become strings.
    """
    attributes: dict[str, dict[str, Any]] = {}
    for key, value in device.attributes.items():
        domain, _, name = key.partition("/")
        attributes.setdefault(domain, {})[name] = value if typed else _plain(value)
    capacity: dict[str, dict[str, Any]] = {}
    for key, quantity in device.capacity.items():
        domain, _, name = key.partition("/")
        capacity.setdefault(domain, {})[name] = quantity if typed else str(quantity)
    return {
        "driver": device.driver,
        "attributes": attributes,
        "capacity": capacity,
        "allowMultipleAllocations": device.allow_multiple_allocations,
    }


def _to_celpy(value: Any) -> Any:
    """json_to_cel that leaves Quantity and Version objects alone."""
    if isinstance(value, dict):
        return celtypes.MapType({celtypes.StringType(k): _to_celpy(v) for k, v in value.items()})
    if isinstance(value, Version | Quantity):
        return value
    return celpy.json_to_cel(value)  # type: ignore[attr-defined]


# cel-python has no Kubernetes quantity/semver libraries and no lowerAscii; these small
# extension functions give it the same capabilities so every row has a baseline. They
# must be module-level functions: the compiled runner emits calls by qualified name.
def cel_quantity(text: Any) -> Quantity:
    """``quantity(string)``."""
    return Quantity.parse(str(text))


def cel_semver(text: Any) -> Version:
    """``semver(string)``."""
    return Version.parse(str(text))


def cel_compare_to(a: Any, b: Any) -> celtypes.IntType:
    """``x.compareTo(y)`` for quantities and versions."""
    return celtypes.IntType(a.cmp(b) if isinstance(a, Quantity) else a.compare(b))


def cel_is_greater_than(a: Any, b: Any) -> celtypes.BoolType:
    """``x.isGreaterThan(y)`` for quantities and versions."""
    return celtypes.BoolType(cel_compare_to(a, b) > 0)


def cel_major(version: Version) -> celtypes.IntType:
    """``v.major()``."""
    return celtypes.IntType(version.major)


def cel_lower_ascii(text: Any) -> celtypes.StringType:
    """``s.lowerAscii()``."""
    return celtypes.StringType(str(text).lower())


CELPY_FUNCTIONS: dict[str, Any] = {
    "quantity": cel_quantity,
    "semver": cel_semver,
    "compareTo": cel_compare_to,
    "isGreaterThan": cel_is_greater_than,
    "major": cel_major,
    "lowerAscii": cel_lower_ascii,
}
# The Rust engine gets only what needs no Python objects in its values.
RUST_FUNCTIONS: dict[str, Any] = {"lowerAscii": lambda text: text.lower()}


def per_device_seconds(
    evaluate: Callable[[Any], Any],
    inputs: list[Any],
    *,
    budget_s: float,
    repeats: int,
    clock: Callable[[], float] = time.process_time,
) -> float:
    """Best-of-``repeats`` mean time per evaluation over ``inputs``.

    By default CPU time of this process (``time.process_time``), not wall time: the
    machine is shared, and wall time would mostly measure other people's work.
    """
    start = clock()
    rounds = 0
    while clock() - start < 0.02 or rounds == 0:
        for item in inputs:
            evaluate(item)
        rounds += 1
    one_round = max((clock() - start) / rounds, 1e-9)
    rounds = max(1, int(budget_s / repeats / one_round))
    results = []
    for _ in range(repeats):
        start = clock()
        for _ in range(rounds):
            for item in inputs:
                evaluate(item)
        results.append((clock() - start) / (rounds * len(inputs)))
    return min(results)


Engine = Callable[[str], Callable[[Any], Any] | None]


def _ours(expression: str, devices: list[CelDevice]) -> tuple[Callable[[Any], Any], list[Any]]:
    matches = compile_selector(expression).matches
    return matches, devices


def _celpy(runner: type[celpy.Runner]) -> Callable[[str, list[CelDevice]], Any]:
    def build(expression: str, devices: list[CelDevice]) -> tuple[Callable[[Any], Any], list[Any]]:
        # cel-python shares one parser whose tree class is fixed by the first runner
        # created; the compiled runner needs its own, so reset it per engine.
        celpy.celparser.CELParser.CEL_PARSER = None
        # The compiled runner's code resolves functions as "<module>.<name>" inside
        # celpy.evaluation's globals; when run as a script this module is __main__.
        vars(celpy.evaluation).setdefault(__name__, sys.modules[__name__])
        env = celpy.Environment(runner_class=runner)
        program = env.program(env.compile(expression), functions=CELPY_FUNCTIONS)
        activations = [{"device": _to_celpy(as_nested_dict(d, typed=True))} for d in devices]
        for activation in activations:
            result = program.evaluate(activation)
            if isinstance(result, Exception):
                raise RuntimeError(str(result))
        return program.evaluate, activations

    return build


def _rust(expression: str, devices: list[CelDevice]) -> tuple[Callable[[Any], Any], list[Any]]:
    program = rust_cel.compile(expression)
    contexts = [
        rust_cel.Context(
            variables={"device": as_nested_dict(d, typed=False)}, functions=RUST_FUNCTIONS
        )
        for d in devices
    ]
    for context in contexts:
        program.execute(context)
    return program.execute, contexts


OURS = "ours (dra_cel)"
BASELINE = "cel-python compiled"


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short run (smoke test)")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # cel-python logs every evaluation error it returns
    budget = 0.05 if args.quick else 0.6
    repeats = 2 if args.quick else 5
    devices = make_devices()
    engines: list[tuple[str, Callable[[str, list[CelDevice]], Any]]] = [
        (OURS, _ours),
        ("cel-python interpreter", _celpy(celpy.InterpretedRunner)),
        (BASELINE, _celpy(celpy.CompiledRunner)),
        ("common-expression-language", _rust),
    ]
    gpus = sum(d.attributes["gpu.nvidia.com/type"] == "gpu" for d in devices)
    print(
        f"{len(devices)} devices ({gpus} GPUs, {len(devices) - gpus} MIG devices); "
        f"CPU time per device, best of {repeats}; baseline = {BASELINE}"
    )
    summary: list[str] = []
    for title, expression in SELECTORS:
        print(f"\n{title}\n  {expression}")
        timings: dict[str, float] = {}
        for name, build in engines:
            try:
                evaluate, inputs = build(expression, devices)
            except Exception as err:  # an engine without the function: not comparable
                reason = str(err).splitlines()[0][:70] if str(err) else type(err).__name__
                print(f"  {name:28s}      n/a   ({reason})")
                continue
            seconds = per_device_seconds(evaluate, inputs, budget_s=budget, repeats=repeats)
            timings[name] = seconds
            ratio = f"{seconds / timings[OURS]:7.1f}x ours" if name != OURS else " " * 12
            print(f"  {name:28s} {seconds * 1e6:8.2f} us  {ratio}")
        ours = timings[OURS]
        if BASELINE in timings:
            speedup = timings[BASELINE] / ours
            print(f"  => ours is {speedup:.1f}x faster than {BASELINE}")
            summary.append(f"{title}: {ours * 1e6:.2f} us/device, {speedup:.1f}x vs {BASELINE}")
        else:
            summary.append(f"{title}: {ours * 1e6:.2f} us/device ({BASELINE} lacks the functions)")
    print(f"\nSummary (target: gpu.nvidia.com class <= 2 us/device, >= 30x {BASELINE})")
    for line in summary:
        print("  " + line)
    matches = compile_selector(GPU_CLASS).matches
    wall = per_device_seconds(
        matches, devices, budget_s=budget, repeats=repeats, clock=time.perf_counter
    )
    print(f"  gpu.nvidia.com DeviceClass, ours, wall-clock: {wall * 1e6:.2f} us/device")


if __name__ == "__main__":
    main()
