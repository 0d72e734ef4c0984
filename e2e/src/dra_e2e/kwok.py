"""kwok: simulated Nodes on the harness's real control plane, for scale runs.

kwok's controller (``sigs.k8s.io/kwok/cmd/kwok``) is built from the Go module proxy and
cached by version like the other components (``gobuild/kwok``). Next to it the same module
builds ``kwok-stages``, which prints the Stage objects kwokctl gives kwok by default
(node-fast with a lease heartbeat, pod-fast) from the pinned release itself: a Node the
controller manages turns Ready and keeps its lease, and a Pod bound to one turns Running
without any container.

The pure parts are here too: the controller's config file (:func:`render_kwok_config`), its
command line (:func:`kwok_argv`) and the Node objects it manages (:func:`kwok_node`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dra_e2e.build import GOBUILD_DIR, GoComponent, Progress, build_component, component_dir
from dra_e2e.errors import BuildError, E2EError
from dra_e2e.versions import KWOK_VERSION

KWOK = GoComponent(
    name="kwok",
    version=KWOK_VERSION,
    packages=("sigs.k8s.io/kwok/cmd/kwok", "."),
    outputs=("kwok", "kwok-stages"),
    source_dir=GOBUILD_DIR / "kwok",
)

#: The annotation kwok's controller selects the Nodes it manages by (``--manage-nodes-with-
#: annotation-selector``), and the taint that keeps ordinary workloads (the driver's
#: DaemonSets included) off them: only pods that tolerate it land on a simulated node.
MANAGED_ANNOTATION = "kwok.x-k8s.io/node"
MANAGED_VALUE = "fake"
TAINT_KEY = "kwok.x-k8s.io/node"
#: The label every simulated node carries (``type=kwok``), for nodeSelectors.
NODE_TYPE_LABEL = "type"
NODE_TYPE_VALUE = "kwok"
NODE_PREFIX = "kwok-node-"
#: Fake pod IPs: one /24 per node from 10.128.0.0/9 (kwok hands out pod IPs from the node's
#: podCIDR; the harness runs the controller-manager without node IPAM).
_POD_CIDR_FIRST_OCTET = 10
_POD_CIDR_SECOND_BASE = 128
MAX_KWOK_NODES = 128 * 256

_STAGE_API = "kwok.x-k8s.io/v1alpha1"
_CONFIG_API = "config.kwok.x-k8s.io/v1alpha1"


class KwokConfigError(E2EError):
    """The Stage objects for kwok's config are missing or malformed (names the field)."""

    def __init__(self, field: str, detail: str) -> None:
        self.field = field
        super().__init__(f"kwok config {field}: {detail}")


@dataclass(frozen=True)
class KwokOptions:
    """How hard kwok's controller drives its stages (``KwokConfiguration.options``)."""

    #: parallel stage plays for Pods and for Nodes, and parallel Lease renewals
    pod_parallelism: int = 16
    node_parallelism: int = 16
    lease_parallelism: int = 16
    #: each node's Lease duration: kwok renews it, so the node lifecycle controller keeps the
    #: node Ready (the kubelet's default)
    lease_duration_s: int = 40


def kwok_dir(*, root: Path | None = None) -> Path:
    """Where the cached ``kwok`` and ``kwok-stages`` live (built or not)."""
    return component_dir(KWOK, root=root)


def ensure_kwok(*, progress: Progress, root: Path | None = None) -> Path:
    """Build kwok and kwok-stages once into the cache; return their directory."""
    return build_component(KWOK, progress=progress, root=root)


