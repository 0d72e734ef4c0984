"""``kubectl dra allocate`` against the real kube-scheduler on three real nodes.

The same comparison as ``test_differential.py`` (the scheduler allocates, kubectl-dra gets the
same objects, the allocations must be equal, node included), on a cluster of three registered
kubelets (``e2e_nodes(3)``), with slices published per node by the test, so that the scheduler
chooses the node: by the ``firstAvailable`` score of each node, within the nodes the pod's
nodeSelector, node affinity and the nodes' taints leave, for node-local and network-attached
devices, for a claim shared by two pods, and for partitionable devices on several nodes.

Where several nodes fit a pod equally well for DRA (the same subrequests there), the
scheduler's other scores (least allocated, balanced allocation) and its random tie-break
decide; kubectl-dra takes the first by name. Those pods name their acceptable nodes: both
choices must be among them, and kubectl-dra's answer on the scheduler's node (``--node``)
must equal the scheduler's allocation.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from differential_objects import Names, Obj, attr, claim, dev, device_class, exactly, resource_slice
from differential_support import (
    PodOutcome,
    Scenario,
    ScenarioSkipped,
    assert_agrees,
    run_kubectl_dra_explain,
    run_scenario,
)
from dra_e2e.handle import ClusterHandle

NODES = 3
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.e2e_nodes(NODES)]

ZONE = "example.com/zone"
FABRIC = "example.com/fabric"
MAINTENANCE = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


@pytest.fixture
def namespace(e2e_cluster_nodes: ClusterHandle) -> Iterator[str]:
    """A fresh namespace on the three-node cluster, deleted (without waiting) afterwards."""
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    e2e_cluster_nodes.kubectl("create", "namespace", name)
    e2e_cluster_nodes.wait_until(
        f"service account default in {name}",
        lambda: e2e_cluster_nodes.kubectl("get", "serviceaccount", "default", "-n", name),
    )
    try:
        yield name
    finally:
        e2e_cluster_nodes.kubectl("delete", "namespace", name, "--wait=false")


def _node_slices(n: Names, per_node: list[list[Obj]]) -> list[Obj]:
    """One slice per node (its own pool), node i getting ``per_node[i]``."""
    return [
        resource_slice(n, f"n{i}", devices=devices, node=n.nodes[i])
        for i, devices in enumerate(per_node)
        if devices
    ]


def _models_request(n: Names, name: str, models: tuple[str, ...]) -> Obj:
    """A prioritized list: one device of the first model available on the node."""
    return {
        "name": name,
        "firstAvailable": [
            {
                "name": model,
                "deviceClassName": n.driver,
                "selectors": [{"cel": {"expression": f'{attr(n, "model")} == "{model}"'}}],
            }
            for model in models
        ],
    }


def _hostname(n: Names, index: int) -> Obj:
    return {"nodeSelector": {"kubernetes.io/hostname": n.nodes[index]}}


# ---------------------------------------------------------------- scenarios


def _first_available_across_nodes() -> Scenario:
    # Each node has one model; the same prioritized claim goes where its best remaining
    # subrequest fits: h100 (node 1), then a100 (node 2), then l4 (node 0), then nowhere.
    def slices(n: Names) -> list[Obj]:
        return _node_slices(
            n,
            [
                [dev("gpu-0", model="l4")],
                [dev("gpu-0", model="h100")],
                [dev("gpu-0", model="a100")],
            ],
        )

    def pods(n: Names) -> list[list[Obj]]:
        return [
            [claim(n, f"prio-{p}", [_models_request(n, "gpu", ("h100", "a100", "l4"))])]
            for p in range(4)
        ]

    return Scenario(
        "mn-first-available",
        lambda n: [device_class(n)],
        slices,
        pods,
        node_count=NODES,
        refused={3: "Unschedulable"},
    )


def _pod_placement() -> Scenario:
    # The best device (h100) is on nodes 0 and 2; node 0 is tainted, node 2 is in zone b.
    def slices(n: Names) -> list[Obj]:
        return _node_slices(
            n,
            [
                [dev("gpu-0", model="h100")],
                [dev("gpu-0", model="a100")],
                [dev("gpu-0", model="h100")],
            ],
        )

    def pods(n: Names) -> list[list[Obj]]:
        return [
            [claim(n, f"placed-{p}", [_models_request(n, "gpu", ("h100", "a100"))])]
            for p in range(4)
        ]

    def placement(n: Names) -> dict[int, Obj]:
        toleration = {"key": MAINTENANCE["key"], "operator": "Exists", "effect": "NoSchedule"}

        def zone(operator: str, value: str) -> Obj:
            term = {"matchExpressions": [{"key": ZONE, "operator": operator, "values": [value]}]}
            required = {"nodeSelectorTerms": [term]}
            return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}

        return {
            # nodeSelector zone a, no toleration: only node 1, its a100.
            0: {"nodeSelector": {ZONE: "a"}},
            # Required affinity zone a, tolerating the taint: node 0's h100.
            1: {"affinity": zone("In", "a"), "tolerations": [toleration]},
            # Not zone b, no toleration: node 1 only, whose a100 is taken: nowhere.
            2: {"affinity": zone("NotIn", "b")},
            # No constraints: node 2's h100 is the one device left.
        }

    return Scenario(
        "mn-placement",
        lambda n: [device_class(n)],
        slices,
        pods,
        node_count=NODES,
        placement=placement,
        node_labels={0: {ZONE: "a"}, 1: {ZONE: "a"}, 2: {ZONE: "b"}},
        node_taints={0: [MAINTENANCE]},
        refused={2: "Unschedulable"},
    )


def _network_attached() -> Scenario:
    # Node-local GPUs; NICs on a fabric reaching nodes 0 and 1 (a slice with a nodeSelector);
    # a volume every node reaches (allNodes). Every device has a model: a selector reading a
    # missing attribute is a scheduler error, not a mismatch.
    def slices(n: Names) -> list[Obj]:
        local = _node_slices(
            n,
            [
                [dev("gpu-0", kind="gpu", model="a100")],
                [dev("gpu-0", kind="gpu", model="h100")],
                [dev("gpu-0", kind="gpu", model="h100")],
            ],
        )
        fabric = {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": FABRIC, "operator": "In", "values": ["ib"]}]}
                ]
            }
        }
        return [
            *local,
            resource_slice(
                n,
                "fabric",
                devices=[
                    dev("nic-0", kind="nic", model="cx7"),
                    dev("nic-1", kind="nic", model="cx7"),
                ],
                pool="fabric",
                node_selection=fabric,
            ),
            resource_slice(
                n,
                "storage",
                devices=[dev("disk-0", kind="storage", model="nvme")],
                pool="storage",
                node_selection={"allNodes": True},
            ),
        ]

    def pods(n: Names) -> list[list[Obj]]:
        def kind(name: str, value: str) -> Obj:
            return exactly(n, name, selectors=(f'{attr(n, "kind")} == "{value}"',))

        gpu = _models_request(n, "gpu", ("h100", "a100"))
        return [
            # An h100 with a NIC: node 1 (node 2's h100 has no fabric).
            [claim(n, "gpu-nic", [gpu, kind("nic", "nic")])],
            # Only the volume: every node reaches it, the allocation names no node.
            [claim(n, "volume", [kind("disk", "storage")])],
            # Only a NIC: nodes 0 and 1; the allocation carries the fabric's selector.
            [claim(n, "nic", [kind("nic", "nic")])],
            # A local GPU: node 2's h100 scores above node 0's a100.
            [claim(n, "local", [gpu])],
        ]

    return Scenario(
        "mn-network",
        lambda n: [device_class(n)],
        slices,
        pods,
        node_count=NODES,
        node_labels={0: {FABRIC: "ib"}, 1: {FABRIC: "ib"}},
        acceptable={1: (0, 1, 2), 2: (0, 1)},
    )


def _shared_claim() -> Scenario:
    # The second pod shares the first pod's claim (on node 1): its own claim would score
    # best on node 2 (l4) but must go with the shared claim's node.
    def slices(n: Names) -> list[Obj]:
        return _node_slices(
            n,
            [
                [dev("gpu-0", model="a100")],
                [dev("gpu-0", model="h100"), dev("gpu-1", model="a100")],
                [dev("gpu-0", model="l4"), dev("gpu-1", model="a100")],
            ],
        )

    def pods(n: Names) -> list[list[Obj]]:
        l4 = (f'{attr(n, "model")} == "l4"',)
        return [
            [claim(n, "shared", [_models_request(n, "gpu", ("h100", "a100"))])],
            [claim(n, "own", [_models_request(n, "gpu", ("l4", "a100"))])],
            # Only an l4, which node 1 lacks: the shared claim keeps the pod off node 2.
            [claim(n, "l4-only", [exactly(n, "gpu", selectors=l4)])],
        ]

    return Scenario(
        "mn-shared",
        lambda n: [device_class(n)],
        slices,
        pods,
        node_count=NODES,
        shared={1: ("shared",), 2: ("shared",)},
        refused={2: "Unschedulable"},
    )


def _partitionable_nodes() -> Scenario:
    # Partitionable GPUs (whole, or two halves on the same counters) on every node: two on
    # node 0, one on nodes 1 and 2. Counters are per pool, i.e. per node.
    def slices(n: Names) -> list[Obj]:
        out: list[Obj] = []
        for i, gpus in enumerate((("a", "b"), ("a",), ("a",))):
            counters = [
                {"name": f"gpu-{g}-mem", "counters": {"memory": {"value": "40Gi"}}} for g in gpus
            ]
            devices: list[Obj] = []
            for g in gpus:
                for name, kind, amount in (
                    (f"gpu-{g}", "full", "40Gi"),
                    (f"gpu-{g}-half-0", "half", "20Gi"),
                    (f"gpu-{g}-half-1", "half", "20Gi"),
                ):
                    device = dev(name, kind=kind)
                    device["consumesCounters"] = [
                        {"counterSet": f"gpu-{g}-mem", "counters": {"memory": {"value": amount}}}
                    ]
                    devices.append(device)
            node = n.nodes[i]
            out.append(
                resource_slice(
                    n, f"n{i}-counters", shared_counters=counters, slice_count=2, node=node
                )
            )
            out.append(
                resource_slice(n, f"n{i}-devices", devices=devices, slice_count=2, node=node)
            )
        return out

    def pods(n: Names) -> list[list[Obj]]:
        def kind(name: str, value: str) -> Obj:
            return exactly(n, name, selectors=(f'{attr(n, "kind")} == "{value}"',))

        prio = {
            "name": "gpu",
            "firstAvailable": [
                {"name": size, **kind("x", size)["exactly"]} for size in ("full", "half")
            ],
        }
        return [
            # Pinned to node 1: its whole GPU, which leaves node 1 nothing.
            [claim(n, "pinned-full", [kind("gpu", "full")])],
            # A half and a whole GPU together: only node 0 has two GPUs.
            [claim(n, "half", [kind("gpu", "half")]), claim(n, "full", [kind("gpu", "full")])],
            # Whole before half: node 2's whole GPU scores above node 0's last half.
            [claim(n, "prio", [prio])],
            # One half: only node 0's first GPU has room left.
            [claim(n, "last-half", [kind("gpu", "half")])],
        ]

    return Scenario(
        "mn-partitionable",
        lambda n: [device_class(n)],
        slices,
        pods,
        node_count=NODES,
        placement=lambda n: {0: _hostname(n, 1)},
        requires=("slices:0.spec.sharedCounters", "slices:1.spec.devices.0.consumesCounters"),
    )


def _one_node_of_three() -> Scenario:
    # Two a100s on the same NUMA node exist only on node 2; then three a100s exist nowhere.
    def slices(n: Names) -> list[Obj]:
        return _node_slices(
            n,
            [
                [dev("gpu-0", model="a100", numa=0), dev("gpu-1", model="a100", numa=1)],
                [dev("gpu-0", model="a100", numa=1), dev("gpu-1", model="t4", numa=1)],
                [
                    dev("gpu-0", model="a100", numa=0),
                    dev("gpu-1", model="a100", numa=1),
                    dev("gpu-2", model="a100", numa=1),
                ],
            ],
        )

    def pods(n: Names) -> list[list[Obj]]:
        a100 = (f'{attr(n, "model")} == "a100"',)
        same_numa = [{"matchAttribute": f"{n.driver}/numa"}]
        return [
            [
                claim(
                    n, "pair", [exactly(n, "gpus", selectors=a100, count=2)], constraints=same_numa
                )
            ],
            [claim(n, "three", [exactly(n, "gpus", selectors=a100, count=3)])],
        ]

    return Scenario(
        "mn-one-of-three",
        lambda n: [device_class(n)],
        slices,
        pods,
        node_count=NODES,
        refused={1: "Unschedulable"},
    )


SCENARIOS = [
    _first_available_across_nodes(),
    _pod_placement(),
    _network_attached(),
    _shared_claim(),
    _partitionable_nodes(),
    _one_node_of_three(),
]


# Scenario -> refused pod -> (node index, text) lines ``kubectl dra explain pod/NAME`` must
# show: why not, per node.
WHY_NOT: dict[str, dict[int, list[tuple[int, str]]]] = {
    "mn-first-available": {3: [(0, "held by claim(s)"), (1, "held by"), (2, "held by")]},
    "mn-placement": {
        2: [(0, MAINTENANCE["key"]), (1, "gpu-0"), (2, "didn't match Pod's node affinity")]
    },
    "mn-shared": {2: [(0, "not available on the node"), (1, "0 usable"), (2, "not available")]},
    "mn-one-of-three": {1: [(0, "2 usable"), (1, 'model = "t4"'), (2, "held by claim(s)")]},
}


def _check_explain(
    scenario: Scenario, outcomes: list[PodOutcome], nodes: list[str], namespace: str, workdir: Path
) -> None:
    for index, expected in WHY_NOT.get(scenario.name, {}).items():
        refused = outcomes[index]
        assert refused.node is None, f"pod {refused.pod} was placed on {refused.node}"
        text = run_kubectl_dra_explain(workdir, refused.inputs, f"pod/{refused.pod}", namespace)
        assert "fits on no node" in text, text
        lines = text.splitlines()
        for node_index, words in expected:
            node = nodes[node_index]
            # Nodes with the same findings are listed on one line, their reasons below it.
            at = [
                k
                for k, line in enumerate(lines)
                if line.startswith("  does not fit on") and node in line
            ]
            assert at, f"explain does not name node {node}:\n{text}"
            end = next(
                (k for k in range(at[0] + 1, len(lines)) if not lines[k].startswith("    ")),
                len(lines),
            )
            block = "\n".join(lines[at[0] : end])
            assert words in block, f"explain: {words!r} not given for node {node}:\n{text}"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_kubectl_dra_allocates_like_the_scheduler_on_three_nodes(
    scenario: Scenario, e2e_cluster_nodes: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    try:
        outcomes = run_scenario(e2e_cluster_nodes, scenario, namespace=namespace, workdir=tmp_path)
    except ScenarioSkipped as exc:
        pytest.skip(f"{scenario.name}: {exc}")
    assert any(o.node for o in outcomes), "the scheduler placed no pod"
    refused = {i: o.refused for i, o in enumerate(outcomes) if o.refused is not None}
    assert refused == scenario.refused, f"pods the scheduler refused: {refused}"
    assert_agrees(outcomes)
    nodes = sorted(e2e_cluster_nodes.node_names())[:NODES]
    _check_explain(scenario, outcomes, nodes, namespace, tmp_path)
