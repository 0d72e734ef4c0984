"""Admission verdicts on the opaque configs of ResourceClaims and ResourceClaimTemplates.

Pure logic: an ``admission.k8s.io/v1`` AdmissionReview (as a decoded JSON mapping) in, the
AdmissionReview response out. A config whose ``opaque.driver`` is one of this project's
drivers (``gpu.nvidia.com``, ``compute-domain.nvidia.com``) must decode strictly into a
``resource.nvidia.com/v1beta1`` kind of that driver and pass the kind's own rules, before and
after the driver's defaults are filled in: what the kubelet plugin would reject at prepare
time is refused at ``kubectl apply``, with the field path of the offending value. Configs of
other drivers are not ours to judge.

As NVIDIA's webhook, the verdict follows the driver's feature gates (``dra-webhook
--feature-gates``, the same value the chart gives the plugin): a ``TimeSlicing`` sharing
strategy is refused while ``TimeSlicingSettings`` is off and ``MPS`` while ``MPSSupport`` is
off, naming the gate, before the strategy's own settings are looked at (NVIDIA checks the
strategy's gate first). The gates default to NVIDIA's defaults, both off.

The device config list has the same shape in ``resource.k8s.io`` v1, v1beta1 and v1beta2
(``spec.devices.config`` of a claim, ``spec.spec.devices.config`` of a template), so no
conversion between versions is needed to find it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from dra_api_types import ObjectRef, ValidationError, decode_opaque_config
from dra_api_types.nvidia_gates import defaults as default_gates
from dra_api_types.nvidia_v1beta1 import (
    COMPUTE_DOMAIN_DRIVER,
    GPU_DRIVER,
    MPS,
    TIME_SLICING,
    GpuConfig,
    MigDeviceConfig,
    OpaqueConfig,
)
from dra_cel.selector_names import selector_warnings

__all__ = [
    "ADMISSION_API_VERSION",
    "DEFAULT_GATES",
    "OUR_DRIVERS",
    "RESOURCE_GROUP",
    "RESOURCE_VERSIONS",
    "SHARING_GATES",
    "AdmissionReviewError",
    "ConfigProblem",
    "Verdict",
    "judge_object",
    "review",
]

ADMISSION_API_VERSION: Final = "admission.k8s.io/v1"
RESOURCE_GROUP: Final = "resource.k8s.io"
RESOURCE_VERSIONS: Final = ("v1", "v1beta1", "v1beta2")
OUR_DRIVERS: Final = (GPU_DRIVER, COMPUTE_DOMAIN_DRIVER)

#: NVIDIA's gate defaults: what ``dra-webhook`` judges by without ``--feature-gates``.
DEFAULT_GATES: Final[Mapping[str, bool]] = MappingProxyType(default_gates())
#: The feature gate each sharing strategy needs, as NVIDIA's config validation has it.
SHARING_GATES: Final[Mapping[str, str]] = MappingProxyType(
    {TIME_SLICING: "TimeSlicingSettings", MPS: "MPSSupport"}
)

#: resource (plural) -> (kind, path of the DeviceClaim inside the object).
_RESOURCES: Final = {
    "resourceclaims": ("ResourceClaim", ("spec", "devices")),
    "resourceclaimtemplates": ("ResourceClaimTemplate", ("spec", "spec", "devices")),
}


class AdmissionReviewError(ValueError):
    """The request body is not an AdmissionReview this webhook can answer.

    ``field`` names the offending field of the review (``request.uid``, ``apiVersion``...).
    """

    def __init__(self, field: str, message: str) -> None:
        """Record the field and the reason."""
        self.field = field
        self.message = message
        super().__init__(f"AdmissionReview {field}: {message}")


@dataclass(frozen=True)
class ConfigProblem:
    """One refused config: the full field path inside the object and what is wrong there."""

    path: str
    message: str

    def __str__(self) -> str:
        """``path: message``, the form kubectl users see."""
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass(frozen=True)
class Verdict:
    """Whether an object is admitted; when not, why (``problems`` or ``message``)."""

    allowed: bool
    object_ref: ObjectRef
    problems: tuple[ConfigProblem, ...] = ()
    #: Set when the object is refused for another reason than its configs.
    reason_message: str = ""
    #: AdmissionReview warnings (kubectl prints them as ``Warning: ...``), admitted or not.
    warnings: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        """The denial message shown by kubectl; empty when allowed."""
        if self.allowed:
            return ""
        if self.reason_message:
            return self.reason_message
        count = len(self.problems)
        noun = "config" if count == 1 else "configs"
        details = "; ".join(str(p) for p in self.problems)
        return f"{self.object_ref}: {count} {noun} failed to validate: {details}"

    def response(self, uid: str) -> dict[str, Any]:
        """The ``response`` of an AdmissionReview carrying this verdict."""
        body: dict[str, Any] = {"uid": uid, "allowed": self.allowed}
        if self.warnings:
            body["warnings"] = list(self.warnings)
        if not self.allowed:
            # No ``details``: kubectl prints an Invalid error that has details as "The
            # ResourceClaim "x" is invalid" plus causes, dropping the message that names the
            # webhook; without them it prints the message (as NVIDIA's webhook answers).
            body["status"] = {
                "status": "Failure",
                "code": 422 if self.problems else 400,
                "reason": "Invalid" if self.problems else "BadRequest",
                "message": self.message,
            }
        return body


def review(body: Mapping[str, Any], *, gates: Mapping[str, bool] = DEFAULT_GATES) -> dict[str, Any]:
    """Answer an AdmissionReview: the same review with ``response`` filled in.

    ``gates`` are the driver's effective feature gates (``parse_feature_gates``).

    Raises :class:`AdmissionReviewError` when ``body`` is not an ``admission.k8s.io/v1``
    AdmissionReview with a request and its uid (the server answers HTTP 400 then).
    """
    if not isinstance(body, Mapping):
        raise AdmissionReviewError("", f"expected a JSON object, got {type(body).__name__}")
    if body.get("apiVersion") != ADMISSION_API_VERSION or body.get("kind") != "AdmissionReview":
        raise AdmissionReviewError(
            "apiVersion",
            f"expected {ADMISSION_API_VERSION} AdmissionReview, "
            f"got {body.get('apiVersion')!r} {body.get('kind')!r}",
        )
    request = body.get("request")
    if not isinstance(request, Mapping):
        raise AdmissionReviewError("request", "required value")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise AdmissionReviewError("request.uid", "required value")
    verdict = _judge_request(request, gates)
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": "AdmissionReview",
        "response": verdict.response(uid),
    }


def _judge_request(request: Mapping[str, Any], gates: Mapping[str, bool]) -> Verdict:
    resource = request.get("resource") or {}
    group, version, plural = (resource.get(k, "") for k in ("group", "version", "resource"))
    obj = request.get("object")
    ref = _object_ref(obj, request, _RESOURCES.get(plural, ("", ()))[0])
    if group != RESOURCE_GROUP or version not in RESOURCE_VERSIONS or plural not in _RESOURCES:
        supported = ", ".join(f"{RESOURCE_GROUP}/{v}" for v in RESOURCE_VERSIONS)
        return Verdict(
            allowed=False,
            object_ref=ref,
            reason_message=(
                f"expected resourceclaims or resourceclaimtemplates of {supported}, "
                f"got {plural!r} of {group}/{version}"
            ),
        )
    if obj is None:
        # DELETE (or CONNECT) carries no new object: nothing to validate.
        return Verdict(allowed=True, object_ref=ref)
    if not isinstance(obj, Mapping):
        return Verdict(
            allowed=False,
            object_ref=ref,
            reason_message=f"request.object must be an object, got {type(obj).__name__}",
        )
    old = request.get("oldObject")
    unchanged = isinstance(old, Mapping) and old.get("spec") == obj.get("spec")
    if request.get("operation") == "UPDATE" and unchanged:
        # Metadata or status only (finalizers, labels): the configs were judged when they
        # were written. Refusing now would also block removing the finalizer of a claim
        # stored before the webhook existed, so it could never be deleted.
        return Verdict(allowed=True, object_ref=ref)
    return judge_object(obj, plural, object_ref=ref, gates=gates)


def judge_object(
    obj: Mapping[str, Any],
    resource: str,
    *,
    object_ref: ObjectRef | None = None,
    gates: Mapping[str, bool] = DEFAULT_GATES,
) -> Verdict:
    """Judge the opaque configs of one ResourceClaim (``resource="resourceclaims"``) or
    ResourceClaimTemplate (``"resourceclaimtemplates"``) in any served version, and warn
    about selectors naming attributes or capacities ``gpu.nvidia.com`` never publishes.
    ``gates`` are the driver's effective feature gates (the sharing gates decide).

    Raises ``KeyError`` for another resource.
    """
    kind, devices_path = _RESOURCES[resource]
    ref = object_ref or _object_ref(obj, {}, kind)
    devices: Any = obj
    for key in devices_path:
        devices = devices.get(key) if isinstance(devices, Mapping) else None
    configs = devices.get("config") if isinstance(devices, Mapping) else None
    prefix = ".".join((*devices_path, "config"))
    problems = [
        problem
        for index, config in enumerate(configs if isinstance(configs, Sequence) else ())
        for problem in _judge_config(config, f"{prefix}[{index}]", gates)
    ]
    warnings = selector_warnings(devices, ".".join(devices_path))
    return Verdict(
        allowed=not problems,
        object_ref=ref,
        problems=tuple(problems),
        warnings=tuple(warnings),
    )


def _judge_config(config: Any, path: str, gates: Mapping[str, bool]) -> list[ConfigProblem]:
    opaque = config.get("opaque") if isinstance(config, Mapping) else None
    if not isinstance(opaque, Mapping) or opaque.get("driver") not in OUR_DRIVERS:
        return []
    driver = opaque["driver"]
    params_path = f"{path}.opaque.parameters"
    parameters = opaque.get("parameters")
    if parameters is None:
        return [ConfigProblem(params_path, f"required value: configs of {driver} need parameters")]
    try:
        decoded = decode_opaque_config(parameters, validate=False)
        if driver != decoded.DRIVER:
            return [
                ConfigProblem(
                    f"{params_path}.kind",
                    f"{decoded.KIND} is a config of driver {decoded.DRIVER}, "
                    f"not of {path}.opaque.driver {driver}",
                )
            ]
        gate_problem = _sharing_gate_problem(decoded, gates)
        if gate_problem is not None:
            return [ConfigProblem(f"{params_path}.sharing.strategy", gate_problem)]
        # As NVIDIA's webhook and the plugin: defaults filled in first, then the rules.
        decoded.normalize().validate()
    except ValidationError as exc:
        located = exc.with_object(ObjectRef(), prefix=params_path)
        return [ConfigProblem(located.path, located.message)]
    return []


def _sharing_gate_problem(config: OpaqueConfig, gates: Mapping[str, bool]) -> str | None:
    """NVIDIA's refusal of a sharing strategy whose feature gate is off, in its words.

    Judged on the config as written: a GpuConfig without ``sharing`` asks for no sharing.
    """
    if not isinstance(config, GpuConfig | MigDeviceConfig) or config.sharing is None:
        return None
    strategy = config.sharing.strategy
    gate = SHARING_GATES.get(strategy)
    if gate is None or gates.get(gate, False):
        return None
    return (
        f'"{strategy}" is selected as the GPU sharing strategy, '
        f'but the "{gate}" feature gate is not enabled'
    )


def _object_ref(obj: Any, request: Mapping[str, Any], kind: str) -> ObjectRef:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    # A generateName object has no name yet; the request's name is then empty too.
    name = meta.get("name") or request.get("name") or meta.get("generateName") or ""
    namespace = meta.get("namespace") or request.get("namespace") or ""
    return ObjectRef(kind=kind, name=str(name), namespace=str(namespace))
