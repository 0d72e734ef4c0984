"""Walk the upstream OpenAPI schema of resource.k8s.io/v1 and the models together.

Fails on any field present in one and absent in the other, typed differently, or required
upstream but optional in the model. The reference is the OpenAPI document served by the
Kubernetes 1.37.2 API server; the 1.35 and 1.34 documents must be covered too.
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import pytest
from dra_api_types import Quantity, meta_v1, resource_v1
from pydantic import BaseModel

REFERENCE = Path(__file__).parent / "fixtures" / "openapi"
OPENAPI_V1 = REFERENCE / "openapi-resource.k8s.io-v1-k8s1.37.json"
OPENAPI_V1_K8S135 = REFERENCE / "openapi-resource.k8s.io-v1.json"
OPENAPI_V1_K8S134 = REFERENCE / "openapi-resource.k8s.io-v1-k8s1.34.json"

# Schemas outside resource/v1 that resource objects embed, and the models of them.
EMBEDDED = {
    "io.k8s.api.core.v1.NodeSelector",
    "io.k8s.api.core.v1.NodeSelectorTerm",
    "io.k8s.api.core.v1.NodeSelectorRequirement",
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
    "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
    "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry",
    "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
    "io.k8s.apimachinery.pkg.apis.meta.v1.ShardInfo",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Condition",
}
# Schemas that are plain JSON values in the models.
AS_STRING = {"io.k8s.apimachinery.pkg.apis.meta.v1.Time"}
AS_JSON_OBJECT = {
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
}
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"


def _schemas(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    schemas: dict[str, Any] = data["components"]["schemas"]
    return schemas


def _model_for(schema_name: str) -> type[BaseModel]:
    short = schema_name.rsplit(".", 1)[-1]
    module = resource_v1 if schema_name.startswith("io.k8s.api.resource.v1.") else meta_v1
    cls = getattr(module, short, None)
    assert isinstance(cls, type), f"no model for {schema_name}"
    assert issubclass(cls, BaseModel), f"no model for {schema_name}"
    return cls


def _walked(path: Path) -> list[str]:
    return sorted(
        name
        for name in _schemas(path)
        if name.startswith("io.k8s.api.resource.v1.") or name in EMBEDDED
    )


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        assert len(args) == 1, annotation
        return args[0], True
    return annotation, False


def _ref(prop: dict[str, Any]) -> str | None:
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    for part in prop.get("allOf", []):
        if "$ref" in part:
            return str(part["$ref"]).rsplit("/", 1)[-1]
    return None


def _check_type(prop: dict[str, Any], annotation: Any, where: str) -> None:
    ref = _ref(prop)
    if ref is not None:
        if ref == QUANTITY:
            assert annotation is Quantity, f"{where}: expected Quantity, got {annotation}"
        elif ref in AS_STRING:
            assert annotation is str, f"{where}: expected str (RFC 3339), got {annotation}"
        elif ref in AS_JSON_OBJECT:
            assert get_origin(annotation) is dict, f"{where}: expected a JSON object"
        else:
            assert annotation is _model_for(ref), f"{where}: expected {ref}, got {annotation}"
        return
    kind = prop.get("type")
    if kind == "string":
        assert annotation is str, f"{where}: expected str, got {annotation}"
    elif kind == "integer":
        assert annotation is int, f"{where}: expected int, got {annotation}"
    elif kind == "boolean":
        assert annotation is bool, f"{where}: expected bool, got {annotation}"
    elif kind == "array":
        assert get_origin(annotation) is list, f"{where}: expected a list, got {annotation}"
        _check_type(prop["items"], get_args(annotation)[0], where + "[]")
    elif kind == "object":
        assert get_origin(annotation) is dict, f"{where}: expected a map, got {annotation}"
        key, value = get_args(annotation)
        assert key is str
        _check_type(prop["additionalProperties"], value, where + "{}")
    else:
        pytest.fail(f"{where}: unhandled schema {prop}")


@pytest.mark.parametrize("schema_name", _walked(OPENAPI_V1), ids=lambda n: n.rsplit(".", 1)[-1])
def test_model_matches_openapi_schema(schema_name: str) -> None:
    schema = _schemas(OPENAPI_V1)[schema_name]
    model = _model_for(schema_name)
    short = model.__name__
    fields = {info.alias or name: info for name, info in model.model_fields.items()}
    properties: dict[str, Any] = schema.get("properties", {})
    missing = sorted(set(properties) - set(fields))
    assert not missing, f"{short}: fields in the API but not in the model: {missing}"
    extra = sorted(set(fields) - set(properties))
    assert not extra, f"{short}: fields in the model but not in the API: {extra}"
    required = set(schema.get("required", []))
    for key, prop in properties.items():
        annotation, optional = _strip_optional(fields[key].annotation)
        _check_type(prop, annotation, f"{short}.{key}")
        if key in required:
            assert not optional, f"{short}.{key} is required upstream but optional in the model"


def test_every_resource_v1_schema_is_walked() -> None:
    names = {n.rsplit(".", 1)[-1] for n in _walked(OPENAPI_V1)}
    assert {"DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"} <= names
    assert len([n for n in _walked(OPENAPI_V1) if ".resource.v1." in n]) == 51


def test_1_37_additions_are_typed() -> None:
    assert resource_v1.KINDS["DeviceTaintRule"] is resource_v1.DeviceTaintRule
    rule = resource_v1.DeviceTaintRule.from_dict(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceTaintRule",
            "metadata": {"name": "maintenance"},
            "spec": {
                "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "node-a"},
                "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"},
            },
        }
    )
    assert rule.spec.device_selector is not None
    assert rule.spec.device_selector.pool == "node-a"
    assert rule.to_dict()["spec"]["taint"] == {
        "key": "example.com/maintenance",
        "effect": "NoSchedule",
    }
    mapping = resource_v1.NodeAllocatableMapping.model_fields
    assert set(mapping) == {"capacity_key", "capacity_multiplier", "device_multiplier"}


@pytest.mark.parametrize(
    ("document", "schema_name"),
    [(doc, name) for doc in (OPENAPI_V1_K8S134, OPENAPI_V1_K8S135) for name in _walked(doc)],
    ids=lambda v: v.rsplit(".", 1)[-1] if isinstance(v, str) else v.name,
)
def test_models_cover_older_releases(document: Path, schema_name: str) -> None:
    """Every 1.34 and 1.35 field is modeled too (each is a subset of 1.37 for v1)."""
    model = _model_for(schema_name)
    fields = {info.alias or name: info for name, info in model.model_fields.items()}
    for key, prop in _schemas(document)[schema_name].get("properties", {}).items():
        assert key in fields, f"{model.__name__}.{key} (1.34) is not modeled"
        _check_type(prop, _strip_optional(fields[key].annotation)[0], f"{model.__name__}.{key}")
