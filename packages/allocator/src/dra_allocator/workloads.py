"""The pods a workload's controller would create, offline: Deployments, ReplicaSets,
StatefulSets, Jobs and CronJobs, one pod per replica from ``spec.template`` (pure).

Names follow the controllers' patterns with the random parts made deterministic (derived
from the workload's namespace, kind and name, see :func:`stable_suffix`), so that the same
input always yields the same pods: a StatefulSet's ``<name>-<ordinal>`` (exact), a
Deployment's ``<name>-<10 chars>-<5 chars>`` (its ReplicaSet's ``pod-template-hash``, then the
pod's suffix), a ReplicaSet's or Job's ``<name>-<5 chars>``, a CronJob's Job
``<name>-<8 digits>`` and its pods. Replicas: ``spec.replicas`` (default 1); a Job runs
``parallelism`` pods (default 1) but no more than ``completions``; a suspended Job or
CronJob none.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from typing import Any

from dra_api_types import Pod

from .errors import AllocationError
from .pods import read_pod

RawObject = Mapping[str, Any]
WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "Job", "CronJob")
#: The characters the API server's generateName uses (k8s.io/apimachinery util/rand).
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def stable_suffix(seed: str, length: int = 5, alphabet: str = NAME_ALPHABET) -> str:
    """``length`` characters of ``alphabet`` derived from ``seed`` (the same seed, the same
    suffix), standing in for the random ones the API server would draw."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:length])


def is_workload(data: object) -> bool:
    """Whether a raw object is one of the :data:`WORKLOAD_KINDS` (``apps/v1``, ``batch/v1``)."""
    return (
        isinstance(data, Mapping)
        and data.get("kind") in WORKLOAD_KINDS
        and data.get("apiVersion") in ("apps/v1", "batch/v1")
    )


def _count(value: Any, *, ref: str, field: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AllocationError(
            f"must be a non-negative integer, not {value!r}", object_ref=ref, field=field
        )
    return value


def _pod(
    template: Any, *, name: str, namespace: str, owner: tuple[str, str], ref: str, field: str
) -> Pod:
    if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
        raise AllocationError("a pod template needs a spec", object_ref=ref, field=field)
    meta = template.get("metadata") or {}
    # The workload is read as JSON (its kinds are not modelled); its pods are parsed here, once.
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(meta.get("labels") or {}),
            "ownerReferences": [{"kind": owner[0], "name": owner[1], "controller": True}],
        },
        "spec": copy.deepcopy(dict(template["spec"])),
    }
    return read_pod(body, where=ref, field=field)


def workload_pods(workload: RawObject) -> list[Pod]:
    """The pods the workload's controllers would create, in ordinal order.

    Raises:
        AllocationError: a replica count or the pod template is malformed (naming the field
            in the workload).
    """
    kind = str(workload.get("kind"))
    meta = workload.get("metadata") or {}
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "default")
    ref = f"{kind} {namespace}/{name}"
    spec = workload.get("spec") or {}
    if kind == "CronJob":
        if spec.get("suspend") is True:
            return []
        job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
        # The CronJob controller names a Job after its scheduled time in minutes.
        minutes = stable_suffix(f"{namespace}/CronJob/{name}", 8, "0123456789")
        return _job_pods(
            job_spec,
            name=f"{name}-{minutes}",
            namespace=namespace,
            ref=ref,
            field="spec.jobTemplate.spec",
        )
    if kind == "Job":
        return _job_pods(spec, name=name, namespace=namespace, ref=ref, field="spec")
    replicas = _count(spec.get("replicas"), ref=ref, field="spec.replicas", default=1)
    template = spec.get("template")
    if kind == "StatefulSet":
        names = [f"{name}-{i}" for i in range(replicas)]
        owner = ("StatefulSet", name)
    else:
        base = name
        if kind == "Deployment":
            base = f"{name}-{stable_suffix(f'{namespace}/Deployment/{name}', 10)}"
        names = [f"{base}-{stable_suffix(f'{namespace}/{base}/{i}')}" for i in range(replicas)]
        owner = ("ReplicaSet", base)
    return [
        _pod(template, name=n, namespace=namespace, owner=owner, ref=ref, field="spec.template")
        for n in names
    ]


def _job_pods(spec: RawObject, *, name: str, namespace: str, ref: str, field: str) -> list[Pod]:
    if spec.get("suspend") is True:
        return []
    parallel = _count(spec.get("parallelism"), ref=ref, field=f"{field}.parallelism", default=1)
    completions = spec.get("completions")
    if completions is not None:
        done = _count(completions, ref=ref, field=f"{field}.completions", default=1)
        parallel = min(parallel, done)
    return [
        _pod(
            spec.get("template"),
            name=f"{name}-{stable_suffix(f'{namespace}/{name}/{i}')}",
            namespace=namespace,
            owner=("Job", name),
            ref=ref,
            field=f"{field}.template",
        )
        for i in range(parallel)
    ]
