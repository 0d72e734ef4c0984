"""The objects of a differential scenario, built as plain manifests: the run's names, the
made-up driver's DeviceClass and ResourceSlices, claims and their requests, and the pods that
use them (which never start: no plugin serves the driver).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dra_e2e.versions import TEST_IMAGE

RUN_LABEL = "dra-e2e-differential"


Obj = dict[str, Any]


@dataclass(frozen=True)
class Names:
    """The names one scenario run uses: unique per run, since classes and slices are global."""

    scenario: str
    run_id: str
    node: str
    namespace: str
    # Every node the scenario uses, in name order (``node`` is the first).
    nodes: tuple[str, ...] = ()

    @property
    def driver(self) -> str:
        """The made-up driver (also the DeviceClass name)."""
        return f"diff-{self.scenario}-{self.run_id}.example.com"

    def slice_name(self, suffix: str) -> str:
        """A ResourceSlice name for this run."""
        return f"diff-{self.scenario}-{self.run_id}-{suffix}"


def device_class(names: Names, *, extra_cel: str | None = None, config: Any = None) -> Obj:
    """The scenario's DeviceClass: the driver's devices, optionally narrowed, with a config."""
    selectors = [{"cel": {"expression": f'device.driver == "{names.driver}"'}}]
    if extra_cel:
        selectors.append({"cel": {"expression": extra_cel}})
    spec: Obj = {"selectors": selectors}
    if config is not None:
        spec["config"] = [{"opaque": {"driver": names.driver, "parameters": config}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": names.driver},
        "spec": spec,
    }


def resource_slice(
    names: Names,
    suffix: str,
    *,
    devices: list[Obj] | None = None,
    shared_counters: list[Obj] | None = None,
    slice_count: int = 1,
    generation: int = 1,
    pool: str | None = None,
    node_selection: Obj | None = None,
    node: str | None = None,
) -> Obj:
    """A slice in the pool named after the node (default), on that node (default: the
    scenario's first node).

    ``node_selection`` replaces ``nodeName`` (``{"allNodes": True}``, ``{"nodeSelector":
    ...}`` or ``{"perDeviceNodeSelection": True}``).
    """
    node = node or names.node
    spec: Obj = {
        "driver": names.driver,
        "pool": {
            "name": pool or node,
            "generation": generation,
            "resourceSliceCount": slice_count,
        },
    }
    spec.update(node_selection if node_selection is not None else {"nodeName": node})
    if devices is not None:
        spec["devices"] = devices
    if shared_counters is not None:
        spec["sharedCounters"] = shared_counters
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": names.slice_name(suffix)},
        "spec": spec,
    }


def attributes(**values: object) -> Obj:
    """Device attributes in v1 form, typed by the Python value (str starting 'v' = version)."""
    out: Obj = {}
    for name, value in values.items():
        if isinstance(value, bool):
            out[name] = {"bool": value}
        elif isinstance(value, int):
            out[name] = {"int": value}
        elif isinstance(value, str) and value.startswith("v"):
            out[name] = {"version": value[1:]}
        else:
            out[name] = {"string": value}
    return out


def dev(name: str, *, memory: str | None = None, **values: object) -> Obj:
    """A device with attributes (and memory capacity)."""
    out: Obj = {"name": name, "attributes": attributes(**values)}
    if memory is not None:
        out["capacity"] = {"memory": {"value": memory}}
    return out


def attr(n: Names, name: str) -> str:
    """A CEL reference to one of the driver's attributes."""
    return f'device.attributes["{n.driver}"].{name}'


def claim(names: Names, name: str, requests: list[Obj], **devices: Any) -> Obj:
    """A ResourceClaim; ``devices`` adds ``constraints``/``config`` next to the requests."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": names.namespace},
        "spec": {"devices": {"requests": requests, **devices}},
    }


def exactly(names: Names, name: str, *, selectors: tuple[str, ...] = (), **extra: Any) -> Obj:
    """A request for devices of the scenario's class (count, allocationMode... in ``extra``)."""
    body: Obj = {"deviceClassName": names.driver, **extra}
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": body}


def pod_manifest(names: Names, pod: str, claims: list[str], extra: Obj | None = None) -> Obj:
    """A pod using the claims; it never starts, no plugin serves the driver.

    ``extra`` adds pod spec fields (nodeSelector, affinity, tolerations).
    """
    manifest: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod,
            "namespace": names.namespace,
            "labels": {RUN_LABEL: names.run_id},
        },
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": TEST_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sleep", "3600"],
                    "resources": {"claims": [{"name": f"c{i}"} for i in range(len(claims))]},
                }
            ],
            "resourceClaims": [
                {"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)
            ],
        },
    }
    manifest["spec"].update(extra or {})
    return manifest
