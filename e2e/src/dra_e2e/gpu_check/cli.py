"""``python -m dra_e2e.gpu_check`` (``make gpu-check``): detect the GPU, run the steps, print
the summary; exit 1 on any failure, 0 when every step passed or skipped, or there is no GPU."""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from . import claim_round_trip, container, parity, steps
from .detect import LIBRARY, detect_gpu, skip_line
from .runner import Step, StepResult, exit_status, format_summary, run_steps
from .target import CheckTarget

# The whole check stays under five minutes: the budgets add up to 280 s.
BUDGETS_S = {"contract": 100.0, "slices": 30.0, "claim": 60.0, "container": 60.0, "parity": 30.0}


def build_steps(target: CheckTarget) -> list[Step]:
    """The check's steps, in order, each bound to ``target``."""
    return [
        Step(
            "nvml contract suite",
            BUDGETS_S["contract"],
            functools.partial(steps.contract_suite, target),
        ),
        Step(
            "resource slices",
            BUDGETS_S["slices"],
            functools.partial(steps.print_resource_slices, target),
        ),
        Step(
            "claim prepare/unprepare",
            BUDGETS_S["claim"],
            functools.partial(claim_round_trip.prepare_unprepare, target),
        ),
        Step(
            "nvidia-smi -L in a container",
            BUDGETS_S["container"],
            functools.partial(container.nvidia_smi_in_container, target),
        ),
        Step(
            "CDI spec = nvidia-ctk cdi generate",
            BUDGETS_S["parity"],
            functools.partial(parity.toolkit_parity, target),
        ),
    ]


def _report(result: StepResult) -> None:
    print(f"gpu-check: {result.verdict.value} {result.name} ({result.seconds:.1f}s)", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; returns the exit status."""
    parser = argparse.ArgumentParser(prog="gpu-check", description=__doc__)
    parser.add_argument(
        "--backend",
        choices=("nvml", "fake"),
        default="nvml",
        help="nvml: this machine's GPUs; fake: a fake fleet (for the check's own tests)",
    )
    parser.add_argument("--fake-gpus", default="2xA100-40GB", help="the fleet with --backend fake")
    parser.add_argument("--nvml-library", default=LIBRARY, help="the library GPU detection loads")
    parser.add_argument(
        "--nvidia-ctk",
        default=None,
        help="nvidia-ctk to compare the CDI spec with (default: PATH; nvidia-cdi-hook beside it)",
    )
    args = parser.parse_args(argv)
    if args.backend == "nvml":
        found = detect_gpu(args.nvml_library)
        if isinstance(found, str):
            print(skip_line(found))
            return 0
        print(f"gpu-check: {found.count} GPUs, driver {found.driver_version}", flush=True)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as workdir:
        target = CheckTarget(
            args.backend,
            Path(workdir),
            fake_gpus=args.fake_gpus,
            toolkit=parity.find_toolkit(args.nvidia_ctk),
        )
        results = run_steps(build_steps(target), report=_report)
    print(format_summary(results))
    return exit_status(results)


if __name__ == "__main__":
    sys.exit(main())
