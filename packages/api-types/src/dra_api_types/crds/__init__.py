"""CustomResourceDefinition manifests of resource.nvidia.com, generated from the models.

The checked-in YAML files next to this module are what the Helm chart ships; a test fails
when they differ from :func:`crd_manifests`. Regenerate them with::

    uv run python -m dra_api_types.crds
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Final, Union, get_args, get_origin

from pydantic import BaseModel

from .. import nvidia_v1beta1 as nv
from .._model import ApiObject
from ..quantity import QUANTITY_PATTERN, Quantity

__all__ = ["CRD_DIRECTORY", "crd_file_name", "crd_manifests", "render_crd", "write_crds"]

CRD_DIRECTORY: Final = Path(__file__).parent

# What the Go types express with kubebuilder markers and JSON tags, keyed by model class:
# required properties, list-map keys, and CEL rules.
_REQUIRED: Final[dict[type[BaseModel], list[str]]] = {
    # numNodes is optional (default 0) since NVIDIA 25.12; only the channel is required.
    nv.ComputeDomainSpec: ["channel"],
    nv.ComputeDomainChannelSpec: ["resourceClaimTemplate"],
    nv.ComputeDomainResourceClaimTemplate: ["name"],
    nv.ComputeDomainStatus: ["status"],
    nv.ComputeDomainNode: ["name", "ipAddress", "cliqueID"],
    nv.ComputeDomainDaemonInfo: ["nodeName", "ipAddress", "cliqueID"],
}
_LIST_MAP_KEYS: Final[dict[tuple[type[BaseModel], str], list[str]]] = {
    (nv.ComputeDomainStatus, "nodes"): ["name"],
    (nv.ComputeDomainClique, "daemons"): ["nodeName"],
}
_RULES: Final[dict[type[BaseModel], list[dict[str, str]]]] = {
    nv.ComputeDomainSpec: [
        {"message": "A computeDomain.spec is immutable", "rule": "self == oldSelf"}
    ],
}
_STATUS_SUBRESOURCE: Final = {nv.ComputeDomain}
_KINDS: Final[list[type[ApiObject]]] = [nv.ComputeDomain, nv.ComputeDomainClique]


def _description(cls: type[Any]) -> str:
    doc = (cls.__doc__ or "").strip()
    return doc.split("\n\n")[0].replace("\n", " ")


def _schema_for(annotation: Any, model: type[BaseModel], field: str) -> dict[str, Any]:
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Union or (origin is not None and type(None) in args):
        non_none = [a for a in args if a is not type(None)]
        return _schema_for(non_none[0], model, field)
    if annotation is str:
        return {"type": "string"}
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer"}
    if annotation is Quantity:
        return {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    if origin is list:
        schema: dict[str, Any] = {"type": "array", "items": _schema_for(args[0], model, field)}
        keys = _LIST_MAP_KEYS.get((model, field))
        if keys:
            schema["x-kubernetes-list-map-keys"] = keys
            schema["x-kubernetes-list-type"] = "map"
        return schema
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema_for(args[1], model, field)}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _object_schema(annotation)
    raise TypeError(f"no CRD schema for {annotation!r} ({model.__name__}.{field})")


def _object_schema(model: type[BaseModel]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        key = info.alias or name
        if key in ("apiVersion", "kind"):
            properties[key] = {"type": "string"}
            continue
        if key == "metadata":
            properties[key] = {"type": "object"}
            continue
        schema = _schema_for(info.annotation, model, name)
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        for extra_key, value in extra.items():
            schema[extra_key] = copy.deepcopy(value)
        properties[key] = schema
    schema = {
        "description": _description(model),
        "type": "object",
        "properties": dict(sorted(properties.items())),
    }
    required = _REQUIRED.get(model)
    if required:
        schema["required"] = required
    rules = _RULES.get(model)
    if rules:
        schema["x-kubernetes-validations"] = rules
    return schema


def render_crd(kind: type[ApiObject]) -> dict[str, Any]:
    """The CustomResourceDefinition of one kind of resource.nvidia.com/v1beta1."""
    plural = kind.KIND.lower() + "s"
    version: dict[str, Any] = {
        "name": nv.VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": _object_schema(kind)},
    }
    if kind in _STATUS_SUBRESOURCE:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{nv.GROUP}"},
        "spec": {
            "group": nv.GROUP,
            "names": {
                "kind": kind.KIND,
                "listKind": f"{kind.KIND}List",
                "plural": plural,
                "singular": kind.KIND.lower(),
            },
            "scope": "Namespaced",
            "versions": [version],
        },
    }


def crd_file_name(kind: type[ApiObject]) -> str:
    """File name of a CRD manifest, as controller-gen names them."""
    return f"{nv.GROUP}_{kind.KIND.lower()}s.yaml"


def crd_manifests() -> dict[str, str]:
    """File name -> YAML text of every CRD manifest."""
    import yaml  # deferred import: only the chart's generator and its test write CRDs

    header = "# Generated by `python -m dra_api_types.crds` from dra_api_types.nvidia_v1beta1.\n"
    return {
        crd_file_name(kind): header
        + "---\n"
        + yaml.safe_dump(render_crd(kind), sort_keys=False, default_flow_style=False)
        for kind in _KINDS
    }


def write_crds(directory: Path = CRD_DIRECTORY) -> list[Path]:
    """Write every CRD manifest into ``directory``; return the paths written."""
    written = []
    for name, text in crd_manifests().items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
