"""Differential testing of ``kubectl dra allocate`` against the real kube-scheduler.

A :class:`Scenario` is a set of DeviceClasses and ResourceSlices for a made-up driver plus a
sequence of pods, each with its ResourceClaims. :func:`run_scenario` creates the objects on the
cluster, lets the real scheduler allocate the pods' claims one pod after the other, and after
each pod gives ``kubectl-dra allocate`` the same objects: the classes, slices and nodes, the
claims of earlier pods as the scheduler allocated them (they hold their devices), and this
pod's claims as they were created, before allocation. The allocations must be equal, except
for what the scheduler makes up per run (``allocationTimestamp``, random ``shareID``).

No kubelet plugin serves the made-up drivers, so the pods never start; the scheduler still
allocates and binds them. Everything a scenario creates is labelled with its run id and deleted
afterwards (pods forcibly, since they are stuck before their containers start).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from differential_objects import RUN_LABEL, Names, Obj, pod_manifest
from dra_e2e.cluster_view import has_condition_taint
from dra_e2e.errors import KubectlError
from dra_e2e.handle import ClusterHandle

KUBECTL_DRA = Path(sys.executable).parent / "kubectl-dra"
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"


@dataclass(frozen=True)
class Scenario:
    """What to create: classes and slices, then pods (each a list of claims) in order.

    ``requires`` names the fields a feature gate must let through the apiserver, as
    ``slices:<path>`` into the created slices or ``claims:<path>`` into the claims of all pods
    in order (e.g. ``slices:0.spec.sharedCounters``); if one is dropped the scenario is skipped.
    """

    name: str
    classes: Callable[[Names], list[Obj]]
    slices: Callable[[Names], list[Obj]]
    pods: Callable[[Names], list[list[Obj]]]
    requires: tuple[str, ...] = ()
    admin_namespace: bool = False
    # Other cluster-scoped objects the allocation depends on (e.g. DeviceTaintRules).
    extra: Callable[[Names], list[Obj]] = lambda _names: []
    # Pods (by index) the scheduler must refuse, with the reason ("Unschedulable",
    # "SchedulerError"); None: whatever it decides (kubectl-dra must agree either way).
    refused: dict[int, str] | None = field(default_factory=dict)
    # Multi-node scenarios: how many of the cluster's nodes (by name) the scenario uses.
    node_count: int = 1
    # Pod index -> extra pod spec (nodeSelector, affinity, tolerations).
    placement: Callable[[Names], dict[int, Obj]] = lambda _names: {}
    # Pod index -> names of earlier pods' claims it uses as well (a shared claim).
    shared: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # Node index -> labels and taints set on the real node for the scenario, removed after.
    node_labels: dict[int, dict[str, str]] = field(default_factory=dict)
    node_taints: dict[int, list[Obj]] = field(default_factory=dict)
    # Pod index -> the node indices the scheduler may choose from: nodes the pod fits on
    # equally well for DRA, where the scheduler's other scores (spread, least allocated) or
    # its random tie-break decide. Pods not named have exactly one right node.
    acceptable: dict[int, tuple[int, ...]] = field(default_factory=dict)


@dataclass
class PodOutcome:
    """One pod's claims: what the scheduler wrote and what kubectl-dra computed."""

    pod: str
    node: str | None  # None: the scheduler refused the pod
    refused: str | None
    scheduler: dict[str, Obj] = field(default_factory=dict)
    ours: dict[str, Obj] = field(default_factory=dict)
    # The node kubectl-dra picked on its own (None: unsatisfiable); where the scheduler may
    # choose among ``acceptable`` nodes and chose another, ``ours`` is kubectl-dra's answer
    # on the scheduler's node (``--node``).
    ours_node: str | None = None
    acceptable: tuple[str, ...] = ()
    # What kubectl-dra was given (for ``kubectl dra explain`` on the same input).
    inputs: list[Obj] = field(default_factory=list)


