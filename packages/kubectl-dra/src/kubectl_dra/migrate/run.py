"""``kubectl dra migrate`` over a set of documents: every decision noted, all or nothing."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_allocator.inputs import Document, object_label
from dra_api_types.beta_to_v1 import convert_to_v1, is_convertible_beta
from dra_api_types.errors import ValidationError
from dra_api_types.legacy import (
    LegacyResourceClaim,
    LegacyResourceClaimTemplate,
    LegacyResourceClass,
    NvidiaGpuConfig,
    legacy_kind,
    parse_legacy,
    pod_claims_are_legacy,
)

from .claims import convert_claim, convert_claim_template
from .classes import V1, config_key, convert_class, convert_unreferenced_config
from .errors import MigrationError, MissingConfigError, Note
from .pods import (
    CHART_EXTENDED_RESOURCES,
    extended_requests,
    fix_claim_references,
    keep_extended_notes,
    pod_spec_of,
    to_claims,
)


@dataclass(slots=True)
class Migration:
    """The migrated objects (in input order), the notes, and the errors (then no objects)."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    errors: list[tuple[str, MigrationError]] = field(default_factory=list)


def _legacy_model(doc: Document) -> Any:
    try:
        return parse_legacy(doc.data)
    except ValidationError as exc:
        raise MigrationError(
            exc.message, object_ref=object_label(doc.data), field=exc.path
        ) from exc


def _extended_mapping(docs: Sequence[Document]) -> dict[str, str]:
    """Extended resource name -> DeviceClass: the chart's, then the input's classes."""
    mapping = dict(CHART_EXTENDED_RESOURCES)
    for doc in docs:
        data = doc.data
        if (
            isinstance(data, Mapping)
            and data.get("kind") == "DeviceClass"
            and str(data.get("apiVersion", "")).startswith("resource.k8s.io/")
        ):
            name = (data.get("spec") or {}).get("extendedResourceName")
            if isinstance(name, str) and name:
                mapping[name] = str((data.get("metadata") or {}).get("name", ""))
    return mapping


def _config_keys(data: Mapping[str, Any]) -> set[tuple[str, str]]:
    """The keys an NvidiaGPUConfig may be referenced by (with and without its namespace)."""
    meta = data.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = str(meta.get("name") or "")
    namespace = meta.get("namespace")
    return {config_key(name, str(namespace) if namespace else None), config_key(name, None)}


def _used_configs(docs: Sequence[Document]) -> set[str]:
    """Names of NvidiaGPUConfigs some ResourceClass or claim references."""
    used: set[str] = set()
    for doc in docs:
        if not isinstance(doc.data, Mapping) or legacy_kind(doc.data) is None:
            continue
        spec = doc.data.get("spec") or {}
        if doc.data.get("kind") == "ResourceClaimTemplate":
            spec = spec.get("spec") or {}
        for holder in (doc.data, spec):
            ref = holder.get("parametersRef") if isinstance(holder, Mapping) else None
            if isinstance(ref, Mapping) and ref.get("name"):
                used.add(str(ref["name"]))
    return used


def migrate_documents(docs: Sequence[Document], *, claims: bool = False) -> Migration:
    """Migrate every document; with ``claims`` device-plugin requests become claims.

    Errors are collected per object; if there are any, no object is returned, so that
    nothing is half-converted.
    """
    result = Migration()
    configs: dict[tuple[str, str], NvidiaGpuConfig] = {}
    # Configs in the input that cannot be read: their own error says why, so the objects
    # referencing them are not also told that they are missing.
    unreadable: set[tuple[str, str]] = set()
    for doc in docs:
        if isinstance(doc.data, Mapping) and legacy_kind(doc.data) == "NvidiaGPUConfig":
            try:
                config = _legacy_model(doc)
            except MigrationError as exc:
                result.errors.append((doc.where, exc))
                unreadable |= _config_keys(doc.data)
                continue
            configs[config_key(config.metadata.name or "", config.metadata.namespace)] = config
    used = _used_configs(docs)
    mapping = _extended_mapping(docs)
    known_classes = frozenset(
        str((d.data.get("metadata") or {}).get("name", ""))
        for d in docs
        if isinstance(d.data, Mapping) and d.data.get("kind") in ("DeviceClass", "ResourceClass")
    ) | frozenset(mapping.values())
    failed = {where for where, _ in result.errors}
    for doc in docs:
        if doc.where in failed:
            continue
        try:
            objects, notes = _migrate_one(
                doc, configs, used=used, mapping=mapping, known_classes=known_classes, claims=claims
            )
        except MissingConfigError as exc:
            if exc.key not in unreadable and ("", exc.key[1]) not in unreadable:
                result.errors.append((doc.where, exc))
            continue
        except MigrationError as exc:
            result.errors.append((doc.where, exc))
            continue
        result.objects.extend(objects)
        label = object_label(doc.data)
        result.notes.extend(Note(doc.where, label, n) for n in notes)
    if result.errors:
        result.objects = []
    return result


