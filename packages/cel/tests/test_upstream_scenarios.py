"""Scenarios from upstream's DRA CEL tests (k8s.io/dynamic-resource-allocation/cel),
restated here: the expression, the device, and what upstream says must happen."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest
from dra_api_types import Quantity, Version
from dra_cel import (
    CelCompileError,
    CelCostLimitError,
    CelDevice,
    CelError,
    CelRuntimeError,
    compile_selector,
)

DRIVER = "dra.example.com"
MAX_VALUES = 48  # ResourceSliceMaxAttributeValuesPerDevice


@dataclass(frozen=True)
class Scenario:
    """An upstream scenario: outcome is a bool or (error type, message fragment)."""

    name: str
    expression: str
    outcome: bool | tuple[type[CelError], str]
    attributes: Mapping[str, object] = field(default_factory=dict)
    capacity: Mapping[str, Quantity] = field(default_factory=dict)
    driver: str = DRIVER
    allow_multiple: bool = False


def _q(text: str) -> Quantity:
    return Quantity.parse(text)


def _v(text: str) -> Version:
    return Version.parse(text)


D = f'device.attributes["{DRIVER}"]'
K = f'device.capacity["{DRIVER}"]'
NESTED = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"

SCENARIOS = [
    Scenario("true", "true", True),
    Scenario("false", "false", False),
    Scenario("syntax_error", "?!", (CelCompileError, "Syntax error")),
    Scenario("type_error", "1", (CelCompileError, "must evaluate to bool or the unknown type")),
    Scenario(
        "runtime_error_lookup_identifier",
        'device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))',
        (CelRuntimeError, "no such key: noSuchAttr"),
    ),
    Scenario(
        "runtime_error_lookup_map",
        'device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))',
        (CelRuntimeError, "no such key: noSuchAttr"),
    ),
    Scenario("domain_check_negative", '"no-such-domain" in device.attributes', False),
    Scenario(
        "domain_check_positive",
        f'"{DRIVER}" in device.attributes',
        True,
        attributes={f"{DRIVER}/something": True},
    ),
    Scenario("empty_driver_name", 'device.driver == ""', True, driver=""),
    Scenario("real_driver_name", f'device.driver == "{DRIVER}"', True),
    Scenario("driver_name_qualifier", f"{D}.name", True, attributes={f"{DRIVER}/name": True}),
    Scenario("map_lookup", f'{D}["name"]', True, attributes={f"{DRIVER}/name": True}),
    Scenario("bind", f"cel.bind(dra, {D}, dra.name)", True, attributes={f"{DRIVER}/name": True}),
    Scenario(
        "qualified_attribute_name",
        'device.attributes["other.example.com"].name',
        True,
        attributes={"other.example.com/name": True},
    ),
    Scenario("int", f"{D}.name > 0", True, attributes={f"{DRIVER}/name": 1}),
    Scenario("string", f'{D}.name == "fish"', True, attributes={f"{DRIVER}/name": "fish"}),
    Scenario(
        "macro_exists_on_int",
        f"{D}.name.exists(x, x > 0)",
        (CelRuntimeError, "expected iterable type"),
        attributes={f"{DRIVER}/name": 1},
    ),
    Scenario(
        "macro_exists_on_version",
        f'{D}.name.exists(x, x.isGreaterThan(semver("0.0.1")))',
        (CelRuntimeError, "expected iterable type"),
        attributes={f"{DRIVER}/name": _v("1.0.0")},
    ),
    Scenario(
        "list_of_bool",
        f"{D}.names.size() == 2",
        True,
        attributes={f"{DRIVER}/names": [True, False]},
    ),
    Scenario(
        "list_of_semver",
        f"{D}.names.size() == 2",
        True,
        attributes={f"{DRIVER}/names": [_v("1.0.0"), _v("2.0.0")]},
    ),
    Scenario(
        "macro_on_list_of_int",
        f"{D}.names.exists(x, x > 0)",
        True,
        attributes={f"{DRIVER}/names": [1, 2]},
    ),
    Scenario(
        "macro_on_list_of_semver",
        f'{D}.names.all(x, x.isGreaterThan(semver("0.0.1")))',
        True,
        attributes={f"{DRIVER}/names": [_v("1.0.0"), _v("2.0.0")]},
    ),
    Scenario(
        "includes_bool_scalar",
        f"{D}.name.includes(true)",
        True,
        attributes={f"{DRIVER}/name": True},
    ),
    Scenario(
        "includes_bool_scalar_negative",
        f"{D}.name.includes(true)",
        False,
        attributes={f"{DRIVER}/name": False},
    ),
    Scenario(
        "includes_int_list", f"{D}.name.includes(1)", True, attributes={f"{DRIVER}/name": [1, 2]}
    ),
    Scenario(
        "includes_int_list_negative",
        f"{D}.name.includes(3)",
        False,
        attributes={f"{DRIVER}/name": [1, 2]},
    ),
    Scenario(
        "includes_string_scalar",
        f'{D}.name.includes("fish")',
        True,
        attributes={f"{DRIVER}/name": "fish"},
    ),
    Scenario(
        "includes_semver_list",
        f'{D}.name.includes(semver("1.0.0"))',
        True,
        attributes={f"{DRIVER}/name": [_v("1.0.0"), _v("2.0.0")]},
    ),
    Scenario(
        "includes_semver_scalar_negative",
        f'{D}.name.includes(semver("2.0.0"))',
        False,
        attributes={f"{DRIVER}/name": _v("1.0.0")},
    ),
    Scenario(
        "includes_longest_list",
        f'{D}.name.includes("value-{MAX_VALUES}")',
        False,
        attributes={f"{DRIVER}/name": [f"value-{i}" for i in range(MAX_VALUES)]},
    ),
    Scenario(
        "includes_too_long_list",
        f'{D}.name.includes("value-{MAX_VALUES + 1}")',
        (CelRuntimeError, f"cannot be applied to lists longer than {MAX_VALUES} values"),
        attributes={f"{DRIVER}/name": [f"value-{i}" for i in range(MAX_VALUES + 1)]},
    ),
    Scenario(
        "in_operator_on_list", f"1 in {D}.names", True, attributes={f"{DRIVER}/names": [1, 2, 3]}
    ),
    Scenario(
        "version",
        f'{D}.name.isGreaterThan(semver("0.0.1"))',
        True,
        attributes={f"{DRIVER}/name": _v("1.0.0")},
    ),
    Scenario(
        "version_relaxed",
        f'{D}.name.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)',
        True,
        attributes={f"{DRIVER}/name": _v("1.0.0")},
    ),
    Scenario(
        "quantity",
        f'{K}.name.isGreaterThan(quantity("1Ki"))',
        True,
        capacity={f"{DRIVER}/name": _q("1Mi")},
    ),
    Scenario(
        "check_positive",
        f'"name" in {K} && {K}.name.isGreaterThan(quantity("1Ki"))',
        True,
        capacity={f"{DRIVER}/name": _q("1Mi")},
    ),
    Scenario(
        "check_negative", f'!("name" in {K}) || {K}.name.isGreaterThan(quantity("1Ki"))', True
    ),
    Scenario(
        "all_kinds",
        " && ".join(
            [
                f'{K}.quantity.isGreaterThan(quantity("1Ki"))',
                f"{D}.bool",
                f"{D}.int > 0",
                f'{D}.string == "fish"',
                f'{D}.version.isGreaterThan(semver("0.0.1"))',
                f'{K}["quantity"].isGreaterThan(quantity("1Ki"))',
                f'{D}["bool"]',
                f'{D}["int"] > 0',
                f'{D}["string"] == "fish"',
                f'{D}["version"].isGreaterThan(semver("0.0.1"))',
            ]
        ),
        True,
        attributes={
            f"{DRIVER}/bool": True,
            f"{DRIVER}/int": 1,
            f"{DRIVER}/string": "fish",
            f"{DRIVER}/version": _v("1.0.0"),
        },
        capacity={f"{DRIVER}/quantity": _q("1Mi")},
    ),
    Scenario(
        "many",
        f"{D}.a && {D}.b && {D}.c",
        True,
        attributes={f"{DRIVER}/a": True, f"{DRIVER}/b": True, f"{DRIVER}/c": True},
    ),
    Scenario(
        "check_attribute_domains",
        f'device.attributes.exists_one(x, x == "{DRIVER}")',
        True,
        attributes={f"{DRIVER}/services": "some_example_value"},
    ),
    Scenario(
        "check_attribute_ids",
        f'{D}.exists_one(x, x == "services")',
        True,
        attributes={f"{DRIVER}/services": "some_example_value"},
    ),
    Scenario(
        "split_attribute",
        f'{D}.services.split("example").size() >= 2',
        True,
        attributes={f"{DRIVER}/services": "some_example_value"},
    ),
    Scenario(
        "regexp_attribute",
        f'{D}.services.matches("[^a]?sym")',
        True,
        attributes={f"{DRIVER}/services": "asymetric"},
    ),
    Scenario(
        "check_capacity_domains",
        f'device.capacity.exists_one(x, x == "{DRIVER}")',
        True,
        capacity={f"{DRIVER}/memory": _q("1Mi")},
    ),
    Scenario(
        "check_capacity_ids",
        f'{K}.exists_one(x, x == "memory")',
        True,
        capacity={f"{DRIVER}/memory": _q("1Mi")},
    ),
    Scenario(
        "expensive",
        f"{NESTED}.all(x, {NESTED}.all(y, {NESTED}.all(z, {NESTED}.all(z2, {NESTED}.all(z3, "
        f"{NESTED}.all(z4, {NESTED}.all(z5, int('1'.find('[0-9]*')) < 100)))))))",
        (CelCostLimitError, "actual cost limit exceeded"),
    ),
    Scenario(
        "allow_multiple_allocations",
        "device.allowMultipleAllocations == true",
        True,
        allow_multiple=True,
    ),
    Scenario(
        "allow_multiple_allocations_default", "device.allowMultipleAllocations == false", True
    ),
    Scenario(
        "map_filter_exists_over_attributes",
        f"{D}.map(key, {D}[key] * 20).filter(e, e > 50).exists(e, e == 60)",
        True,
        attributes={f"{DRIVER}/attr{i}": i for i in range(1000)},
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_upstream_scenario(scenario: Scenario) -> None:
    """Each scenario ends the way upstream's DRA CEL tests say it does."""
    device = CelDevice(
        driver=scenario.driver,
        attributes=dict(scenario.attributes),  # type: ignore[arg-type]
        capacity=dict(scenario.capacity),
        allow_multiple_allocations=scenario.allow_multiple,
    )
    if isinstance(scenario.outcome, bool):
        assert compile_selector(scenario.expression).matches(device) is scenario.outcome
        return
    kind, fragment = scenario.outcome
    with pytest.raises(kind) as info:
        compile_selector(scenario.expression).matches(device)
    assert fragment in str(info.value)
