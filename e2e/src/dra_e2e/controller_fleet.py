"""The API objects a 1,000-node scale run leaves in the allocation controller's caches, built
without a cluster (for ``e2e/bench/bench_controller_memory.py``).

What the API server would hold after the scale benchmark's creation phase (``bench_scale``):

- Nodes as kwok runs them (:func:`~dra_e2e.kwok.kwok_node`, plus the status kwok writes);
- ResourceSlices as the GPU plugin's own code builds them for each simulated node
  (:func:`~dra_e2e.kwok_slices.node_slice_source`), and on GB200 nodes the compute-domain
  plugin's (``compute_domain_slices``), with the metadata the API server adds;
- the scale workload's pods (:mod:`dra_e2e.scale_workload`, :mod:`dra_e2e.scale_domains`), as
  the ReplicaSet controller, admission and the scheduler leave them, bound to nodes;
- one ResourceClaim per pod claim, made from the pod's template (its spec is the template's),
  allocated on a free device of the pod's node and reserved for the pod, as the
  resourceclaim controller and the scheduler write them.

Pure: numbers in, objects out; the same arguments give the same objects.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dra_computedomain.plugin_driver import compute_domain_slices

from dra_e2e.kwok import kwok_node, node_name
from dra_e2e.kwok_slices import FLEET_LABEL, GB200, fleet_of, node_slice_source, plugin_settings
from dra_e2e.scale_domains import (
    CHANNEL_DRIVER,
    channel_device_class,
    domain_count,
    domain_deployment,
    domain_name,
    stand_in_channel_template,
)
from dra_e2e.scale_workload import (
    APP_LABEL,
    DRIVER,
    TEMPLATES,
    claim_template,
    deployment,
    device_classes,
    replicas,
)

RESOURCE_API = "resource.k8s.io/v1"
NAMESPACE = "dra-scale"
_STAMP = "2026-12-04T10:00:00Z"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@dataclass
class Fleet:
    """Every object by kind, in the order an informer would list them."""

    objects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def count(self, kind: str) -> int:
        """How many objects of ``kind``."""
        return len(self.objects.get(kind, []))


class _Server:
    """What the API server adds to an object it stores: uid, resourceVersion, timestamps, a
    name for ``generateName``."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.version = 1000

    def suffix(self, n: int = 5) -> str:
        return "".join(self.rng.choice(_ALPHABET) for _ in range(n))

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def store(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        if "name" not in meta and "generateName" in meta:
            meta["name"] = meta["generateName"] + self.suffix()
        self.version += 1
        meta.setdefault("uid", self.uid())
        meta["resourceVersion"] = str(self.version)
        meta.setdefault("creationTimestamp", _STAMP)
        meta.setdefault("generation", 1)
        return obj


def _node_status(name: str, index: int, capacity: dict[str, str]) -> dict[str, Any]:
    conditions = [
        ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID"),
        ("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"),
    ]
    return {
        "capacity": capacity,
        "allocatable": capacity,
        "phase": "Running",
        "conditions": [
            {
                "type": t,
                "status": s,
                "reason": r,
                "message": m,
                "lastHeartbeatTime": _STAMP,
                "lastTransitionTime": _STAMP,
            }
            for t, s, r, m in conditions
        ],
        "addresses": [
            {
                "type": "InternalIP",
                "address": f"10.{index // 65536}.{index // 256 % 256}.{index % 256}",
            },
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "architecture": "amd64",
            "bootID": "",
            "containerRuntimeVersion": "kwok-v0.7.0",
            "kernelVersion": "",
            "kubeProxyVersion": "kwok-v0.7.0",
            "kubeletVersion": "kwok-v0.7.0",
            "machineID": "",
            "operatingSystem": "linux",
            "osImage": "",
            "systemUUID": "",
        },
    }


@dataclass
class _Device:
    node: str
    driver: str
    device: str


def _free_devices(slices: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Device names of a node's slices by their ``type`` attribute (gpu, mig, channel...)."""
    by_type: dict[str, list[str]] = {}
    for s in slices:
        for dev in s["spec"].get("devices") or []:
            kind = (dev.get("attributes", {}).get("type") or {}).get("string", "")
            profile = (dev.get("attributes", {}).get("profile") or {}).get("string", "")
            key = f"mig-{profile}" if kind == "mig" else kind
            by_type.setdefault(key, []).append(dev["name"])
    return by_type


def _allocation(claim_spec: dict[str, Any], request: str, dev: _Device) -> dict[str, Any]:
    config = [
        {"source": "FromClaim", "requests": c.get("requests") or [], "opaque": c["opaque"]}
        for c in claim_spec["devices"].get("config") or []
    ]
    devices: dict[str, Any] = {
        "results": [
            {"request": request, "driver": dev.driver, "pool": dev.node, "device": dev.device}
        ]
    }
    if config:
        devices["config"] = config
    return {
        "devices": devices,
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [dev.node]}]}
            ]
        },
        "allocationTimestamp": _STAMP,
    }


