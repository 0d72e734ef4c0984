"""The webhook warns about selectors naming what gpu.nvidia.com never publishes."""

from __future__ import annotations

from typing import Any

from dra_api_types.testing import exactly, resource_claim
from dra_cel.selector_names import selector_warnings
from dra_cel.syntax import parse
from dra_controller.webhook import judge_object, review

A = 'device.attributes["gpu.nvidia.com"]'
C = 'device.capacity["gpu.nvidia.com"]'


def _request(*expressions: str) -> dict[str, Any]:
    return exactly("gpu", selectors=expressions)


def _claim(*requests: dict[str, Any]) -> dict[str, Any]:
    return resource_claim("c", namespace="ns", requests=requests)


def test_a_typo_in_an_attribute_name_is_a_warning_with_the_field_path() -> None:
    verdict = judge_object(_claim(_request(f"{A}.productname == 'NVIDIA A100'")), "resourceclaims")
    assert verdict.allowed
    assert verdict.warnings == (
        "spec.devices.requests[0].exactly.selectors[0].cel.expression: gpu.nvidia.com "
        "publishes no attribute 'productname' (did you mean 'productName'?)",
    )


def test_published_names_and_other_domains_are_not_warned_about() -> None:
    expressions = (
        f"{A}.productName.startsWith('NVIDIA') && {A}['uuid'] != ''",
        f"{C}.memory.compareTo(quantity('40Gi')) >= 0 && has({C}.memorySlice3)",
        "device.attributes['dra.example.com'].anything == 1",
        "device.attributes['resource.kubernetes.io'].pcieRoot == 'x'",
        "device.attributes.exists(d, device.attributes[d].exists(k, k == 'x'))",
        "device.driver == 'gpu.nvidia.com'",
    )
    verdict = judge_object(_claim(_request(*expressions)), "resourceclaims")
    assert verdict.allowed
    assert verdict.warnings == ()


def test_capacity_index_lookups_first_available_and_templates_are_checked() -> None:
    sub = {
        "name": "small",
        "deviceClassName": "gpu.nvidia.com",
        "selectors": [{"cel": {"expression": f"{C}['memroy'].isGreaterThan(quantity('1'))"}}],
    }
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {"spec": {"devices": {"requests": [{"name": "r", "firstAvailable": [sub]}]}}},
    }
    verdict = judge_object(template, "resourceclaimtemplates")
    assert verdict.warnings == (
        "spec.spec.devices.requests[0].firstAvailable[0].selectors[0].cel.expression: "
        "gpu.nvidia.com publishes no capacity 'memroy' (did you mean 'memory'?)",
    )


def test_v1beta1_request_selectors_and_each_name_once() -> None:
    request = {
        "name": "gpu",
        "deviceClassName": "gpu.nvidia.com",
        "selectors": [{"cel": {"expression": f"has({A}.cores) && {A}.cores > 2"}}],
    }
    warnings = selector_warnings({"requests": [request]}, "spec.devices")
    assert warnings == [
        "spec.devices.requests[0].selectors[0].cel.expression: "
        "gpu.nvidia.com publishes no attribute 'cores'"
    ]


def test_a_comprehension_variable_named_device_hides_the_device() -> None:
    expression = f"[{{'attributes': {{'gpu.nvidia.com': {{'x': 1}}}}}}].all(device, {A}.x == 1)"
    assert selector_warnings({"requests": [_request(expression)]}, "spec.devices") == []


def test_unparsable_selectors_are_left_to_the_api_server() -> None:
    assert selector_warnings({"requests": [_request(f"{A}.productname ==")]}, "p") == []


def test_the_review_carries_the_warnings_and_admits() -> None:
    body: dict[str, Any] = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
            "operation": "CREATE",
            "object": _claim(_request(f"{A}.productname == 'x'")),
        },
    }
    response = review(body)["response"]
    assert response["allowed"] is True
    assert response["warnings"] == [
        "spec.devices.requests[0].exactly.selectors[0].cel.expression: gpu.nvidia.com "
        "publishes no attribute 'productname' (did you mean 'productName'?)"
    ]
    clean = {**body, "request": {**body["request"], "object": _claim(_request("true"))}}
    assert "warnings" not in review(clean)["response"]


def test_a_selector_repeated_by_many_claims_is_parsed_once(monkeypatch: Any) -> None:
    parsed: list[str] = []

    def counting_parse(text: str) -> Any:
        parsed.append(text)
        return parse(text)

    monkeypatch.setattr("dra_cel.selector_names.parse", counting_parse)
    # An expression no other test uses, so the remembered table has not seen it.
    expression = f"{A}.produtName == 'once' && {A}.produtName != 'twice'"
    claims = [_claim(_request(expression)) for _ in range(3)]
    verdicts = [judge_object(claim, "resourceclaims") for claim in claims]
    assert parsed == [expression]
    # Each claim still gets its warning, once per name, as before.
    assert all(len(v.warnings) == 1 and "'produtName'" in v.warnings[0] for v in verdicts)
