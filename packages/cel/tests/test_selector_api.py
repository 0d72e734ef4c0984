"""The public API of dra_cel: compile, match, cache, explain, errors."""

from __future__ import annotations

import pytest
from dra_api_types import Quantity, Version
from dra_cel import (
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


def test_explain_lists_every_false_alternative() -> None:
    attr = "device.attributes['gpu.nvidia.com'].index"
    selector = compile_selector(f"{attr} == 2 || {attr} == 4")
    text = selector.explain(_gpu())
    assert "index == 2 is false" in text
    assert "index == 4 is false" in text
    assert "index = 0" in text


def test_explain_names_the_failing_sub_expression() -> None:
    selector = compile_selector(
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].nope == 1"
    )
    assert selector.explain(_gpu()) == (
        "device.attributes['gpu.nvidia.com'].nope failed: no such key: nope"
    )


def test_explain_shows_quantity_values() -> None:
    selector = compile_selector(
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"
    )
    assert selector.explain(_gpu()) == (
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0 is false "
        "(device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) = -1, "
        "device.capacity['gpu.nvidia.com'].memory = quantity(\"40Gi\"))"
    )


def test_explain_of_a_matching_device_says_true() -> None:
    assert compile_selector(GPU_CLASS).explain(_gpu()) == f"{GPU_CLASS} is true"


def test_long_alternative_chains_compile_and_evaluate() -> None:
    # The longest "index in a list of alternatives" that fits the 10 KiB limit.
    attr = "device.attributes['gpu.nvidia.com'].index"
    text = " || ".join(f"{attr} == {i}" for i in range(1, 200) if len(attr) * i < 9000)
    assert compile_selector(text).matches(_gpu()) is False
    many = " && ".join(["true"] * 1200)
    assert compile_selector(many).matches(_gpu()) is True


def test_expression_length_limit_is_upstreams() -> None:
    text = "true || " * 1280 + "true"
    assert len(text) > 10 * 1024
    with pytest.raises(CelCompileError, match="expression too long"):
        compile_selector(text)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("1.5", "1.5"),
        ("2.0", "2"),
        ("123456.0", "123456"),
        ("1e6", "1e+06"),
        ("1234567.0", "1.234567e+06"),
        ("0.0001", "0.0001"),
        ("0.00001", "1e-05"),
        ("-2.5e10", "-2.5e+10"),
    ],
)
def test_string_of_double_formats_like_go(value: str, text: str) -> None:
    assert compile_selector(f"string({value}) == '{text}'").matches(_gpu())


def test_selectors_are_independent_of_cel_python_parser_state() -> None:
    # cel-python's own parser singleton may be built with another tree class.
    import celpy
    import celpy.celparser

    celpy.celparser.CELParser.CEL_PARSER = None
    try:
        celpy.Environment(runner_class=celpy.CompiledRunner)
        assert compile_selector("device.driver.startsWith('gpu') && 1 < 2").matches(_gpu())
    finally:
        celpy.celparser.CELParser.CEL_PARSER = None


def test_compile_errors_are_cached_but_raised_fresh_each_time() -> None:
    with pytest.raises(CelCompileError) as first:
        compile_selector("device.nope == 1")
    with pytest.raises(CelCompileError) as second:
        compile_selector("device.nope == 1")
    assert first.value is not second.value
    assert str(first.value) == str(second.value)
    # At the dot, as the API server reports it (1:7).
    assert second.value.position == first.value.position == len("device")


def test_back_to_back_negations_cancel_as_in_cel_go_parser() -> None:
    # cel-go keeps one operator of a run (`!!x` is `x`): the API server accepts this, and
    # a random cost differential found that we rejected it (`!_` applied to string).
    selector = compile_selector("!!device.driver == 'gpu.nvidia.com'")
    assert selector.matches(_gpu())
    assert not compile_selector("!!!(device.driver == 'gpu.nvidia.com')").matches(_gpu())
    with pytest.raises(CelCompileError, match="'!_'"):
        compile_selector("!(!device.driver) == 'gpu.nvidia.com'")


def test_arithmetic_with_one_typed_side_is_typed_as_upstream() -> None:
    # any + string can only be add_string: comparing it with an int does not compile
    # (the API server's verdict, found with its real instance), nor does any + bool.
    with pytest.raises(CelCompileError, match="'_==_' applied to '\\(string, int\\)'"):
        compile_selector("device.attributes['gpu.nvidia.com'].index + 'x' == 1")
    with pytest.raises(CelCompileError, match="'_\\+_' applied to '\\(any, bool\\)'"):
        compile_selector("device.attributes['gpu.nvidia.com'].index + true")
    assert compile_selector("device.attributes['gpu.nvidia.com'].type + '-x' == 'gpu-x'").matches(
        _gpu()
    )
