"""``kubectl dra validate``: API schema, CEL compilation and our opaque configs.

Every problem is reported with the document, the object and the field path; checking goes
on after a problem so that one run lists them all. Classic DRA objects (removed from
Kubernetes) are problems that name what replaced them; ``resource.k8s.io`` beta objects are
converted to v1 and checked like v1. Objects of kinds without anything to check are counted
as not checked, never as valid.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from dra_allocator.inputs import BrokenFile, Document, object_label
from dra_api_types import COMPUTE_DOMAIN_DRIVER, GPU_DRIVER, ApiObject, decode_opaque_config
from dra_api_types.beta_to_v1 import convert_to_v1, is_convertible_beta
from dra_api_types.codec import parse_object
from dra_api_types.errors import ValidationError
from dra_api_types.legacy import REPLACED_BY, legacy_kind
from dra_api_types.strict import duplicate_field, unknown_fields
from dra_api_types.validation import validation_errors
from dra_cel import CelCompileError, compile_selector
from dra_cel.cost_estimate import MAX_SELECTOR_COST, exceeds_cost_limit
from dra_cel.environment import Environment
from dra_cel.new_expressions import new_expression_error

from .findings import Finding, Validation
from .migrate.pods import pod_spec_of
from .references import class_names as _class_names
from .references import name_warnings, pod_findings, uses_claims

NVIDIA_DRIVERS = (GPU_DRIVER, COMPUTE_DOMAIN_DRIVER)

CompileCheck = Callable[[str], str | None]

#: The API server's message for a selector over the cost limit (field.Forbidden).
TOO_COMPLEX = "Forbidden: too complex, exceeds cost limit"


def compile_error_message(expression: str, error: CelCompileError) -> str:
    """A compile error worded as the API server words it (field.Invalid with cel-go's
    first issue): ``Invalid value: "true in [1]": compilation failed: ERROR: <input>:1:6:
    found no matching overload for '@in' applied to '(bool, list(int))'``.

    cel-go adds the source line and a caret under it; findings are one line, so they end
    at the position.
    """
    where = f"<input>:{error.line}:{error.column}: " if error.line is not None else ""
    quoted = json.dumps(expression, ensure_ascii=False)
    return f"Invalid value: {quoted}: compilation failed: ERROR: {where}{error.message}"


def check_selector(expression: str, env: Environment | None = None) -> str | None:
    """What the API server says of a new CEL device selector, or None when it accepts it.

    A compile error (in the new-expressions environment of ``env``'s feature gates), or an
    estimated worst-case cost over ``CELSelectorExpressionMaxCost`` (checked only once the
    expression compiles, as upstream does).
    """
    env = env or Environment()
    # A gated declaration is an undeclared reference to the API server, whose error type
    # silences the type errors that depend on it: its error is the one reported.
    gated = new_expression_error(expression, env)
    if gated is not None:
        return compile_error_message(expression, gated)
    try:
        compile_selector(expression)
    except CelCompileError as exc:
        return compile_error_message(expression, exc)
    worst = exceeds_cost_limit(expression, env)
    if worst is not None:
        return f"{TOO_COMPLEX} (estimated worst case {worst}, limit {MAX_SELECTOR_COST})"
    return None


def _selectors(obj: Mapping[str, Any], path: str) -> Iterator[tuple[str, str]]:
    for i, sel in enumerate(obj.get("selectors") or []):
        cel = (sel or {}).get("cel") or {}
        if isinstance(cel.get("expression"), str):
            yield f"{path}.selectors[{i}].cel.expression", cel["expression"]


def _claim_spec_parts(
    spec: Mapping[str, Any], path: str
) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(kind of part, path, part) for requests/subrequests and configs of a claim spec."""
    devices = spec.get("devices") or {}
    for i, req in enumerate(devices.get("requests") or []):
        rpath = f"{path}.devices.requests[{i}]"
        if isinstance(req.get("exactly"), Mapping):
            yield "request", f"{rpath}.exactly", req["exactly"]
        for j, sub in enumerate(req.get("firstAvailable") or []):
            yield "request", f"{rpath}.firstAvailable[{j}]", sub
    for i, cfg in enumerate(devices.get("config") or []):
        yield "config", f"{path}.devices.config[{i}]", cfg


def _parts(data: Mapping[str, Any]) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    kind = data.get("kind")
    spec = data.get("spec") or {}
    if kind == "DeviceClass":
        yield "request", "spec", spec
        for i, cfg in enumerate(spec.get("config") or []):
            yield "config", f"spec.config[{i}]", cfg
    elif kind == "ResourceClaim":
        yield from _claim_spec_parts(spec, "spec")
    elif kind == "ResourceClaimTemplate":
        yield from _claim_spec_parts(spec.get("spec") or {}, "spec.spec")


def _legacy_field(kind: str, data: Mapping[str, Any]) -> str:
    """The field that makes a classic object classic, for the finding."""
    if kind in ("ResourceClass", "NvidiaGPUConfig"):
        return "kind"
    if kind == "Pod":
        spec = data.get("spec") or {}
        for i, ref in enumerate(spec.get("resourceClaims") or []):
            if isinstance(ref, Mapping) and "source" in ref:
                return f"spec.resourceClaims[{i}].source"
        for i, ctr in enumerate(spec.get("containers") or []):
            if isinstance(ctr, Mapping) and "resourceClaims" in ctr:
                return f"spec.containers[{i}].resourceClaims"
        return "spec.resourceClaims"
    spec = data.get("spec") or {}
    prefix = "spec"
    if kind == "ResourceClaimTemplate":
        spec, prefix = spec.get("spec") or {}, "spec.spec"
    key = next(k for k in ("resourceClassName", "allocationMode", "parametersRef") if k in spec)
    return f"{prefix}.{key}"


def _legacy_finding(doc: Document, kind: str, data: Mapping[str, Any]) -> Finding:
    what = (
        "classic DRA claim references (source, per-container resourceClaims) were"
        if kind == "Pod"
        else f"classic DRA ({data.get('apiVersion')} {kind}) was"
    )
    path = _legacy_field(kind, data)
    return Finding(
        doc.location(path),
        object_label(data),
        path,
        f"{what} removed from Kubernetes; replaced by {REPLACED_BY[kind]}: run "
        f"`kubectl dra migrate -f {doc.source}`",
    )


def validate_documents(
    docs: Sequence[Document],
    *,
    compile_check: CompileCheck = check_selector,
    broken: Sequence[BrokenFile] = (),
) -> Validation:
    """All findings for the documents (and the files that could not be read to the end),
    each once, and which documents had nothing to check."""
    result = Validation([], [])
    for bad in broken:
        result.add(Finding(f"{bad.source}:{bad.line}", "file", "", bad.message))
    classes = _class_names(docs)
    for doc in docs:
        data = doc.data
        if not isinstance(data, Mapping):
            result.add(Finding(doc.location(), "document", "", "not an object"))
            continue
        ref = object_label(data)
        for path, line in doc.positions.duplicates() if doc.positions else []:
            where = f"{doc.source}:{line}"
            result.add(Finding(where, ref, "", duplicate_field(path).message))
        kind = legacy_kind(data)
        if kind is not None:
            result.add(_legacy_finding(doc, kind, data))
            continue
        found = pod_spec_of(data)
        if found is not None:
            if not uses_claims(found[1]):
                result.unchecked.append(str(data.get("kind") or "?"))
            for finding in pod_findings(doc, found[0], found[1]):
                result.add(finding)
            continue
        findings = _object_findings(doc, data, compile_check, classes)
        if findings is None:
            result.unchecked.append(str(data.get("kind") or "?"))
        for finding in findings or []:
            result.add(finding)
    return result


def _object_findings(
    doc: Document,
    data: Mapping[str, Any],
    compile_check: CompileCheck,
    classes: frozenset[str],
) -> list[Finding] | None:
    """The findings of a modelled object; None for kinds with nothing to check."""
    ref = object_label(data)
    try:
        if is_convertible_beta(data):
            data = convert_to_v1(data)
        obj = parse_object(data)
    except ValidationError as exc:
        return [Finding(doc.location(exc.path), ref, exc.path, exc.message)]
    except (TypeError, ValueError) as exc:
        return [Finding(doc.location(), ref, "", str(exc))]
    if isinstance(obj, dict):
        return None
    return list(_model_findings(doc, data, obj, compile_check, classes))


def _model_findings(
    doc: Document,
    data: Mapping[str, Any],
    obj: ApiObject,
    compile_check: CompileCheck,
    classes: frozenset[str],
) -> Iterator[Finding]:
    ref = object_label(data)
    strict = unknown_fields(data)
    # A misspelt field leaves the one meant unset; "Required value" for it is not news.
    meant = {error.meant for error in strict if error.meant}
    meant |= {error.path.rpartition(".")[0] for error in strict if error.meant}
    for error in strict:
        yield Finding(doc.location(error.path), ref, "", error.message)
    for exc in validation_errors(obj):
        if not _follows_from(exc.path, meant):
            yield Finding(doc.location(exc.path), ref, exc.path, exc.message)
    for part, path, body in _parts(data):
        if part == "request":
            for sel_path, expr in _selectors(body, path):
                problem = compile_check(expr)
                if problem:
                    yield Finding(doc.location(sel_path), ref, sel_path, problem)
        else:
            yield from _check_opaque(doc, ref, path, body)
    yield from name_warnings(doc, data, classes)


def _follows_from(path: str, meant: set[str]) -> bool:
    """Whether a problem at ``path`` follows from a misspelt field: it is about the field
    meant, a part of it, or the object holding it (one of several fields required)."""
    for field in meant:
        parent = field.rpartition(".")[0]
        if path in (field, parent) or path.startswith((f"{field}.", f"{field}[")):
            return True
    return False


def _check_opaque(doc: Document, ref: str, path: str, cfg: Mapping[str, Any]) -> list[Finding]:
    opaque = cfg.get("opaque")
    if not isinstance(opaque, Mapping) or opaque.get("driver") not in NVIDIA_DRIVERS:
        return []
    params = opaque.get("parameters")
    ppath = f"{path}.opaque.parameters"
    if not isinstance(params, Mapping):
        return [Finding(doc.location(ppath), ref, ppath, "must be an object")]
    try:
        decode_opaque_config(params, validate=True)
    except ValidationError as exc:
        sub = f"{ppath}.{exc.path}" if exc.path else ppath
        return [Finding(doc.location(sub), ref, sub, exc.message)]
    return []
