"""Hand-written scenarios of the scheduler differential test about what the slices offer:
partitionable devices, node selection, pools, taints and DeviceTaintRules, binding
conditions, consumable capacity, and a selector failing at run time.
"""

from __future__ import annotations

from differential_objects import Names, Obj, attr, claim, dev, device_class, exactly, resource_slice
from differential_support import Scenario


def partitionable() -> Scenario:
    """Counters in their own slice (the 1.35+ layout). Half of gpu-0 taken by one claim
    blocks the full gpu-0 for the pod's other claim, which gets gpu-1; a later half fits in
    gpu-0."""

    def slices(n: Names) -> list[Obj]:
        counters = [
            {"name": f"gpu-{g}-mem", "counters": {"memory": {"value": "40Gi"}}} for g in (0, 1)
        ]
        devices: list[Obj] = []
        for g in (0, 1):
            whole = dev(f"gpu-{g}", kind="full")
            whole["consumesCounters"] = [
                {"counterSet": f"gpu-{g}-mem", "counters": {"memory": {"value": "40Gi"}}}
            ]
            devices.append(whole)
            for h in (0, 1):
                half = dev(f"gpu-{g}-half-{h}", kind="half")
                half["consumesCounters"] = [
                    {"counterSet": f"gpu-{g}-mem", "counters": {"memory": {"value": "20Gi"}}}
                ]
                devices.append(half)
        return [
            resource_slice(n, "counters", shared_counters=counters, slice_count=2),
            resource_slice(n, "devices", devices=devices, slice_count=2),
        ]

    def pods(n: Names) -> list[list[Obj]]:
        kind = attr(n, "kind")
        half = exactly(n, "half", selectors=(f'{kind} == "half"',))
        full = exactly(n, "full", selectors=(f'{kind} == "full"',))
        return [
            [claim(n, "half", [half]), claim(n, "full", [full])],
            [claim(n, "another-half", [half])],
        ]

    return Scenario(
        "partitionable",
        lambda n: [device_class(n)],
        slices,
        pods,
        requires=("slices:0.spec.sharedCounters", "slices:1.spec.devices.0.consumesCounters"),
    )


def node_selector() -> Scenario:
    """A pool that names its node by label selector, not nodeName: the allocation carries the
    slice's selector, and only the node with that hostname label fits."""

    def slices(n: Names) -> list[Obj]:
        selector = {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [n.node]}
                    ]
                }
            ]
        }
        devices = [dev("gpu-0"), dev("gpu-1")]
        return [resource_slice(n, "s", devices=devices, node_selection={"nodeSelector": selector})]

    def pods(n: Names) -> list[list[Obj]]:
        return [[claim(n, "by-label", [exactly(n, "gpu")])]]

    return Scenario("node-selector", lambda n: [device_class(n)], slices, pods)


def pools() -> Scenario:
    """Pool rules together: of the node's pool only the newest generation counts; an
    incomplete pool (one of two slices published) is skipped although it sorts first; a
    network-attached pool (allNodes) sorts before the node's and serves the first request."""

    def slices(n: Names) -> list[Obj]:
        return [
            resource_slice(n, "old", devices=[dev("old-0"), dev("old-1")], generation=1),
            resource_slice(n, "new", devices=[dev("new-0"), dev("new-1")], generation=2),
            resource_slice(
                n, "partial", devices=[dev("partial-0")], pool="a-incomplete", slice_count=2
            ),
            resource_slice(
                n,
                "fabric",
                devices=[dev("fabric-0", kind="nic")],
                pool="b-fabric",
                node_selection={"allNodes": True},
            ),
        ]

    def pods(n: Names) -> list[list[Obj]]:
        local = f'!has(device.attributes["{n.driver}"].kind)'
        nic = f'has(device.attributes["{n.driver}"].kind)'
        return [
            [claim(n, "mixed", [exactly(n, "any"), exactly(n, "local", selectors=(local,))])],
            [claim(n, "fabric-only", [exactly(n, "nic", selectors=(nic,))])],
        ]

    return Scenario(
        "pools", lambda n: [device_class(n)], slices, pods, refused={1: "Unschedulable"}
    )