def _migrate_one(
    doc: Document,
    configs: Mapping[tuple[str, str], NvidiaGpuConfig],
    *,
    used: set[str],
    mapping: Mapping[str, str],
    known_classes: frozenset[str],
    claims: bool,
) -> tuple[list[dict[str, Any]], list[str]]:
    data = doc.data
    label = object_label(data)
    if not isinstance(data, Mapping):
        raise MigrationError("not an object", object_ref="document")
    kind = legacy_kind(data)
    if kind == "NvidiaGPUConfig":
        config = _legacy_model(doc)
        if config.metadata.name in used:
            return [], [
                "folded into the DeviceClass or claim that references it (no v1 object of its own)"
            ]
        converted = convert_unreferenced_config(config, ref=label)
        return [converted.device_class], converted.notes
    if kind == "ResourceClass":
        rc = _legacy_model(doc)
        assert isinstance(rc, LegacyResourceClass)
        converted = convert_class(rc, configs, ref=label)
        return [converted.device_class], converted.notes
    if kind == "ResourceClaim":
        claim = _legacy_model(doc)
        assert isinstance(claim, LegacyResourceClaim)
        obj, notes = convert_claim(claim, configs, ref=label, known_classes=known_classes)
        return [obj], notes
    if kind == "ResourceClaimTemplate":
        tmpl = _legacy_model(doc)
        assert isinstance(tmpl, LegacyResourceClaimTemplate)
        obj, notes = convert_claim_template(tmpl, configs, ref=label, known_classes=known_classes)
        return [obj], notes
    if is_convertible_beta(data):
        try:
            converted_obj = convert_to_v1(data)
        except ValidationError as exc:
            raise MigrationError(exc.message, object_ref=label, field=exc.path) from exc
        return [converted_obj], [f"{data['apiVersion']} -> {V1}"]
    found = pod_spec_of(data)
    if found is not None:
        return _migrate_workload(data, found[0], mapping, ref=label, claims=claims)
    if data.get("apiVersion") == V1:
        return [copy.deepcopy(dict(data))], [f"already {V1}: unchanged"]
    return [copy.deepcopy(dict(data))], [
        "nothing to migrate in this kind: passed through unchanged"
    ]


def _migrate_workload(
    data: Mapping[str, Any],
    path: str,
    mapping: Mapping[str, str],
    *,
    ref: str,
    claims: bool,
) -> tuple[list[dict[str, Any]], list[str]]:
    obj = copy.deepcopy(dict(data))
    found = pod_spec_of(obj)
    assert found is not None
    spec = found[1]
    notes: list[str] = []
    meta = obj.get("metadata") or {}
    if not meta.get("name") and not meta.get("generateName"):
        notes.append("has no metadata.name: add one before applying it")
    if pod_claims_are_legacy(spec):
        notes.extend(fix_claim_references(spec, ref=ref, path=path))
    requests = list(extended_requests(spec, mapping, ref=ref, path=path))
    if requests and claims:
        template, claim_notes = to_claims(obj, spec, requests, ref=ref, path=path)
        return [template, obj], [*notes, *claim_notes]
    notes.extend(keep_extended_notes(requests))
    return [obj], notes or ["nothing to migrate: unchanged"]