def _pod(
    server: _Server,
    template: dict[str, Any],
    owner: str,
    node: str,
    claim_names: dict[str, str],
) -> dict[str, Any]:
    spec = template["spec"]["template"]["spec"]
    labels = dict(template["spec"]["template"]["metadata"]["labels"])
    labels["pod-template-hash"] = owner.rsplit("-", 1)[-1]
    containers = [
        {
            **c,
            "imagePullPolicy": "IfNotPresent",
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "volumeMounts": [
                {
                    "name": "kube-api-access",
                    "readOnly": True,
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                }
            ],
        }
        for c in spec["containers"]
    ]
    tolerations = [
        *spec["tolerations"],
        *(
            {
                "key": f"node.kubernetes.io/{t}",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }
            for t in ("not-ready", "unreachable")
        ),
    ]
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": _STAMP}
        for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
    ] + [
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": _STAMP,
        }
    ]
    return server.store(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{owner}-",
                "namespace": NAMESPACE,
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": owner,
                        "uid": server.uid(),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                **spec,
                "containers": containers,
                "tolerations": tolerations,
                "nodeName": node,
                "schedulerName": "default-scheduler",
                "restartPolicy": "Always",
                "dnsPolicy": "ClusterFirst",
                "serviceAccountName": "default",
                "serviceAccount": "default",
                "securityContext": {},
                "enableServiceLinks": True,
                "preemptionPolicy": "PreemptLowerPriority",
                "priority": 0,
                "volumes": [{"name": "kube-api-access", "projected": {"sources": []}}],
            },
            "status": {
                "phase": "Running",
                "conditions": conditions,
                "hostIP": "10.0.0.1",
                "podIP": "10.128.0.10",
                "startTime": _STAMP,
                "qosClass": "BestEffort",
                "resourceClaimStatuses": [
                    {"name": n, "resourceClaimName": c} for n, c in claim_names.items()
                ],
            },
        }
    )


