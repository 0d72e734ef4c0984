"""Property-based round trips of whole objects, generated from the upstream OpenAPI schema.

Every field the schema allows (recursively, with random subsets of fields, random map keys
and list lengths) must survive ``parse_object(doc).to_dict() == doc`` and a YAML dump/load,
so a field missing from a model, misspelled or typed differently fails here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dra_api_types import ApiObject, Quantity, dump_all, load_all, parse_object
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

OPENAPI = Path(__file__).parent / "fixtures" / "openapi" / "openapi-resource.k8s.io-v1.json"
SCHEMAS: dict[str, Any] = json.loads(OPENAPI.read_text(encoding="utf-8"))["components"]["schemas"]

_QUANTITY_TEXT = st.builds(
    lambda n, s: str(Quantity.parse(f"{n}{s}")),
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from(["", "m", "k", "Ki", "Mi", "Gi", "M", "G", "e3"]),
)
_TEXT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-./", min_size=0, max_size=12)
_KEY = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-./", min_size=1, max_size=12)
_TIME = st.sampled_from(["2026-04-19T06:26:52Z", "2025-01-01T00:00:00Z"])
_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), _TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEY, inner, max_size=3)),
    max_leaves=6,
)
_JSON_OBJECT = st.dictionaries(_KEY, _JSON, max_size=3)


def _ref(prop: dict[str, Any]) -> str | None:
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    for part in prop.get("allOf", []):
        if "$ref" in part:
            return str(part["$ref"]).rsplit("/", 1)[-1]
    return None


def _strategy(prop: dict[str, Any], depth: int) -> st.SearchStrategy[Any]:
    ref = _ref(prop)
    if ref is not None:
        if ref.endswith(".Quantity"):
            return _QUANTITY_TEXT
        if ref.endswith(".Time"):
            return _TIME
        if ref.endswith((".RawExtension", ".FieldsV1")):
            return _JSON_OBJECT
        return _object(ref, depth + 1)
    kind = prop.get("type")
    if kind == "string":
        return _TEXT
    if kind == "integer":
        return st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(_strategy(prop["items"], depth), max_size=2 if depth < 4 else 1)
    if kind == "object":
        return st.dictionaries(_KEY, _strategy(prop["additionalProperties"], depth), max_size=2)
    raise AssertionError(f"unhandled schema {prop}")


def _object(name: str, depth: int) -> st.SearchStrategy[dict[str, Any]]:
    schema = SCHEMAS[name]
    properties = {
        key: _strategy(prop, depth)
        for key, prop in schema.get("properties", {}).items()
        if key not in ("apiVersion", "kind")
    }
    return st.fixed_dictionaries({}, optional=properties)


def _document(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    return _object(f"io.k8s.api.resource.v1.{kind}", 0).map(
        lambda body: {"apiVersion": "resource.k8s.io/v1", "kind": kind, **body}
    )


_KINDS = st.sampled_from(["DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_KINDS.flatmap(_document))
def test_any_schema_shaped_object_roundtrips(doc: dict[str, Any]) -> None:
    obj = parse_object(doc)
    assert isinstance(obj, ApiObject)
    assert obj.to_dict() == doc
    (again,) = load_all(dump_all([obj]), validate=False)
    assert again == obj
    assert isinstance(again, ApiObject)
    assert again.to_dict() == doc


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_KINDS.flatmap(_document), st.dictionaries(_KEY.map(lambda k: "x" + k), _JSON, max_size=3))
def test_unknown_fields_roundtrip_at_top_level(doc: dict[str, Any], extra: dict[str, Any]) -> None:
    doc = {**doc, **extra}
    obj = parse_object(doc)
    assert isinstance(obj, ApiObject)
    assert obj.to_dict() == doc
