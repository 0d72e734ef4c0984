"""Pods' ``spec.priority`` from PriorityClasses, as the API server's Priority admission
plugin sets it when a pod is created (pure).

Manifests name a class (``spec.priorityClassName``, also in workloads' pod templates) and
leave ``spec.priority`` to admission; the scheduler's queue orders pods by that integer.
Offline, the PriorityClasses among the input stand in for the cluster's:

- a pod that already has ``spec.priority`` (read from a cluster) keeps it;
- ``spec.priorityClassName`` names a class of the input: its ``value``;
- it names ``system-node-critical`` or ``system-cluster-critical``: the values the API
  server builds in;
- it names a class the input lacks: the API server would refuse the pod (``no PriorityClass
  with name X was found``); offline the pod is kept with priority 0 and a note names the
  pod, the field and the class, so the answer is not silently in the wrong order;
- no class named: the input's ``globalDefault`` class, else 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_api_types.core_v1 import Pod

from .errors import AllocationError

RawObject = Mapping[str, Any]
#: The classes every API server has (k8s.io/kubernetes pkg/apis/scheduling).
SYSTEM_PRIORITY_CLASSES = {
    "system-node-critical": 2000001000,
    "system-cluster-critical": 2000000000,
}
#: What admission gives a pod without a class when no class is the global default.
DEFAULT_PRIORITY = 0


def is_priority_class(data: object) -> bool:
    """Whether a raw document is a ``scheduling.k8s.io`` PriorityClass."""
    return (
        isinstance(data, Mapping)
        and data.get("kind") == "PriorityClass"
        and str(data.get("apiVersion", "")).startswith("scheduling.k8s.io/")
    )


@dataclass(frozen=True, slots=True)
class PriorityClasses:
    """The input's PriorityClasses: name -> value, and the global default's name."""

    values: Mapping[str, int] = field(default_factory=dict)
    global_default: str | None = None

    @classmethod
    def from_objects(cls, objects: Sequence[RawObject]) -> PriorityClasses:
        """Read the classes.

        Raises:
            AllocationError: a class without a name or an integer ``value``, or a second
                ``globalDefault`` class (the API server refuses both).
        """
        values: dict[str, int] = dict(SYSTEM_PRIORITY_CLASSES)
        default: str | None = None
        for obj in objects:
            name = (obj.get("metadata") or {}).get("name")
            if not isinstance(name, str) or not name:
                raise AllocationError(
                    "Required value", object_ref="PriorityClass", field="metadata.name"
                )
            ref = f"PriorityClass {name}"
            value = obj.get("value")
            if isinstance(value, bool) or not isinstance(value, int):
                raise AllocationError(
                    f"must be an integer, not {value!r}", object_ref=ref, field="value"
                )
            values[name] = value
            if obj.get("globalDefault") is True:
                if default is not None and default != name:
                    raise AllocationError(
                        f"PriorityClass {default} is already the global default",
                        object_ref=ref,
                        field="globalDefault",
                    )
                default = name
        return cls(values=values, global_default=default)


@dataclass(slots=True)
class PodPriorities:
    """The pods with ``spec.priority`` set, and a note per pod whose class is missing."""

    pods: list[Pod] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def resolve_priorities(pods: Sequence[Pod], classes: PriorityClasses) -> PodPriorities:
    """Each pod with the ``spec.priority`` admission would give it (see the module
    docstring); pods are copied where changed, never modified."""
    out = PodPriorities()
    for pod in pods:
        spec = pod.spec
        if spec.priority is not None:
            out.pods.append(pod)
            continue
        name = spec.priority_class_name or classes.global_default
        if not name:
            # Admission's 0; the queue reads an absent priority as 0 as well.
            out.pods.append(pod)
            continue
        if name in classes.values:
            value = classes.values[name]
        else:
            value = DEFAULT_PRIORITY
            out.notes.append(
                f"Pod {pod.key}: spec.priorityClassName: PriorityClass {name} is not in "
                f"the input (the API server refuses a pod naming a missing class); "
                f"scheduled with priority {DEFAULT_PRIORITY}, pass the PriorityClass with -f"
            )
        out.pods.append(
            pod.model_copy(update={"spec": spec.model_copy(update={"priority": value})})
        )
    return out