def assert_agrees(outcomes: Iterable[PodOutcome]) -> None:
    """Every pod's claims as kubectl-dra computed them equal the scheduler's.

    Where the scheduler may pick among ``acceptable`` nodes, both picks must be among them.
    """
    for outcome in outcomes:
        if outcome.acceptable:
            assert outcome.node in outcome.acceptable, (
                f"pod {outcome.pod}: the scheduler chose {outcome.node}, "
                f"not one of {outcome.acceptable}"
            )
            assert outcome.ours_node in outcome.acceptable, (
                f"pod {outcome.pod}: kubectl-dra chose {outcome.ours_node}, "
                f"not one of {outcome.acceptable}"
            )
        assert outcome.ours == outcome.scheduler, (
            f"pod {outcome.pod}: kubectl-dra disagrees with the kube-scheduler\n"
            f"kubectl-dra:    {json.dumps(outcome.ours, sort_keys=True)}\n"
            f"kube-scheduler: {json.dumps(outcome.scheduler, sort_keys=True)}"
        )


class ScenarioSkipped(Exception):
    """The cluster's feature gates drop a field this scenario needs."""


def _labelled(obj: Obj, run_id: str) -> Obj:
    out = copy.deepcopy(obj)
    out["metadata"].setdefault("labels", {})[RUN_LABEL] = run_id
    return out


def _create(cluster: ClusterHandle, objs: list[Obj], run_id: str) -> list[Obj]:
    """Create the objects; return them as the apiserver stored them, in order."""
    if not objs:
        return []
    body = {"apiVersion": "v1", "kind": "List", "items": [_labelled(o, run_id) for o in objs]}
    text = cluster.kubectl("create", "-f", "-", "-o", "json", input_text=json.dumps(body))
    # kubectl prints one JSON document per created object, back to back.
    decoder = json.JSONDecoder()
    items: list[Obj] = []
    pos = 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        obj, pos = decoder.raw_decode(text, pos)
        items.extend(obj["items"] if obj.get("kind") == "List" else [obj])
    if len(items) != len(objs):
        raise AssertionError(f"created {len(objs)} objects, kubectl printed {len(items)}")
    return items