def per_device_node_selection() -> Scenario:
    """One slice whose devices each name their node selection: one on this node, one on every
    node, one on a node that does not exist."""

    def slices(n: Names) -> list[Obj]:
        elsewhere = dev("elsewhere")
        elsewhere["nodeName"] = f"{n.node}-absent"
        here = dev("here")
        here["nodeName"] = n.node
        everywhere = dev("everywhere")
        everywhere["allNodes"] = True
        return [
            resource_slice(
                n,
                "s",
                devices=[elsewhere, everywhere, here],
                pool="per-device",
                node_selection={"perDeviceNodeSelection": True},
            )
        ]

    def pods(n: Names) -> list[list[Obj]]:
        return [[claim(n, "two", [exactly(n, "gpus", count=2)])]]

    return Scenario(
        "per-device-nodes",
        lambda n: [device_class(n)],
        slices,
        pods,
        requires=("slices:0.spec.perDeviceNodeSelection",),
    )


def taint_rules() -> Scenario:
    """DeviceTaintRules taint devices without touching their slices: a NoSchedule rule on
    gpu-0 (by driver, pool and device) and an effect-None rule on gpu-1. The claim without a
    toleration takes gpu-1; the next pod's tolerating claim takes gpu-0."""

    def slices(n: Names) -> list[Obj]:
        return [resource_slice(n, "s", devices=[dev(f"gpu-{i}") for i in range(3)])]

    def rules(n: Names) -> list[Obj]:
        def rule(suffix: str, selector: Obj, effect: str) -> Obj:
            return {
                "apiVersion": "resource.k8s.io/v1beta2",
                "kind": "DeviceTaintRule",
                "metadata": {"name": n.slice_name(suffix)},
                "spec": {
                    "deviceSelector": selector,
                    "taint": {"key": "example.com/maintenance", "value": "x", "effect": effect},
                },
            }

        return [
            rule("block", {"driver": n.driver, "pool": n.node, "device": "gpu-0"}, "NoSchedule"),
            rule("note", {"driver": n.driver, "device": "gpu-1"}, "None"),
        ]

    def pods(n: Names) -> list[list[Obj]]:
        toleration = {"key": "example.com/maintenance", "operator": "Exists"}
        return [
            [claim(n, "plain", [exactly(n, "gpu")])],
            [claim(n, "tolerant", [exactly(n, "gpu", tolerations=[toleration])])],
        ]

    return Scenario("taint-rules", lambda n: [device_class(n)], slices, pods, extra=rules)


def cel_runtime_error() -> Scenario:
    """The selector reads an attribute gpu-0 lacks: a CEL runtime error aborts the attempt
    (the scheduler reports an error, kubectl-dra exits 2), it is not "no match". The class
    selector is fine, so a later claim with a guarded selector still allocates."""

    def slices(n: Names) -> list[Obj]:
        return [resource_slice(n, "s", devices=[dev("gpu-0"), dev("gpu-1", model="a100")])]

    def pods(n: Names) -> list[list[Obj]]:
        model = attr(n, "model")
        guarded = f'has({model}) && {model} == "a100"'
        return [
            [claim(n, "unguarded", [exactly(n, "gpu", selectors=(f'{model} == "a100"',))])],
            [claim(n, "guarded", [exactly(n, "gpu", selectors=(guarded,))])],
        ]

    return Scenario(
        "cel-error", lambda n: [device_class(n)], slices, pods, refused={0: "SchedulerError"}
    )


def binding_conditions() -> Scenario:
    """Devices that need binding conditions: the scheduler allocates them (the results carry
    the conditions) and then waits for a driver that never comes, so the pod stays unbound. A
    network-attached device (allNodes) that binds to its node makes the allocation
    node-specific."""

    def slices(n: Names) -> list[Obj]:
        def attached(name: str) -> Obj:
            out = dev(name)
            out["bindingConditions"] = ["attached"]
            out["bindingFailureConditions"] = ["failed"]
            out["bindsToNode"] = True
            return out

        return [
            resource_slice(
                n,
                "fabric",
                devices=[attached("fabric-0")],
                pool="a-fabric",
                node_selection={"allNodes": True},
            ),
            resource_slice(n, "local", devices=[attached("gpu-0"), dev("gpu-1")]),
        ]

    def pods(n: Names) -> list[list[Obj]]:
        return [
            [claim(n, "fabric", [exactly(n, "any")])],
            [claim(n, "two", [exactly(n, "gpus", count=2)])],
        ]

    return Scenario(
        "binding-conditions",
        lambda n: [device_class(n)],
        slices,
        pods,
        requires=("slices:0.spec.devices.0.bindingConditions",),
    )


