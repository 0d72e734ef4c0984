"""Feature gates from ``kubectl dra``'s ``--features`` and ``--kube-version`` flags.

``allocate`` and ``explain`` take the allocator's gates (:class:`Features`); ``validate``
takes the API server's CEL environment, shaped by two gates of its own.
"""

from __future__ import annotations

from dataclasses import replace

from dra_allocator.errors import AllocationError
from dra_allocator.features import LATEST_KUBE_MINOR, Features, parse_kube_version
from dra_cel.environment import CEL_GATES, Environment, release_gates

__all__ = ["cel_environment", "features_from_flags"]


def features_from_flags(spec: str | None, kube_version: str | None = None) -> Features:
    """The allocator's gates from ``--features`` and ``--kube-version`` (default: all on)."""
    features = Features() if spec is None else Features.parse(spec)
    if kube_version is not None:
        features = replace(features, kube_minor=parse_kube_version(kube_version))
    return features


def cel_environment(spec: str | None, kube_version: str | None) -> Environment:
    """The API server's CEL environment for ``validate``: its two gates from ``--features``
    (the allocator's gate names are accepted too), else the release's defaults."""
    minor = LATEST_KUBE_MINOR if kube_version is None else parse_kube_version(kube_version)
    defaults = release_gates(minor)
    if spec is None:
        return Environment(**defaults)
    gates: dict[str, bool] = {}
    rest: list[str] = []
    for raw in spec.split(","):
        name, _, value = raw.strip().partition("=")
        if name in CEL_GATES:
            if CEL_GATES[name] not in defaults:
                raise AllocationError(
                    f"feature gate {name} does not exist in Kubernetes 1.{minor}",
                    field="--features",
                )
            gates[CEL_GATES[name]] = (value.strip().lower() or "true") == "true"
        else:
            rest.append(raw)
    features = Features.parse(",".join(rest))  # refuses unknown gates
    every = any(raw.strip() == "all" for raw in rest)
    return Environment(
        consumable_capacity=gates.get("consumable_capacity", features.consumable_capacity),
        list_type_attributes=gates.get(
            "list_type_attributes", every and "list_type_attributes" in defaults
        ),
    )
