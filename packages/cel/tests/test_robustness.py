"""Any input text gives a result or one of our typed errors, never a crash."""

from __future__ import annotations

from dra_api_types import Quantity, Version
from dra_cel import CelCompileError, CelDevice, CelRuntimeError, compile_selector
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TOKENS = [
    "device", "driver", "attributes", "capacity", "allowMultipleAllocations",
    "['gpu.nvidia.com']", "['x.io']", ".type", ".index", ".memory", ".version", ".nope",
    "x", "y", "size", "has", "all", "exists", "exists_one", "map", "filter", "cel.bind",
    "optional.of", "optional.none()", "quantity", "semver", "isSemver", "matches",
    "1", "0", "-1", "1u", "1.5", "'a'", '"gpu"', "b'c'", "true", "false", "null",
    "'(['", "'[a-z]+'", "+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&",
    "||", "!", "?", ":", ".", ".?", "[", "[?", "]", "(", ")", "{", "}", ",", "in",
    "lists.range(3)", "'%s'.format", "int", "string", "dyn", "type",
]  # fmt: skip

DEVICE = CelDevice(
    driver="gpu.nvidia.com",
    attributes={
        "gpu.nvidia.com/type": "gpu",
        "gpu.nvidia.com/index": 3,
        "gpu.nvidia.com/version": Version.parse("1.2.3"),
        "gpu.nvidia.com/peers": ["a", "b"],
    },
    capacity={"gpu.nvidia.com/memory": Quantity.parse("40Gi")},
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=14))
def test_token_soup_never_crashes(tokens: list[str]) -> None:
    """Compilation fails only with CelCompileError, evaluation only with CelRuntimeError,
    and never with the catch-all "evaluation failed" that marks an internal error."""
    text = " ".join(tokens)
    failure: CelCompileError | CelRuntimeError | None = None
    try:
        selector = compile_selector(text)
        result = selector.matches(DEVICE)
        assert isinstance(result, bool)
        assert isinstance(selector.explain(DEVICE), str)
    except (CelCompileError, CelRuntimeError) as err:
        failure = err
    if failure is not None:
        assert failure.expression == text
        assert not failure.message.startswith("evaluation failed"), failure.message


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=40))
def test_arbitrary_text_never_crashes(text: str) -> None:
    """Arbitrary characters (quotes, escapes, unicode) only ever fail as typed errors."""
    try:
        selector = compile_selector(text)
    except CelCompileError:
        return
    try:
        selector.matches(DEVICE)
    except CelRuntimeError:
        return