def taints() -> Scenario:
    """A NoSchedule taint keeps gpu-0 from the claim without a toleration; the tolerating
    claim of the same pod takes it."""

    def slices(n: Names) -> list[Obj]:
        tainted = dev("gpu-0")
        tainted["taints"] = [
            {"key": "example.com/degraded", "value": "ecc", "effect": "NoSchedule"}
        ]
        return [resource_slice(n, "s", devices=[tainted, dev("gpu-1"), dev("gpu-2")])]

    def pods(n: Names) -> list[list[Obj]]:
        toleration = {"key": "example.com/degraded", "operator": "Exists", "effect": "NoSchedule"}
        return [
            [
                claim(n, "strict", [exactly(n, "gpu")]),
                claim(n, "tolerant", [exactly(n, "gpu", tolerations=[toleration])]),
            ]
        ]

    return Scenario(
        "taints",
        lambda n: [device_class(n)],
        slices,
        pods,
        requires=("slices:0.spec.devices.0.taints",),
    )


def consumable_capacity() -> Scenario:
    """One shareable device; requests are rounded up to the policy's step and share it."""

    def slices(n: Names) -> list[Obj]:
        shared = dev("gpu-0")
        shared["allowMultipleAllocations"] = True
        shared["capacity"] = {
            "memory": {
                "value": "80Gi",
                "requestPolicy": {
                    "default": "10Gi",
                    "validRange": {"min": "10Gi", "step": "10Gi"},
                },
            }
        }
        return [resource_slice(n, "s", devices=[shared, dev("gpu-1")])]

    def pods(n: Names) -> list[list[Obj]]:
        memory = {"requests": {"memory": "25Gi"}}
        return [
            [
                claim(n, "rounded", [exactly(n, "gpu", capacity=memory)]),
                claim(n, "default", [exactly(n, "gpu")]),
            ],
            [claim(n, "rest", [exactly(n, "gpu", capacity={"requests": {"memory": "40Gi"}})])],
            # gpu-0 is full and gpu-1 has no memory capacity to consume.
            [claim(n, "more", [exactly(n, "gpu", capacity={"requests": {"memory": "10Gi"}})])],
        ]

    return Scenario(
        "consumable",
        lambda n: [device_class(n)],
        slices,
        pods,
        requires=("slices:0.spec.devices.0.allowMultipleAllocations",),
        refused={2: "Unschedulable"},
    )


def consumable_policies() -> Scenario:
    """Request policies and quantity formats: decimal units rounded up to a step, a set of
    valid values, and a capacity without a policy (a claim that names no amount takes all)."""

    def slices(n: Names) -> list[Obj]:
        stepped = dev("stepped", slot=0)
        stepped["allowMultipleAllocations"] = True
        stepped["capacity"] = {
            "bandwidth": {
                "value": "100G",
                "requestPolicy": {
                    "default": "1500M",
                    "validRange": {"min": "1500M", "max": "60G", "step": "1500M"},
                },
            }
        }
        valued = dev("valued", slot=1)
        valued["allowMultipleAllocations"] = True
        valued["capacity"] = {
            "memory": {
                "value": "32Gi",
                "requestPolicy": {"default": "1Gi", "validValues": ["1Gi", "4Gi", "16Gi"]},
            }
        }
        plain = dev("plain", slot=2)
        plain["allowMultipleAllocations"] = True
        plain["capacity"] = {"memory": {"value": "8Gi"}}
        return [resource_slice(n, "s", devices=[stepped, valued, plain])]

    def pods(n: Names) -> list[list[Obj]]:
        slots = {"stepped": 0, "valued": 1, "plain": 2}

        def on(device: str, **capacity: str) -> list[Obj]:
            selector = f'device.attributes["{n.driver}"].slot == {slots[device]}'
            body: Obj = {}
            if capacity:
                body["capacity"] = {"requests": capacity}
            return [exactly(n, "r", selectors=(selector,), **body)]

        return [
            [
                claim(n, "two-g", on("stepped", bandwidth="2G")),
                claim(n, "default-bw", on("stepped")),
                claim(n, "two-gi", on("valued", memory="2Gi")),
                claim(n, "default-mem", on("valued")),
            ],
            [
                claim(n, "all-of-plain", on("plain")),
                claim(n, "big-bw", on("stepped", bandwidth="40G")),
            ],
            [claim(n, "more-plain", on("plain", memory="1Gi"))],
        ]

    return Scenario(
        "consumable-policies",
        lambda n: [device_class(n)],
        slices,
        pods,
        requires=("slices:0.spec.devices.0.allowMultipleAllocations",),
        refused={2: "Unschedulable"},
    )
