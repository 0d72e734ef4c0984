"""Differential property tests: our evaluator agrees with cel-python and with
common-expression-language (the Rust cel-interpreter).

Expressions are generated well-typed over ints, strings and bools, device attributes
included, within the part of CEL where both implementations define the same result
(no division, no overflow, no heterogeneous comparisons).
"""

from __future__ import annotations

import logging
from typing import Any

import cel as rust_cel
import celpy
import pytest
from celpy import celtypes
from dra_cel import CelDevice, CelError, CelRuntimeError, compile_selector
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

DOMAIN = "dra.example.com"
INT_NAMES = ("i0", "i1")
STR_NAMES = ("s0", "s1")
WORDS = ("", "a", "ab", "ba", "gpu", "mig")

small_ints = st.integers(min_value=-5, max_value=20)
words = st.sampled_from(WORDS)


def _attr(name: str) -> str:
    return f"device.attributes['{DOMAIN}'].{name}"


def _leaf_int() -> st.SearchStrategy[str]:
    return st.one_of(small_ints.map(str), st.sampled_from(INT_NAMES).map(_attr))


def _leaf_str() -> st.SearchStrategy[str]:
    return st.one_of(
        words.map(lambda w: f"'{w}'"),
        st.sampled_from(STR_NAMES).map(_attr),
        st.just("device.driver"),
    )


def _grow_int(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(children, st.sampled_from(["+", "-", "*"]), children).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        _leaf_str().map(lambda s: f"size({s})"),
        # A map lookup whose key may be missing: an error in both engines. int() gives
        # both values one static type (an attribute is any, a literal int), as the
        # API server's homogeneous-literal check requires.
        st.tuples(children, children, _leaf_str()).map(
            lambda t: f"{{'a': int({t[0]}), 'gpu': int({t[1]})}}[{t[2]}]"
        ),
        st.tuples(children, st.lists(small_ints.map(str), max_size=4)).map(
            lambda t: f"size([{', '.join(t[1])}].filter(x, x > {t[0]}))"
        ),
    )


ints = st.recursive(_leaf_int(), _grow_int, max_leaves=4)
strs = st.recursive(
    _leaf_str(), lambda c: st.tuples(c, c).map(lambda t: f"({t[0]} + {t[1]})"), max_leaves=3
)


def _leaf_bool() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(["true", "false"]),
        st.tuples(ints, st.sampled_from(["<", "<=", "==", "!=", ">", ">="]), ints).map(
            lambda t: f"{t[0]} {t[1]} {t[2]}"
        ),
        st.tuples(strs, st.sampled_from(["==", "!="]), strs).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
        st.tuples(strs, st.sampled_from(["contains", "startsWith", "endsWith"]), strs).map(
            lambda t: f"{t[0]}.{t[1]}({t[2]})"
        ),
        # int() gives the elements one static type (see the map literal above).
        st.tuples(ints, st.lists(ints, max_size=3)).map(
            lambda t: f"{t[0]} in [{', '.join(f'int({e})' for e in t[1])}]"
        ),
        st.tuples(
            st.sampled_from(["all", "exists", "exists_one"]),
            st.lists(small_ints.map(str), max_size=4),
            st.sampled_from(["<", "==", ">"]),
            ints,
        ).map(lambda t: f"[{', '.join(t[1])}].{t[0]}(x, x {t[2]} {t[3]})"),
        st.sampled_from(INT_NAMES + STR_NAMES + ("missing",)).map(lambda n: f"has({_attr(n)})"),
        st.tuples(strs, st.sampled_from(["^a", "b$", "a.b", "^$", "[ab]+", "^(gpu|mig)$"])).map(
            lambda t: f"{t[0]}.matches('{t[1]}')"
        ),
        st.tuples(ints, st.lists(small_ints.map(str), max_size=3)).map(
            lambda t: f"[{', '.join(t[1])}].map(x, x * 2).exists(y, y == {t[0]})"
        ),
        st.tuples(ints, ints).map(lambda t: f"string({t[0]}) == string({t[1]})"),
        # An error operand: && and || must absorb it exactly as upstream does.
        st.just(f"{_attr('missing')} == 1"),
    )


def _grow_bool(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        children.map(lambda b: f"!({b})"),
        st.tuples(children, st.sampled_from(["&&", "||"]), children).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        st.tuples(children, children, children).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
    )


bools = st.recursive(_leaf_bool(), _grow_bool, max_leaves=6)
devices = st.fixed_dictionaries(
    dict.fromkeys(INT_NAMES, small_ints) | dict.fromkeys(STR_NAMES, words)
)


# cel-python's Environment() sets the recursion limit to 2500 every time; doing it once
# here keeps hypothesis from seeing the limit change inside a test.
celpy.Environment()


def _celpy_eval(expression: str, attributes: dict[str, Any]) -> Any:
    env = celpy.Environment()
    program = env.program(env.compile(expression))
    activation = {
        "device": celpy.json_to_cel(  # type: ignore[attr-defined]
            {"driver": DOMAIN, "attributes": {DOMAIN: attributes}, "capacity": {}}
        )
    }
    return program.evaluate(activation)


def _rust_context(attributes: dict[str, Any]) -> dict[str, Any]:
    return {"device": {"driver": DOMAIN, "attributes": {DOMAIN: attributes}, "capacity": {}}}


def _rust_succeeds(expression: str, attributes: dict[str, Any]) -> bool:
    try:
        rust_cel.evaluate(expression, _rust_context(attributes))
    except Exception:
        return False
    return True


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(expression=bools, attributes=devices)
def test_agrees_with_cel_python(expression: str, attributes: dict[str, Any]) -> None:
    """Where cel-python yields a bool, we yield the same bool.

    cel-python sometimes turns an error into a bool (an erroring ternary condition under
    ``!``, say), which the CEL spec does not; where the Rust cel-interpreter reports an
    error for the expression, the case is left to the test below.
    """
    logging.disable(logging.CRITICAL)  # cel-python logs each error value it returns
    try:
        expected = _celpy_eval(expression, attributes)
    except Exception:
        expected = None
    finally:
        logging.disable(logging.NOTSET)
    assume(isinstance(expected, celtypes.BoolType))
    assume(_rust_succeeds(expression, attributes))
    device = CelDevice(
        driver=DOMAIN, attributes={f"{DOMAIN}/{k}": v for k, v in attributes.items()}
    )
    try:
        ours = compile_selector(expression).matches(device)
    except CelError as err:  # pragma: no cover - a failure report, not a branch
        raise AssertionError(
            f"{expression!r}: we failed with {err}, cel-python said {expected}"
        ) from err
    assert ours is bool(expected), expression


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=bools, attributes=devices)
def test_agrees_with_common_expression_language(
    expression: str, attributes: dict[str, Any]
) -> None:
    """Same outcome as the Rust cel-interpreter: the same bool, or an error in both."""
    context = _rust_context(attributes)
    device = CelDevice(
        driver=DOMAIN, attributes={f"{DOMAIN}/{k}": v for k, v in attributes.items()}
    )
    try:
        expected = rust_cel.evaluate(expression, context)
    except Exception:
        with pytest.raises(CelRuntimeError):
            compile_selector(expression).matches(device)
        return
    try:
        ours = compile_selector(expression).matches(device)
    except CelError as err:  # pragma: no cover - a failure report, not a branch
        message = f"{expression!r}: we failed with {err}, cel-interpreter said {expected}"
        raise AssertionError(message) from err
    assert ours is expected, expression