def default_stages(directory: Path) -> str:
    """The default Stage objects, as ``kwok-stages`` in ``directory`` prints them."""
    proc = subprocess.run(
        [str(directory / "kwok-stages")], capture_output=True, text=True, check=False, timeout=30
    )
    if proc.returncode != 0:
        raise BuildError("kwok", f"kwok-stages exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def _stage_docs(stages_yaml: str) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(stages_yaml) if d is not None]
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict) or doc.get("kind") != "Stage":
            raise KwokConfigError(f"stages[{i}].kind", f"expected a Stage, got {doc!r:.80}")
        if doc.get("apiVersion") != _STAGE_API:
            raise KwokConfigError(
                f"stages[{i}].apiVersion", f"expected {_STAGE_API}, got {doc.get('apiVersion')!r}"
            )
    kinds = {((d.get("spec") or {}).get("resourceRef") or {}).get("kind") for d in docs}
    for needed in ("Node", "Pod"):
        if needed not in kinds:
            have = sorted(str(k) for k in kinds)
            raise KwokConfigError("stages", f"no Stage for kind {needed} (have {have})")
    return docs


def render_kwok_config(stages_yaml: str, options: KwokOptions | None = None) -> str:
    """kwok's ``--config`` file: a KwokConfiguration with ``options``, then the Stages.

    ``stages_yaml`` is multi-document YAML of Stage objects; at least one must act on Nodes
    and one on Pods, or kwok would leave nodes NotReady or pods Pending.
    """
    opts = options or KwokOptions()
    configuration = {
        "apiVersion": _CONFIG_API,
        "kind": "KwokConfiguration",
        "options": {
            "podPlayStageParallelism": opts.pod_parallelism,
            "nodePlayStageParallelism": opts.node_parallelism,
            "nodeLeaseParallelism": opts.lease_parallelism,
            "nodeLeaseDurationSeconds": opts.lease_duration_s,
        },
    }
    return yaml.safe_dump_all([configuration, *_stage_docs(stages_yaml)], sort_keys=False)


def kwok_argv(binary: Path, *, kubeconfig: Path, config: Path, options: KwokOptions) -> list[str]:
    """kwok's controller managing exactly the Nodes annotated ``kwok.x-k8s.io/node=fake``."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--config={config}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={MANAGED_ANNOTATION}={MANAGED_VALUE}",
        f"--node-lease-duration-seconds={options.lease_duration_s}",
    ]


def node_name(index: int) -> str:
    """The name of simulated node ``index``."""
    return f"{NODE_PREFIX}{index}"


def pod_cidr(index: int) -> str:
    """Simulated node ``index``'s podCIDR (a /24 of 10.128.0.0/9)."""
    if not 0 <= index < MAX_KWOK_NODES:
        raise KwokConfigError("index", f"{index} is not between 0 and {MAX_KWOK_NODES - 1}")
    second, third = divmod(index, 256)
    return f"{_POD_CIDR_FIRST_OCTET}.{_POD_CIDR_SECOND_BASE + second}.{third}.0/24"


def kwok_node(
    index: int,
    *,
    labels: Mapping[str, str] | None = None,
    capacity: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The Node object of simulated node ``index``: managed by kwok, tainted so only pods that
    tolerate ``kwok.x-k8s.io/node`` land on it, labelled ``type=kwok`` plus ``labels``."""
    name = node_name(index)
    cap = dict(capacity or {"cpu": "64", "memory": "512Gi", "pods": "110"})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {MANAGED_ANNOTATION: MANAGED_VALUE},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                NODE_TYPE_LABEL: NODE_TYPE_VALUE,
                **dict(labels or {}),
            },
        },
        "spec": {
            "podCIDR": pod_cidr(index),
            "podCIDRs": [pod_cidr(index)],
            "taints": [{"key": TAINT_KEY, "value": MANAGED_VALUE, "effect": "NoSchedule"}],
        },
        "status": {"capacity": cap, "allocatable": cap},
    }


def toleration() -> dict[str, str]:
    """The toleration a pod needs to land on a simulated node."""
    return {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}


def is_kwok_node(node: Mapping[str, Any]) -> bool:
    """Whether ``node`` (a Node object) is one kwok manages."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(MANAGED_ANNOTATION) == MANAGED_VALUE)
