"""The checked-in CRD manifests are up to date and accept the demo ComputeDomains."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from dra_api_types import crd_manifests
from dra_api_types.codec import load_documents
from dra_api_types.crds import CRD_DIRECTORY

DEMO = Path(__file__).parent / "fixtures" / "nvidia-demo-specs"


def test_checked_in_crds_are_up_to_date() -> None:
    expected = crd_manifests()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in CRD_DIRECTORY.glob("*.yaml")}
    assert on_disk == expected, "run `uv run python -m dra_api_types.crds` and commit the result"


def _schema(kind: str) -> dict[str, Any]:
    for text in crd_manifests().values():
        crd = yaml.safe_load(text.split("---\n", 1)[1])
        if crd["spec"]["names"]["kind"] == kind:
            schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            return schema
    raise KeyError(kind)


def _walk(node: dict[str, Any], path: str) -> None:
    """Structural-schema rules the apiserver enforces on CRDs."""
    assert "$ref" not in node, path
    if "x-kubernetes-int-or-string" in node:
        assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
        return
    assert "type" in node, f"{path}: every node needs a type"
    if node["type"] == "object":
        assert not ("properties" in node and "additionalProperties" in node), path
        for key, child in node.get("properties", {}).items():
            _walk(child, f"{path}.{key}")
        if isinstance(node.get("additionalProperties"), dict):
            _walk(node["additionalProperties"], f"{path}{{}}")
        for required in node.get("required", []):
            assert required in node.get("properties", {}), f"{path}.{required}"
    if node["type"] == "array":
        _walk(node["items"], f"{path}[]")
        if node.get("x-kubernetes-list-type") == "map":
            for key in node["x-kubernetes-list-map-keys"]:
                assert key in node["items"]["required"], f"{path}: map key {key} must be required"


@pytest.mark.parametrize("kind", ["ComputeDomain", "ComputeDomainClique"])
def test_crd_schema_is_structural(kind: str) -> None:
    _walk(_schema(kind), kind)


def test_compute_domain_crd_shape() -> None:
    schema = _schema("ComputeDomain")
    spec = schema["properties"]["spec"]
    assert spec["x-kubernetes-validations"] == [
        {"message": "A computeDomain.spec is immutable", "rule": "self == oldSelf"}
    ]
    channel = spec["properties"]["channel"]["properties"]
    assert channel["allocationMode"]["enum"] == ["Single", "All"]
    assert channel["allocationMode"]["default"] == "Single"
    nodes = schema["properties"]["status"]["properties"]["nodes"]
    assert nodes["x-kubernetes-list-map-keys"] == ["name"]
    assert set(nodes["items"]["properties"]) == {"name", "ipAddress", "cliqueID", "index", "status"}


@pytest.mark.parametrize("name", ["imex_channel-injection.yaml", "imex_channel-injection-all.yaml"])
def test_demo_compute_domains_match_the_crd_schema(name: str) -> None:
    schema = _schema("ComputeDomain")
    (doc, _pod) = load_documents(DEMO / name)
    jsonschema.validate(doc, schema)
    bad = {
        **doc,
        "spec": {**doc["spec"], "channel": {**doc["spec"]["channel"], "allocationMode": "Many"}},
    }
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
