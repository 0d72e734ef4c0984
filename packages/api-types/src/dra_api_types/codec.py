"""Reading and writing API objects: dispatch by apiVersion/kind, multi-document YAML/JSON.

Documents of groups this package does not model (``v1`` Pods, ``apps/v1`` Deployments,
``resource.k8s.io/v1beta1`` objects, or files without apiVersion such as a mig-parted config)
pass through as plain dicts, so a whole manifest file can be loaded and dumped back.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import nvidia_v1beta1, resource_v1
from ._model import ApiModel, ApiObject, dump_value
from .errors import ObjectRef, UnknownKindError, ValidationError
from .spelling import did_you_mean

if TYPE_CHECKING:
    import yaml

__all__ = [
    "KubeObject",
    "dump_all",
    "load_all",
    "load_documents",
    "parse_object",
    "registered_kinds",
    "to_plain",
]

#: What :func:`parse_object` returns: a typed model, or the mapping itself for kinds this
#: package does not model.
KubeObject = ApiObject | dict[str, Any]


@functools.cache
def _kinds() -> dict[tuple[str, str], type[ApiObject]]:
    kinds: dict[tuple[str, str], type[ApiObject]] = {}
    for module in (resource_v1, nvidia_v1beta1):
        for kind, cls in module.KINDS.items():
            kinds[(cls.API_VERSION, kind)] = cls
    return kinds


def registered_kinds() -> dict[tuple[str, str], type[ApiObject]]:
    """Every (apiVersion, kind) this package models, with its class."""
    return dict(_kinds())


@functools.cache
def _owned_api_versions() -> frozenset[str]:
    return frozenset(api_version for api_version, _ in _kinds())


def parse_object(data: Mapping[str, Any], *, validate: bool = False) -> KubeObject:
    """Turn one API object (a mapping) into its model, dispatching on apiVersion and kind.

    Kinds of groups this package does not own are returned as a plain ``dict`` copy. An
    unknown kind in an owned group version raises :class:`UnknownKindError`. With
    ``validate=True`` the kube-apiserver's validation rules are applied too.
    """
    if not isinstance(data, Mapping):
        raise ValidationError("", f"expected a mapping, got {type(data).__name__}")
    api_version = data.get("apiVersion")
    kind = data.get("kind")
    cls = _kinds().get((str(api_version), str(kind)))
    if cls is None:
        if api_version in _owned_api_versions():
            kinds = [k for v, k in _kinds() if v == api_version]
            hint = did_you_mean(str(kind), kinds)
            raise UnknownKindError(
                "kind",
                f"unknown kind {kind!r} in {api_version}{hint}",
                object_ref=ObjectRef(kind=str(kind or ""), api_version=str(api_version)),
            )
        return dict(data)
    return cls.from_dict(data, validate=validate)


def _read_text(text_or_path: str | os.PathLike[str]) -> str:
    if isinstance(text_or_path, os.PathLike):
        return Path(text_or_path).read_text(encoding="utf-8")
    if "\n" not in text_or_path and len(text_or_path) < 4096:
        candidate = Path(text_or_path)
        try:
            if candidate.is_file():
                return candidate.read_text(encoding="utf-8")
        except OSError:
            pass
    return text_or_path


@functools.cache
def _yaml_loader() -> type[yaml.SafeLoader]:
    """The YAML loader, built on first use: a process that reads only JSON (a kubelet plugin
    in its pod, the compute-domain controller) does not load PyYAML (0.9 MB, docs/scale.md)."""
    import yaml  # deferred import: JSON-only processes do not pay for PyYAML

    class Loader(yaml.SafeLoader):
        """Keeps timestamps as strings (the API's JSON has no date type)."""

    Loader.yaml_implicit_resolvers = {
        key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    return Loader


def load_documents(text_or_path: str | os.PathLike[str]) -> list[Any]:
    """The raw documents of a multi-document YAML or JSON text or file (empty ones dropped)."""
    text = _read_text(text_or_path)
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError:
            pass
        else:
            return loaded if isinstance(loaded, list) else [loaded]
    import yaml  # deferred import: see _yaml_loader

    try:
        return [doc for doc in yaml.load_all(text, Loader=_yaml_loader()) if doc is not None]
    except yaml.YAMLError as exc:
        raise ValidationError("", f"not valid YAML or JSON: {exc}") from None


def load_all(text_or_path: str | os.PathLike[str], *, validate: bool = True) -> list[KubeObject]:
    """Load every object of a YAML (multi-document) or JSON text or file.

    ``text_or_path`` is a :class:`os.PathLike`, a path string naming an existing file, or the
    text itself. A ``kind: List`` document is expanded into its items. Objects of kinds this
    package models become typed models; others stay plain dicts. With ``validate=True`` (the
    default) the first invalid object raises :class:`~dra_api_types.errors.ValidationError`.
    """
    objects: list[KubeObject] = []
    for index, doc in enumerate(load_documents(text_or_path)):
        if not isinstance(doc, Mapping):
            raise ValidationError(
                f"[{index}]", f"document must be a mapping, got {type(doc).__name__}"
            )
        if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            items: Iterable[Any] = doc["items"]
        else:
            items = [doc]
        for item in items:
            if not isinstance(item, Mapping):
                raise ValidationError("items", "list items must be mappings")
            objects.append(parse_object(item, validate=validate))
    return objects


def to_plain(obj: ApiModel | Mapping[str, Any]) -> dict[str, Any]:
    """The API JSON of a model, or a plain copy of a mapping."""
    if isinstance(obj, ApiModel):
        return obj.to_dict()
    plain = dump_value(obj)
    assert isinstance(plain, dict)
    return plain


@functools.cache
def _yaml_dumper() -> type[yaml.SafeDumper]:
    """Block-style YAML, multi-line strings (CEL expressions) as literal blocks; built on first
    use, as :func:`_yaml_loader` is."""
    import yaml  # deferred import: see _yaml_loader

    class Dumper(yaml.SafeDumper):
        """The project's YAML style."""

    def str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        if "\n" in value:
            return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
        return dumper.represent_scalar("tag:yaml.org,2002:str", value)

    Dumper.add_representer(str, str_representer)
    return Dumper


def dump_all(objects: Iterable[ApiModel | Mapping[str, Any]]) -> str:
    """Write objects as multi-document YAML (``---`` separated), API field names."""
    import yaml  # deferred import: see _yaml_loader

    return yaml.dump_all(
        [to_plain(o) for o in objects],
        Dumper=_yaml_dumper(),
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        explicit_start=True,
    )
