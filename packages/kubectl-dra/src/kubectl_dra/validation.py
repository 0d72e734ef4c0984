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
from dataclasses import dataclass
from typing import Any

from dra_allocator.inputs import Document, object_label
from dra_api_types import COMPUTE_DOMAIN_DRIVER, GPU_DRIVER, decode_opaque_config
from dra_api_types.beta_to_v1 import convert_to_v1, is_convertible_beta
from dra_api_types.codec import parse_object
from dra_api_types.errors import ValidationError
from dra_api_types.legacy import REPLACED_BY, legacy_kind
from dra_cel import CelCompileError, compile_selector
from dra_cel.cost_estimate import MAX_SELECTOR_COST, exceeds_cost_limit
from dra_cel.environment import Environment
from dra_cel.new_expressions import new_expression_error

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


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: where, which object, which field, what."""

    where: str
    object_ref: str
    path: str
    message: str

    def __str__(self) -> str:
        field = f" {self.path}:" if self.path else ""
        return f"{self.where}: {self.object_ref}:{field} {self.message}"


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


@dataclass(slots=True)
class Validation:
    """Findings, and the objects that had nothing to check (by kind), which are not valid."""

    findings: list[Finding]
    unchecked: list[str]

    def summary(self, total: int) -> str:
        """The last line ``kubectl dra validate`` prints."""
        skipped = ""
        if self.unchecked:
            kinds = ", ".join(sorted(set(self.unchecked)))
            skipped = f", {len(self.unchecked)} not checked ({kinds}: nothing DRA to check)"
        if self.findings:
            return f"{len(self.findings)} problem(s) in {total} object(s){skipped}"
        return f"{total - len(self.unchecked)} object(s) valid{skipped}"


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
    return Finding(
        doc.where,
        object_label(data),
        _legacy_field(kind, data),
        f"{what} removed from Kubernetes; replaced by {REPLACED_BY[kind]}: run "
        f"`kubectl dra migrate -f {doc.source}`",
    )


def validate_documents(
    docs: Sequence[Document], *, compile_check: CompileCheck = check_selector
) -> Validation:
    """All findings for the documents, and which ones had nothing to check."""
    findings: list[Finding] = []
    unchecked: list[str] = []
    for doc in docs:
        data = doc.data
        if not isinstance(data, Mapping):
            findings.append(Finding(doc.where, "document", "", "not an object"))
            continue
        ref = object_label(data)
        kind = legacy_kind(data)
        if kind is not None:
            findings.append(_legacy_finding(doc, kind, data))
            continue
        try:
            if is_convertible_beta(data):
                data = convert_to_v1(data)
            if isinstance(parse_object(data, validate=True), dict):
                unchecked.append(str(data.get("kind") or "?"))
                continue
        except ValidationError as exc:
            findings.append(Finding(doc.where, ref, exc.path, exc.message))
        except (TypeError, ValueError) as exc:
            findings.append(Finding(doc.where, ref, "", str(exc)))
        for part, path, body in _parts(data):
            if part == "request":
                for sel_path, expr in _selectors(body, path):
                    problem = compile_check(expr)
                    if problem:
                        findings.append(Finding(doc.where, ref, sel_path, problem))
            else:
                findings.extend(_check_opaque(doc, ref, path, body))
    return Validation(findings, unchecked)


def _check_opaque(doc: Document, ref: str, path: str, cfg: Mapping[str, Any]) -> list[Finding]:
    opaque = cfg.get("opaque")
    if not isinstance(opaque, Mapping) or opaque.get("driver") not in NVIDIA_DRIVERS:
        return []
    params = opaque.get("parameters")
    ppath = f"{path}.opaque.parameters"
    if not isinstance(params, Mapping):
        return [Finding(doc.where, ref, ppath, "must be an object")]
    try:
        decode_opaque_config(params, validate=True)
    except ValidationError as exc:
        sub = f"{ppath}.{exc.path}" if exc.path else ppath
        return [Finding(doc.where, ref, sub, exc.message)]
    return []
