"""Why a claim cannot be allocated on a node, grouped and counted; or what would be picked.

The diagnosis first runs the real allocator. Only where it finds no solution are the
devices of the node examined request by request, with the same checks in the same order
as the search (selectors, use by other claims, counters, taints, capacity), so that the
reasons name the first obstacle of every device.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from . import capacity as cap
from .allocator import Allocated
from .cluster import Cluster
from .counters import CounterTracker
from .errors import AllocationError
from .model import MODE_ALL, ClaimInfo, DeviceInfo, RequestSpec
from .nodes import NodeInfo
from .pools import Pool
from .selectors import SelectorCompileFailure, evaluate
from .taints import untolerated_taint


@dataclass(slots=True)
class NodeDiagnosis:
    """One claim on one node."""

    node: str
    allocatable: bool
    picks: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    error: str | None = None
    # The requests short of devices, as data (the reasons say the same in words).
    shortfalls: list[RequestShortfall] = field(default_factory=list)


@dataclass(slots=True)
class RequestShortfall:
    """A request (or subrequest) with fewer usable devices on a node than it needs."""

    request: str
    class_name: str
    need: int
    usable: int
    # Selector expression -> how many of the node's devices it rejected first.
    false_selectors: Counter[str] = field(default_factory=Counter)
    # The devices those selectors rejected (to report the closest one's values).
    rejected: list[DeviceInfo] = field(default_factory=list)
    # Why the node's devices are not usable, one line per reason (as in ``reasons``).
    details: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ClaimDiagnosis:
    """One claim on every node examined."""

    claim: str
    nodes: list[NodeDiagnosis] = field(default_factory=list)

    def grouped(self) -> list[tuple[list[str], NodeDiagnosis]]:
        """Nodes with identical findings grouped together (first node's diagnosis shown)."""
        groups: dict[
            tuple[bool, tuple[str, ...], str | None, tuple[str, ...]],
            tuple[list[str], NodeDiagnosis],
        ] = {}
        for diag in self.nodes:
            key = (
                diag.allocatable,
                tuple(diag.reasons),
                diag.error,
                tuple(diag.picks) if diag.allocatable else (),
            )
            if diag.allocatable:
                key = (True, (), None, (diag.node,))
            if key in groups:
                groups[key][0].append(diag.node)
            else:
                groups[key] = ([diag.node], diag)
        return list(groups.values())


class _Tally:
    """Reasons with device counts and one example each."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, str] = {}

    def add(self, reason: str, example: str = "") -> None:
        """Count one device under the reason (the first example is kept)."""
        self.counts[reason] += 1
        if example and reason not in self.examples:
            self.examples[reason] = example

    def render(self) -> list[str]:
        """One line per reason, with the device count and an example."""
        out = []
        for reason, n in self.counts.items():
            devices = "device" if n == 1 else "devices"
            line = f"{reason} on {n} {devices}"
            if reason in self.examples:
                line += f" (e.g. {self.examples[reason]})"
            out.append(line)
        return out


def diagnose(
    cluster: Cluster, claims: Sequence[ClaimInfo], *, nodes: Sequence[str] | None = None
) -> list[ClaimDiagnosis]:
    """Diagnose the claims (allocated together, as one pod's) on each node."""
    result = [ClaimDiagnosis(claim=c.key) for c in claims]
    for name in nodes if nodes is not None else cluster.node_names():
        node = cluster.node(name)
        try:
            # A node provably short of devices is not searched: its findings say why.
            outcome = cluster.allocate_on(claims, node, skip_hopeless=True)
        except AllocationError as exc:
            for diag, claim in zip(result, claims, strict=True):
                try:
                    reasons, shortfalls = claim_findings(
                        cluster, claim, node, others=len(claims) > 1
                    )
                except AllocationError:
                    reasons, shortfalls = [], []
                diag.nodes.append(
                    NodeDiagnosis(
                        node=name,
                        allocatable=False,
                        error=str(exc),
                        reasons=reasons,
                        shortfalls=shortfalls,
                    )
                )
            continue
        if isinstance(outcome, Allocated):
            for diag, allocation in zip(result, outcome.allocations, strict=True):
                picks = [
                    f"{r['request']}: {r['driver']}/{r['pool']}/{r['device']}"
                    for r in allocation["devices"]["results"]
                ]
                diag.nodes.append(NodeDiagnosis(node=name, allocatable=True, picks=picks))
            continue
        for diag, claim in zip(result, claims, strict=True):
            reasons, shortfalls = claim_findings(cluster, claim, node, others=len(claims) > 1)
            diag.nodes.append(
                NodeDiagnosis(node=name, allocatable=False, reasons=reasons, shortfalls=shortfalls)
            )
    return result


def claim_reasons(cluster: Cluster, claim: ClaimInfo, node: NodeInfo, *, others: bool) -> list[str]:
    """Why the claim does not fit on the node."""
    return claim_findings(cluster, claim, node, others=others)[0]


def claim_findings(
    cluster: Cluster, claim: ClaimInfo, node: NodeInfo, *, others: bool
) -> tuple[list[str], list[RequestShortfall]]:
    """Why the claim does not fit on the node: the reasons, and the requests short of devices."""
    pools = cluster.pools_for(node)
    reasons: list[str] = []
    shortfalls: list[RequestShortfall] = []
    for pool in pools:
        if pool.incomplete:
            reasons.append(
                f"pool {pool} is incomplete (not all slices of its newest "
                "generation are published): its devices are not used"
            )
        elif pool.invalid:
            reasons.append(f"pool {pool} is invalid: {pool.invalid_reason}")
    if not any(p.candidates for p in pools):
        reasons.append("no ResourceSlice offers devices to this node")
        return reasons, shortfalls
    short = False
    usable_by_request: dict[str, list[DeviceInfo]] = {}
    for req in claim.requests:
        specs = list(req.first_available) or ([req.exact] if req.exact else [])
        for spec in specs:
            shortfall = RequestShortfall(
                request=spec.full_name, class_name=spec.class_name, need=0, usable=0
            )
            usable, lines = _request_reasons(cluster, spec, pools, shortfall)
            usable_by_request[spec.full_name] = usable
            need = spec.count if spec.mode != MODE_ALL else max(len(usable), 1)
            if len(usable) < need:
                short = True
                shortfall.need, shortfall.usable = need, len(usable)
                shortfall.details = list(lines)
                shortfalls.append(shortfall)
                reasons.append(
                    f"request {spec.full_name}: needs {need} device(s) of class "
                    f"{spec.class_name}, {len(usable)} usable"
                )
                reasons.extend(f"  {line}" for line in lines)
    if not short:
        reasons.extend(_constraint_reasons(claim, usable_by_request))
        if others:
            reasons.append("the pod's claims together need more devices than are usable")
    return reasons, shortfalls


def _request_reasons(
    cluster: Cluster, spec: RequestSpec, pools: Sequence[Pool], shortfall: RequestShortfall
) -> tuple[list[DeviceInfo], list[str]]:
    feats = cluster.features
    cls = cluster.classes.get(spec.class_name)
    if cls is None:
        return [], [f"device class {spec.class_name} does not exist"]
    tally = _Tally()
    usable: list[DeviceInfo] = []
    counters = CounterTracker(cluster.state, {})
    exprs = [(e, f"class {cls.name} selector #{i}") for i, e in enumerate(cls.selectors)]
    exprs += [(e, f"request selector #{i}") for i, e in enumerate(spec.selectors)]
    for pool in pools:
        for dev in pool.candidates:
            name = "/".join(dev.id)
            if dev.binding_conditions and not feats.binding_and_status:
                tally.add("has binding conditions, but DRADeviceBindingConditions is off", name)
                continue
            failed = _first_failing_selector(cluster, exprs, dev)
            if failed is not None:
                reason, false_expr = failed
                if reason in tally.examples:
                    tally.add(reason)  # one example a reason: its detail is not needed
                else:
                    detail = _false_detail(cluster, false_expr, dev) if false_expr else ""
                    tally.add(reason, f"{name}: {detail}" if detail else name)
                if false_expr:
                    shortfall.false_selectors[false_expr] += 1
                    shortfall.rejected.append(dev)
                continue
            if not spec.admin_access and dev.id in cluster.state.devices:
                owners = sorted(set(cluster.state.owners.get(dev.id, [])))
                tally.add(f"held by claim(s) {', '.join(owners) or '?'}", name)
                continue
            if dev.consumes_counters and not feats.partitionable_devices:
                tally.add("consumes counters, but DRAPartitionableDevices is off", name)
                continue
            if dev.consumes_counters and not counters.try_consume(dev, pool):
                sets = ", ".join(sorted({cs for cs, _ in dev.consumes_counters}))
                tally.add(f"shared counters exhausted (counter set {sets})", name)
                continue
            if dev.consumes_counters:
                counters.release(dev, pool)
            taint = untolerated_taint(dev, spec.tolerations) if feats.device_taints else None
            if taint is not None:
                tally.add(f"tainted {taint.key}={taint.value}:{taint.effect}, not tolerated", name)
                continue
            if feats.consumable_capacity and (dev.capacity or spec.capacity_requests):
                missing = cap.missing_capacity(dev, spec.capacity_requests)
                if missing is not None:
                    tally.add(f"lacks the requested capacity {missing}", name)
                    continue
                miss = cap.first_miss(
                    dev,
                    spec.capacity_requests,
                    allocated=cluster.state.capacity.get(dev.id),
                    allocating=None,
                    fractional=cluster.features.fractional_range,
                )
                if miss is not None:
                    reason, example = _capacity_text(miss)
                    tally.add(reason, f"{name}: {example}")
                    continue
            usable.append(dev)
    if not usable and not tally.counts:
        return usable, ["no device of the class on this node"]
    return usable, tally.render()


def _capacity_text(miss: cap.CapacityMiss) -> tuple[str, str]:
    """(reason, per-device detail): the capacity, what the request takes, what is left."""
    taken = cap.format_amount(miss.consumed)
    if miss.outside_policy:
        return (
            f"capacity {miss.name}: request of {taken} is outside the device's request policy",
            f"{cap.format_amount(miss.total)} in all",
        )
    return (
        f"not enough {miss.name} left (requested {taken})",
        f"{cap.format_amount(miss.left)} of {cap.format_amount(miss.total)} left",
    )


def _first_failing_selector(
    cluster: Cluster, exprs: Sequence[tuple[str | None, str]], dev: DeviceInfo
) -> tuple[str, str] | None:
    """(reason, the expression when it was false, else "") of the first selector failing."""
    for expr, label in exprs:
        if expr is None:
            return (f"{label} is not a CEL selector", "")
        try:
            value = evaluate(cluster.allocator.engine, expr, dev)
        except SelectorCompileFailure as exc:
            return (f"{label} does not compile: {exc}", "")
        if isinstance(value, Exception):
            return (f"{label} fails: {value}", "")
        if not value:
            return (f"{label} is false", expr)
    return None


def _false_detail(cluster: Cluster, expr: str, dev: DeviceInfo) -> str:
    """Which part of ``expr`` is false on the device (best effort)."""
    engine = cluster.allocator.engine
    try:
        if dev.cel_device is None:
            dev.cel_device = engine.device(dev)
        return engine.compile(expr).explain(dev.cel_device)
    except Exception as exc:  # explanation is best effort
        return f"(no explanation: {exc})"


def _constraint_reasons(claim: ClaimInfo, usable: dict[str, list[DeviceInfo]]) -> list[str]:
    out = []
    for con in claim.constraints:
        attr = con.match_attribute or con.distinct_attribute or ""
        kind = "matchAttribute" if con.match_attribute else "distinctAttribute"
        names = [
            n
            for n in usable
            if not con.requests or n in con.requests or n.split("/")[0] in con.requests
        ]
        values: Counter[str] = Counter()
        missing = 0
        for n in names:
            for dev in usable[n]:
                value = dev.attributes.get(attr)
                if value is None:
                    missing += 1
                else:
                    values[f"{value[1]}"] += 1
        detail = ", ".join(f"{v} on {c}" for v, c in sorted(values.items()))
        line = f"constraint {kind} {attr} cannot be met by the usable devices ({detail or 'none'}"
        if missing:
            line += f"; attribute missing on {missing}"
        out.append(line + ")")
    if not out:
        out.append("the requests together need more devices than are usable")
    return out