def _claim(
    server: _Server,
    pod_name: str,
    claim_name: str,
    spec: dict[str, Any],
    pod_uid: str,
    dev: _Device,
) -> dict[str, Any]:
    request = spec["devices"]["requests"][0]["name"]
    return server.store(
        {
            "apiVersion": RESOURCE_API,
            "kind": "ResourceClaim",
            "metadata": {
                "name": claim_name,
                "generateName": f"{pod_name}-{request}-",
                "namespace": NAMESPACE,
                "annotations": {"resource.kubernetes.io/pod-claim-name": request},
                "finalizers": ["resource.kubernetes.io/delete-protection"],
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": pod_name,
                        "uid": pod_uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": spec,
            "status": {
                "allocation": _allocation(spec, request, dev),
                "reservedFor": [{"resource": "pods", "name": pod_name, "uid": pod_uid}],
            },
        }
    )


def _nodes_cycle(free: dict[str, dict[str, list[str]]], kind: str) -> Iterator[_Device]:
    """Free devices of type ``kind``, one node after another (as a spreading scheduler)."""
    while True:
        found = False
        for node, by_type in free.items():
            devices = by_type.get(kind) or []
            if devices:
                found = True
                driver = CHANNEL_DRIVER if kind == "channel" else DRIVER
                yield _Device(node, driver, devices.pop(0))
        if not found:
            raise ValueError(f"fleet: no free device of type {kind!r} left for the workload")


def build_fleet(nodes: int, gpus: int, pods: int, *, seed: int = 1) -> Fleet:
    """The objects of ``nodes`` simulated nodes of ``gpus`` GPUs each, running ``pods`` pods of
    the scale workload (with its share of 4-node ComputeDomains), every claim allocated."""
    server = _Server(seed)
    fleet = Fleet()
    node_objs, slice_objs = [], []
    free: dict[str, dict[str, list[str]]] = {}
    gb200_free: dict[str, dict[str, list[str]]] = {}
    for index in range(nodes):
        kind = fleet_of(index)
        name = node_name(index)
        node = server.store(kwok_node(index, labels={FLEET_LABEL: kind.name}))
        node["status"] = _node_status(name, index, node["status"]["capacity"])
        node_objs.append(node)
        uid = node["metadata"]["uid"]
        source, _hub = node_slice_source(plugin_settings(name, kind.spec(gpus)), node_uid=uid)
        slices = [server.store(s) for s in source(1)]
        if kind.channels:
            slices += [server.store(s) for s in compute_domain_slices(name, uid, 1)]
        slice_objs.extend(slices)
        by_type = _free_devices(slices)
        (gb200_free if kind is GB200 else free)[name] = by_type
    classes = [server.store(c) for c in [*device_classes(), channel_device_class()]]
    domains = domain_count(pods, sum(1 for i in range(nodes) if fleet_of(i) is GB200))
    pod_objs: list[dict[str, Any]] = []
    claim_objs: list[dict[str, Any]] = []

    def place(
        template: dict[str, Any],
        owner: str,
        wanted: list[tuple[str, dict[str, Any], Iterator[_Device]]],
    ) -> None:
        devs = [(name, spec, next(devices)) for name, spec, devices in wanted]
        pod = _pod(server, template, f"{owner}-{server.suffix(10)}", devs[0][2].node, {})
        pod_name, pod_uid = pod["metadata"]["name"], pod["metadata"]["uid"]
        claim_names = {n: f"{pod_name}-{n}-{server.suffix()}" for n, _, _ in devs}
        pod["status"]["resourceClaimStatuses"] = [
            {"name": n, "resourceClaimName": c} for n, c in claim_names.items()
        ]
        pod_objs.append(pod)
        for name, spec, dev in devs:
            claim_objs.append(_claim(server, pod_name, claim_names[name], spec, pod_uid, dev))

    # Domain pods: a channel and a whole GPU on one GB200 node each, 4 nodes per domain.
    for index in range(domains):
        template = domain_deployment(index, NAMESPACE, 4)
        channel_spec = stand_in_channel_template(index, NAMESPACE)["spec"]["spec"]
        gpu_spec = claim_template(TEMPLATES[0], NAMESPACE)["spec"]["spec"]
        for _ in range(4):
            host = next(iter(n for n, t in gb200_free.items() if t.get("channel")))
            on_node = {host: gb200_free[host]}
            place(
                template,
                domain_name(index),
                [
                    ("channel", channel_spec, _nodes_cycle(on_node, "channel")),
                    ("gpu", gpu_spec, _nodes_cycle(on_node, "gpu")),
                ],
            )
    free.update(gb200_free)
    counts = replicas(pods - domains * 4)
    for claim_kind in TEMPLATES:
        template = deployment(claim_kind, NAMESPACE, counts[claim_kind.name])
        spec = claim_template(claim_kind, NAMESPACE)["spec"]["spec"]
        wanted = "mig-1g.5gb" if claim_kind.device_class.startswith("mig") else "gpu"
        devices = _nodes_cycle(free, wanted)
        for _ in range(counts[claim_kind.name]):
            place(template, claim_kind.name, [("gpu", spec, devices)])
    fleet.objects = {
        "DeviceClass": classes,
        "DeviceTaintRule": [],
        "ResourceSlice": slice_objs,
        "Node": node_objs,
        "ResourceClaim": claim_objs,
        "Pod": pod_objs,
    }
    return fleet


__all__ = ["APP_LABEL", "NAMESPACE", "Fleet", "build_fleet"]
