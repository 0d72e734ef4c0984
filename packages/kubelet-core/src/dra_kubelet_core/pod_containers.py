"""Which containers of a pod use a claim: the ``container`` label of
``nvidia_dra_device_allocation_info`` (pure).

The kubelet's PodResources API (``List``, read by :mod:`.pod_resources`) names, per pod and
container, the claims the container uses (``dynamic_resources``: claim name and namespace,
with the claim's driver, pool and device). The plugin asks the kubelet rather than the API
server: reading Pods would need a cluster-wide ``get pods`` grant for every plugin, while the
PodResources socket is node-local and answers only about this node's pods.

One series per (device, pod, container), with dcgm-exporter's label name ``container``,
rather than one series per (device, pod) with a comma-joined ``containers``:

* dcgm-exporter labels its ``DCGM_FI_*`` series ``namespace``, ``pod`` and ``container``, each
  one name, as do cAdvisor's ``container_*`` and kube-state-metrics'
  ``kube_pod_container_*``. A single name joins all of them with ``on (namespace, pod,
  container)``; a comma-joined list joins none and needs ``label_replace`` regexes.
* The usual GPU pod has one container using the claim, so the series count is unchanged; a
  claim shared by several containers of a pod (the kubelet reports the claim's devices under
  every container that names the claim) gets one series each, as dcgm-exporter itself reports
  a GPU under each container it is assigned to.
* Aggregating over containers (``max by (namespace, pod, ...)``) gives back the per-pod view;
  splitting a joined string cannot be done in PromQL.

When the kubelet lists no container for a claim (the socket is not mounted, the kubelet is
older than 1.34 with ``KubeletPodResourcesDynamicResources`` off, or no container of the pod
names the claim), the row keeps an empty ``container``, which is the series before this label.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from dra_kubelet_core._proto import podresources_v1_pb2 as pb
from dra_kubelet_core.allocation_info import AllocationInfo

__all__ = [
    "ContainerIndex",
    "ContainerSource",
    "PodClaim",
    "claim_containers",
    "with_containers",
]


class PodClaim(NamedTuple):
    """A claim as a pod uses it: the pod's namespace (the claim's), pod name, claim name."""

    namespace: str
    pod: str
    claim: str


#: Sorted container names per claim use; a use the kubelet did not list is absent.
ContainerIndex = Mapping[PodClaim, tuple[str, ...]]

#: Returns the current index; must not raise (an empty index when the kubelet is not asked).
ContainerSource = Callable[[], ContainerIndex]


def claim_containers(response: pb.ListPodResourcesResponse) -> dict[PodClaim, tuple[str, ...]]:
    """The containers using each claim in a PodResources ``List`` answer, sorted by name.

    A dynamic resource whose claim namespace is empty (kubelets list the pod's namespace,
    but the field is the claim's own) is taken as in the pod's namespace.
    """
    found: dict[PodClaim, set[str]] = {}
    for pod in response.pod_resources:
        for container in pod.containers:
            for resource in container.dynamic_resources:
                key = PodClaim(
                    namespace=resource.claim_namespace or pod.namespace,
                    pod=pod.name,
                    claim=resource.claim_name,
                )
                found.setdefault(key, set()).add(container.name)
    return {key: tuple(sorted(names)) for key, names in found.items()}


def with_containers(rows: Iterable[AllocationInfo], index: ContainerIndex) -> list[AllocationInfo]:
    """Each row once per container ``index`` lists for its (namespace, pod, claim), in
    container order; a row with no listed container as it is (``container`` empty)."""
    out: list[AllocationInfo] = []
    for row in rows:
        names = index.get(PodClaim(row.namespace, row.pod, row.claim), ())
        if not names:
            out.append(row)
            continue
        out.extend(dataclasses.replace(row, container=name) for name in names)
    return out
