"""The public API of dra_controller.cel: compile, match, cache, explain, errors."""

from __future__ import annotations

import pytest
from dra_api_types import Quantity, Version
from dra_controller.cel import (
    CelCompileError,
    CelDevice,
    CelRuntimeError,
    compile_selector,
)

GPU_CLASS = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"


def _gpu(kind: str = "gpu") -> CelDevice:
    return CelDevice(
        driver="gpu.nvidia.com",
        attributes={
            "gpu.nvidia.com/type": kind,
            "gpu.nvidia.com/index": 0,
            "gpu.nvidia.com/driverVersion": Version.parse("550.54.15"),
        },
        capacity={"gpu.nvidia.com/memory": Quantity.parse("40Gi")},
    )


def test_gpu_class_selector_matches_gpus_and_rejects_mig_devices() -> None:
    selector = compile_selector(GPU_CLASS)
    assert selector.matches(_gpu()) is True
    assert selector.matches(_gpu("mig")) is False
    assert selector.expression == GPU_CLASS


def test_compile_cache_returns_the_same_object_for_the_same_text() -> None:
    assert compile_selector(GPU_CLASS) is compile_selector(GPU_CLASS)


def test_unknown_attribute_is_a_runtime_error_not_false() -> None:
    selector = compile_selector("device.attributes['gpu.nvidia.com'].nope == 1")
    with pytest.raises(CelRuntimeError, match="no such key: nope") as info:
        selector.matches(_gpu())
    assert info.value.expression == selector.expression


def test_syntax_error_reports_its_position() -> None:
    with pytest.raises(CelCompileError) as info:
        compile_selector("device.driver == ")
    assert info.value.position == len("device.driver == ")
    assert info.value.line == 1
    assert info.value.column == len("device.driver == ") + 1


def test_explain_names_the_false_conjunct_and_its_value() -> None:
    text = compile_selector(GPU_CLASS).explain(_gpu("mig"))
    assert text == (
        "device.attributes['gpu.nvidia.com'].type == 'gpu' is false "
        "(device.attributes['gpu.nvidia.com'].type = \"mig\")"
    )