def _lookup(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(obj, list):
            obj = obj[int(part)] if part.isdigit() and int(part) < len(obj) else None
        elif isinstance(obj, dict):
            obj = obj.get(part)
        else:
            return None
    return obj


def normalized(allocation: Obj) -> Obj:
    """An allocation without what the scheduler makes up per run."""
    out = copy.deepcopy(allocation)
    out.pop("allocationTimestamp", None)
    for result in out.get("devices", {}).get("results", []):
        # Upstream draws a random UUID; ours is deterministic. Both must be present.
        if "shareID" in result:
            result["shareID"] = "<present>"
    return out


def _pod_failure(cluster: ClusterHandle, namespace: str, pod: str) -> str:
    try:
        data = cluster.kubectl_json("get", "pod", pod, "-n", namespace)
    except KubectlError as exc:
        return str(exc)
    conditions = data.get("status", {}).get("conditions", [])
    return json.dumps(conditions)


REFUSAL_GRACE_S = 3.0
EXTRA_SETTLE_S = 2.0


REFUSALS = ("Unschedulable", "SchedulerError")


def _refusal(pod: Obj) -> str | None:
    """Why the scheduler refused the pod so far: ``Unschedulable``, ``SchedulerError``."""
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            reason = cond.get("reason")
            return reason if reason in REFUSALS else None
    return None


def _waits_for_binding(claims: Iterable[Obj]) -> bool:
    return any(
        result.get("bindingConditions")
        for obj in claims
        for result in obj["status"]["allocation"]["devices"].get("results", [])
    )


@dataclass(frozen=True)
class Verdict:
    """The scheduler's decision on a pod: bound with its claims allocated, or refused."""

    node: str | None
    claims: dict[str, Obj]
    refused: str | None = None  # "Unschedulable" or "SchedulerError" (e.g. a CEL error)


def _wait_scheduled(
    cluster: ClusterHandle, namespace: str, pod: str, claims: list[str], held: tuple[str, ...] = ()
) -> Verdict:
    """Wait for the scheduler's verdict on the pod.

    A refusal counts only if it holds for a grace period with the claims unallocated (but
    ``held``, earlier pods' claims this pod shares, which stay allocated): the scheduler's
    first attempt may race with its informers seeing the new slices, and it retries when
    they arrive.
    """
    refused_at: list[tuple[str, float]] = []

    def check() -> Verdict | None:
        data = cluster.kubectl_json("get", "pod", pod, "-n", namespace)
        node = data.get("spec", {}).get("nodeName")
        # One call for all the pod's claims (a List when more than one is named).
        got = cluster.kubectl_json("get", "resourceclaim", *claims, "-n", namespace)
        found: dict[str, Obj] = {
            obj["metadata"]["name"]: obj
            for obj in (got["items"] if got.get("kind") == "List" else [got])
            if obj.get("status", {}).get("allocation")
        }
        if node and len(found) == len(claims):
            return Verdict(node=node, claims=found)
        nominated = data.get("status", {}).get("nominatedNodeName")
        if nominated and len(found) == len(claims) and _waits_for_binding(found.values()):
            # Allocated; binding waits (in PreBind) for conditions no driver will set.
            return Verdict(node=nominated, claims=found)
        reason = _refusal(data)
        if node or set(found) - set(held) or reason is None:
            refused_at.clear()
            return None
        if not refused_at or refused_at[0][0] != reason:
            refused_at[:] = [(reason, time.monotonic())]
        if time.monotonic() - refused_at[0][1] >= REFUSAL_GRACE_S:
            kept = {name: obj for name, obj in found.items() if name in held}
            return Verdict(node=None, claims=kept, refused=reason)
        return None

    try:
        result: Verdict = cluster.wait_until(
            f"the scheduler to decide on pod {namespace}/{pod} (claims {claims})",
            check,
            timeout=60,
            interval=0.5,
        )
    except Exception as exc:
        raise AssertionError(
            f"{exc}; pod conditions: {_pod_failure(cluster, namespace, pod)}"
        ) from exc
    return result


def write_input(workdir: Path, objects: list[Obj]) -> Path:
    """The objects as one List manifest file for kubectl-dra."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"input-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    return path


def run_kubectl_dra(
    workdir: Path, objects: list[Obj], claims: list[str], *, node: str | None = None
) -> tuple[int, Obj]:
    """``kubectl-dra allocate -o json`` on the objects for the named claims (NS/NAME).

    Returns the exit code and the report (``{"error": stderr}`` on exit 2).
    """
    path = write_input(workdir, objects)
    args = [str(KUBECTL_DRA), "allocate", "-f", str(path), "-o", "json"]
    for key in claims:
        args += ["--claim", key]
    if node is not None:
        args += ["--node", node]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode == 2:
        return 2, {"error": proc.stderr.strip()}
    if proc.returncode not in (0, 1):
        raise AssertionError(
            f"kubectl-dra allocate failed (exit {proc.returncode}) on {path}: {proc.stderr}"
        )
    result: Obj = json.loads(proc.stdout)
    return proc.returncode, result


def _delete_all(cluster: ClusterHandle, names: Names, extra_kinds: list[str]) -> None:
    selector = f"{RUN_LABEL}={names.run_id}"
    cluster.kubectl(
        "delete", "pods", "-n", names.namespace, "-l", selector,
        "--grace-period=0", "--force", "--ignore-not-found", "--wait=true", timeout=120,
    )  # fmt: skip
    cluster.kubectl(
        "delete", "resourceclaims", "-n", names.namespace, "-l", selector,
        "--ignore-not-found", "--wait=true", timeout=120,
    )  # fmt: skip
    kinds = ",".join(["resourceslices", "deviceclasses", *extra_kinds])
    cluster.kubectl(
        "delete", kinds, "-l", selector, "--ignore-not-found", "--wait=true", timeout=120,
    )  # fmt: skip


def run_kubectl_dra_explain(workdir: Path, objects: list[Obj], target: str, namespace: str) -> str:
    """``kubectl-dra explain TARGET -n NS -f FILE`` on the objects: its text."""
    path = write_input(workdir, objects)
    args = [str(KUBECTL_DRA), "explain", target, "-n", namespace, "-f", str(path)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    # 0: it fits somewhere, 1: nothing fits (the pods the scheduler refused); 2 is an error.
    if proc.returncode not in (0, 1):
        raise AssertionError(
            f"kubectl-dra explain failed (exit {proc.returncode}) on {path}: {proc.stderr}"
        )
    return proc.stdout


@contextmanager
def node_setup(
    cluster: ClusterHandle, scenario: Scenario, nodes: tuple[str, ...]
) -> Iterator[None]:
    """The scenario's labels and taints on the real nodes, removed afterwards."""
    labelled: list[tuple[str, list[str]]] = []
    tainted: list[tuple[str, list[str]]] = []
    try:
        # One call per node and kind: labels and taints of a node set (and removed) together.
        for index, labels in scenario.node_labels.items():
            node = nodes[index]
            labelled.append((node, [f"{key}-" for key in labels]))
            pairs = [f"{key}={value}" for key, value in labels.items()]
            cluster.kubectl("label", "node", node, *pairs, "--overwrite")
        for index, taints in scenario.node_taints.items():
            node = nodes[index]
            tainted.append((node, [f"{t['key']}:{t['effect']}-" for t in taints]))
            specs = [f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in taints]
            cluster.kubectl("taint", "node", node, *specs, "--overwrite")
        if labelled or tainted:
            # The scheduler sees node changes through its informer; give it a moment.
            time.sleep(EXTRA_SETTLE_S)
        yield
    finally:
        for node, removals in labelled:
            cluster.kubectl("label", "node", node, *removals)
        for node, removals in tainted:
            cluster.kubectl("taint", "node", node, *removals)


@contextmanager
def scenario_objects(
    cluster: ClusterHandle, names: Names, extra_kinds: list[str]
) -> Iterator[None]:
    """Delete everything labelled with the run id afterwards, pods before their claims."""
    try:
        yield
    finally:
        _delete_all(cluster, names, extra_kinds)


def target_node(cluster: ClusterHandle) -> str:
    """The first schedulable node by name: the one the scenario's slices are published on."""
    data = cluster.kubectl_json("get", "nodes")
    for node in sorted(data["items"], key=lambda n: n["metadata"]["name"]):
        taints = node.get("spec", {}).get("taints") or []
        if node.get("spec", {}).get("unschedulable"):
            continue
        if any(t.get("effect") in ("NoSchedule", "NoExecute") for t in taints):
            continue
        return str(node["metadata"]["name"])
    raise AssertionError("no schedulable node in the cluster")


def _compared(verdict: Verdict, name: str, key: str, code: int, report: Obj) -> tuple[Obj, Obj]:
    """What is compared for one claim: (the scheduler's, kubectl-dra's).

    Refusals compare only their kind (an error, or nothing fits), not the messages.
    """
    if code == 2:
        mine: Obj = {"error": True, "stderr": report["error"]}
    else:
        mine = report.get("claims", {}).get(key, {"allocated": False, "missing": True})
        if "allocation" in mine:
            mine = {**mine, "allocation": normalized(mine["allocation"])}
        elif mine.get("allocated") is False and "missing" not in mine:
            mine = {"allocated": False}
    if verdict.refused == "SchedulerError":
        theirs: Obj = {"error": True}
        if code == 2:
            mine = {"error": True}
        return theirs, mine
    if verdict.node is None and name in verdict.claims:
        # A shared claim of a refused pod keeps its allocation; its node is the earlier pod's.
        mine = {k: v for k, v in mine.items() if k != "node"}
    return _scheduler_view(verdict, name), mine


def _scheduler_view(verdict: Verdict, name: str) -> Obj:
    if verdict.node is None:
        if name in verdict.claims:
            allocation = verdict.claims[name]["status"]["allocation"]
            return {"allocated": True, "allocation": normalized(allocation)}
        return {"allocated": False}
    return {
        "allocated": True,
        "node": verdict.node,
        "allocation": normalized(verdict.claims[name]["status"]["allocation"]),
    }


def _check_kept(scenario: Scenario, kind: str, created: list[Obj]) -> None:
    for path in scenario.requires:
        which, _, rest = path.partition(":")
        position = rest.split(".", 1)[0]
        if which != kind or (position.isdigit() and int(position) >= len(created)):
            continue
        if _lookup(created, rest) is None:
            raise ScenarioSkipped(
                f"the apiserver dropped {kind} field {rest!r} (feature gate off?)"
            )


def scenario_nodes(cluster: ClusterHandle, count: int) -> tuple[str, ...]:
    """The nodes a scenario uses: the first schedulable one, or the first ``count`` by name."""
    if count == 1:
        return (target_node(cluster),)
    have = sorted(cluster.node_names())
    if len(have) < count:
        raise AssertionError(f"the scenario needs {count} nodes, the cluster has {have}")
    return tuple(have[:count])


def _settled_nodes(cluster: ClusterHandle, nodes: tuple[str, ...]) -> list[Obj]:
    """The cluster's Node objects once none of ``nodes`` carries a not-ready taint.

    kubectl-dra reads the nodes once, the scheduler at its own moment: a node that has just
    become Ready (its lifecycle taint not yet removed) would be seen differently by the two.
    """

    def settled() -> list[Obj] | None:
        items: list[Obj] = cluster.kubectl_json("get", "nodes")["items"]
        if any(i["metadata"]["name"] in nodes and has_condition_taint(i) for i in items):
            return None
        return items

    found: list[Obj] = cluster.wait_until("the scenario's nodes without not-ready taints", settled)
    return found


def run_scenario(
    cluster: ClusterHandle, scenario: Scenario, *, namespace: str, workdir: Path
) -> list[PodOutcome]:
    """Run the scenario on the cluster and through kubectl-dra; return both per pod.

    kubectl-dra gets the pod too (its nodeSelector, affinity and tolerations narrow the
    nodes), and the claims of earlier pods as the scheduler allocated them.
    """
    nodes = scenario_nodes(cluster, scenario.node_count)
    names = Names(
        scenario=scenario.name,
        run_id=uuid.uuid4().hex[:6],
        node=nodes[0],
        namespace=namespace,
        nodes=nodes,
    )
    if scenario.admin_namespace:
        cluster.kubectl("label", "namespace", namespace, f"{ADMIN_ACCESS_LABEL}=true")
    outcomes: list[PodOutcome] = []
    extra_objects = scenario.extra(names)
    # Filled once they exist: a cluster without their API has nothing of theirs to delete.
    extra_kinds: list[str] = []
    # Objects go before the nodes' labels and taints: a refused pod must not find a node
    # once its taint is gone.
    with node_setup(cluster, scenario, nodes), scenario_objects(cluster, names, extra_kinds):
        classes = _create(cluster, scenario.classes(names), names.run_id)
        slices = _create(cluster, scenario.slices(names), names.run_id)
        _check_kept(scenario, "slices", slices)
        try:
            extras = _create(cluster, extra_objects, names.run_id)
        except KubectlError as exc:
            if "no matches for kind" in str(exc):
                raise ScenarioSkipped(f"the cluster does not serve this API: {exc}") from exc
            raise
        extra_kinds += sorted({f"{o['kind'].lower()}s" for o in extras})
        if extras:
            # The scheduler learns of them through an informer; give it a moment.
            time.sleep(EXTRA_SETTLE_S)
        node_objs = _settled_nodes(cluster, nodes)
        placement = scenario.placement(names)
        # Earlier pods' claims as the scheduler allocated them, by name.
        allocated: dict[str, Obj] = {}
        claims_so_far: list[Obj] = []
        for index, pod_claims in enumerate(scenario.pods(names)):
            created = _create(cluster, pod_claims, names.run_id)
            claims_so_far += created
            _check_kept(scenario, "claims", claims_so_far)
            pod = f"diff-{scenario.name}-{index}"
            claim_names = [c["metadata"]["name"] for c in created]
            claim_names += scenario.shared.get(index, ())
            manifest = pod_manifest(names, pod, claim_names, placement.get(index))
            cluster.kubectl("create", "-f", "-", input_text=json.dumps(manifest))
            shared = scenario.shared.get(index, ())
            verdict = _wait_scheduled(cluster, namespace, pod, claim_names, held=shared)
            keys = [f"{namespace}/{n}" for n in claim_names]
            inputs = [*classes, *slices, *extras, *node_objs, *allocated.values(), *created]
            inputs.append(manifest)
            code, report = run_kubectl_dra(workdir, inputs, keys)
            acceptable = tuple(nodes[i] for i in scenario.acceptable.get(index, ()))
            ours_node = next(
                (c.get("node") for c in report.get("claims", {}).values() if c.get("node")),
                None,
            )
            if acceptable and verdict.node in acceptable and verdict.node != ours_node:
                # Another equally good node: what would kubectl-dra pick there?
                code, report = run_kubectl_dra(workdir, inputs, keys, node=verdict.node)
            outcome = PodOutcome(
                pod=pod,
                node=verdict.node,
                refused=verdict.refused,
                ours_node=ours_node,
                acceptable=acceptable,
                inputs=inputs,
            )
            for name, key in zip(claim_names, keys, strict=True):
                outcome.scheduler[key], outcome.ours[key] = _compared(
                    verdict, name, key, code, report
                )
            outcomes.append(outcome)
            allocated.update(verdict.claims)
    return outcomes
