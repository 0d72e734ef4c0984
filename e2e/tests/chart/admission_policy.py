"""Run a rendered ValidatingAdmissionPolicy over a sample admission request, offline.

What the API server does with one policy and a request, as far as this chart's policies need:
the resource rules (group, resource, operation), the ``matchConditions`` (all must hold, or the
policy does not apply), the ``variables`` (computed when first read, as the API server does), and
the ``validations`` in order (a false one denies with its ``message`` or ``messageExpression``).
An expression error propagates (``NoSuchKey``): under ``failurePolicy: Fail`` it denies too.
Expressions are evaluated by :mod:`admission_cel`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from admission_cel import evaluate

__all__ = ["Verdict", "review", "service_account_request"]


@dataclass(frozen=True)
class Verdict:
    """The policy's answer: not applied, allowed, or denied with a message."""

    applies: bool
    denied: str | None = None

    @property
    def allowed(self) -> bool:
        """Whether the request passes this policy (also when it does not apply)."""
        return self.denied is None


class _Variables(Mapping[str, Any]):
    """The policy's ``variables``, each evaluated when first read and then kept."""

    def __init__(self, spec: list[dict[str, str]], env: dict[str, Any]) -> None:
        self._expressions = {v["name"]: v["expression"] for v in spec}
        self._values: dict[str, Any] = {}
        self._env = env

    def __getitem__(self, name: str) -> Any:
        if name not in self._values:
            self._values[name] = evaluate(self._expressions[name], self._env)
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._expressions)

    def __len__(self) -> int:
        return len(self._expressions)


def _rule_matches(policy: Mapping[str, Any], request: Mapping[str, Any]) -> bool:
    kind = request["resource"]
    return any(
        kind["group"] in rule["apiGroups"]
        and kind["resource"] in rule["resources"]
        and request["operation"] in rule["operations"]
        for rule in policy["spec"]["matchConstraints"]["resourceRules"]
    )


def review(
    policy: Mapping[str, Any],
    request: Mapping[str, Any],
    *,
    obj: Mapping[str, Any] | None,
    old: Mapping[str, Any] | None,
) -> Verdict:
    """The policy's verdict on ``request`` writing ``obj`` over ``old`` (None where the
    operation has none: CREATE has no old object, DELETE no new one)."""
    if not _rule_matches(policy, request):
        return Verdict(applies=False)
    env: dict[str, Any] = {"request": request, "object": obj, "oldObject": old}
    env["variables"] = _Variables(policy["spec"].get("variables", []), env)
    for condition in policy["spec"].get("matchConditions", []):
        if not evaluate(condition["expression"], env):
            return Verdict(applies=False)
    for validation in policy["spec"]["validations"]:
        if evaluate(validation["expression"], env):
            continue
        if "messageExpression" in validation:
            return Verdict(applies=True, denied=str(evaluate(validation["messageExpression"], env)))
        return Verdict(applies=True, denied=" ".join(str(validation["message"]).split()))
    return Verdict(applies=True)


def service_account_request(
    *,
    namespace: str,
    account: str,
    node: str | None,
    operation: str,
    group: str,
    resource: str,
) -> dict[str, Any]:
    """An admission request of a service account; ``node``: the node its pod-bound token names
    (None: a token bound to no pod, whose user has no ``extra``)."""
    user: dict[str, Any] = {"username": f"system:serviceaccount:{namespace}:{account}"}
    if node is not None:
        user["extra"] = {"authentication.kubernetes.io/node-name": [node]}
    return {
        "operation": operation,
        "resource": {"group": group, "resource": resource},
        "userInfo": user,
    }
