"""Seeded random allocation scenarios for the Go-oracle differential test.

Every scenario is valid input (what the API server would have accepted and defaulted),
so both allocators see the same world: nodes with labels, one or two drivers with
node-local pools (sometimes split over several slices, sometimes incomplete), a
network-attached pool, partitionable devices consuming shared counters from their
own counter-set slice, devices with consumable capacity and request policies, taints
and DeviceTaintRules, binding conditions, claims that already hold devices (some with
admin access or shares), and pending claims with exact counts, ``All``, prioritized
lists, selectors that may fail at run time, tolerations, match/distinct constraints,
capacity requests and configs. The same seed always gives the same scenario.
"""

from __future__ import annotations

import random
from typing import Any

from dra_allocator.features import LATEST_KUBE_MINOR
from dra_e2e.go_allocator import OracleCase

Obj = dict[str, Any]
API = "resource.k8s.io/v1"
# The first release whose API server stores list-valued attributes (DRAListTypeAttributes).
LIST_ATTRIBUTES_SINCE = 36
MODELS = ("a100", "h100", "h200")
ZONES = ("zone-a", "zone-b")
GATES = (
    "DRAPrioritizedList",
    "DRAAdminAccess",
    "DRADeviceTaints",
    "DRAPartitionableDevices",
    "DRAConsumableCapacity",
    "DRADeviceBindingConditions",
    "DRAResourceClaimDeviceStatus",
    "DRAFractionalCapacityRange",
)


def _attrs(rng: random.Random, index: int) -> Obj:
    attrs: Obj = {
        "index": {"int": index},
        "model": {"string": rng.choice(MODELS)},
        "numa": {"int": rng.randint(0, 1)},
        "driverVersion": {"version": rng.choice(("1.0.0", "1.2.0", "2.0.0"))},
    }
    if rng.random() < 0.7:
        # Missing on some devices: selectors reading it fail at run time there.
        attrs["healthy"] = {"bool": rng.random() < 0.8}
    return attrs


def _taints(rng: random.Random) -> list[Obj]:
    if rng.random() > 0.15:
        return []
    effect = rng.choice(("NoSchedule", "NoExecute"))
    taint: Obj = {"key": rng.choice(("example.com/broken", "example.com/maint")), "effect": effect}
    if rng.random() < 0.5:
        taint["value"] = rng.choice(("yes", "soon"))
    return [taint]


class _Builder:
    def __init__(self, seed: int, *, capacity_focus: bool = False) -> None:
        self.rng = random.Random(seed)
        # A scenario centred on shareable devices and capacity requests (rounding).
        self.capacity_focus = capacity_focus
        self.seed = seed
        self.objects: list[Obj] = []
        self.devices: list[tuple[str, str, str, Obj]] = []  # driver, pool, device, device obj
        self.drivers = [f"d{i}.example.com" for i in range(self.rng.randint(1, 2))]
        self.nodes = [f"node-{i}" for i in range(self.rng.randint(1, 4))]
        if capacity_focus:
            self.nodes = self.nodes[:1]
        self.shareable = False  # set once a pool of devices with allowMultipleAllocations exists
        self.shared_class = ""  # a class of just those devices, when there is one

    def node_objects(self) -> None:
        for name in self.nodes:
            labels = {"kubernetes.io/hostname": name, "zone": self.rng.choice(ZONES)}
            self.objects.append(
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
            )

    def device(self, driver: str, pool: str, name: str, index: int) -> Obj:
        rng = self.rng
        dev: Obj = {"name": name, "attributes": _attrs(rng, index)}
        dev["capacity"] = {"memory": {"value": rng.choice(("16Gi", "40Gi", "80Gi"))}}
        taints = _taints(rng)
        if taints:
            dev["taints"] = taints
        if rng.random() < 0.06:
            dev["bindingConditions"] = ["example.com/ready"]
            dev["bindingFailureConditions"] = ["example.com/failed"]
        self.devices.append((driver, pool, name, dev))
        return dev

    def slice_obj(self, name: str, spec: Obj) -> None:
        self.objects.append(
            {"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}
        )

    def node_pools(self) -> None:
        rng = self.rng
        for driver in self.drivers:
            for node in self.nodes:
                if rng.random() < 0.15:
                    continue
                count = rng.randint(1, 2)
                # Now and then a pool whose second slice is missing (incomplete pool).
                published = count if rng.random() > 0.05 else count - 1
                for part in range(published):
                    devices = [
                        self.device(driver, node, f"dev-{part}-{i}", part * 10 + i)
                        for i in range(rng.randint(1, 4))
                    ]
                    self.slice_obj(
                        f"{driver}-{node}-{part}",
                        {
                            "driver": driver,
                            "nodeName": node,
                            "pool": {"name": node, "generation": 1, "resourceSliceCount": count},
                            "devices": devices,
                        },
                    )

    def network_pool(self) -> None:
        rng = self.rng
        if rng.random() > 0.3:
            return
        driver = self.drivers[0]
        selection: Obj
        if rng.random() < 0.5:
            selection = {"allNodes": True}
        else:
            zone = rng.choice(ZONES)
            selection = {
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}
                    ]
                }
            }
        devices = [self.device(driver, "net", f"net-{i}", 50 + i) for i in range(rng.randint(1, 3))]
        spec: Obj = {
            "driver": driver,
            "pool": {"name": "net", "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        }
        spec.update(selection)
        self.slice_obj(f"{driver}-net", spec)

    def partitionable_pool(self) -> None:
        rng = self.rng
        if rng.random() > 0.3:
            return
        driver = self.drivers[-1]
        node = rng.choice(self.nodes)
        pool = f"{node}-mig"
        slices = rng.randint(4, 8)
        self.slice_obj(
            f"{driver}-{pool}-counters",
            {
                "driver": driver,
                "pool": {"name": pool, "generation": 1, "resourceSliceCount": 2},
                "nodeName": node,
                "sharedCounters": [
                    {"name": "gpu-0", "counters": {"slices": {"value": str(slices)}}}
                ],
            },
        )
        devices = []
        for i, size in enumerate(rng.sample((1, 2, 3, 4, 7, 8), k=rng.randint(2, 5))):
            dev = self.device(driver, pool, f"part-{i}", 100 + i)
            dev["consumesCounters"] = [
                {"counterSet": "gpu-0", "counters": {"slices": {"value": str(size)}}}
            ]
            devices.append(dev)
        self.slice_obj(
            f"{driver}-{pool}-devices",
            {
                "driver": driver,
                "pool": {"name": pool, "generation": 1, "resourceSliceCount": 2},
                "nodeName": node,
                "devices": devices,
            },
        )

    def shared_pool(self) -> None:
        rng = self.rng
        if not self.capacity_focus and rng.random() > 0.3:
            return
        driver = self.drivers[0]
        node = rng.choice(self.nodes)
        pool = f"{node}-shared"
        devices = []
        for i in range(rng.randint(1, 2)):
            dev = self.device(driver, pool, f"shared-{i}", 200 + i)
            policy: Obj
            if rng.random() < 0.5:
                policy = {"default": "10Gi", "validRange": {"min": "5Gi", "step": "5Gi"}}
            else:
                policy = {"default": "20Gi", "validValues": ["10Gi", "20Gi", "40Gi"]}
            dev["capacity"] = {"memory": {"value": "80Gi", "requestPolicy": policy}}
            if rng.random() < (0.8 if self.capacity_focus else 0.5):
                # Fractional ranges and values (DRAFractionalCapacityRange): rounded on
                # milli values when every bound is exact in milli units.
                dev["capacity"]["memory"]["requestPolicy"] = rng.choice(
                    (
                        {"default": "1.5Gi", "validRange": {"min": "0.5Gi", "step": "1.5Gi"}},
                        {"validRange": {"min": "512Mi", "step": "0.25Gi", "max": "40Gi"}},
                        {"default": "1.5Gi", "validValues": ["0.5Gi", "1.5Gi", "20Gi"]},
                    )
                )
                dev["capacity"]["cores"] = {
                    "value": rng.choice(("4", "8")),
                    "requestPolicy": rng.choice(
                        (
                            {"default": "1", "validRange": {"min": "500m", "step": "0.25"}},
                            {"validRange": {"min": "0.5", "step": "1.5", "max": "6"}},
                            {"validRange": {"min": "100m", "step": "1"}},
                            {"validRange": {"min": "1n", "step": "1"}},  # not exact in milli
                            {"default": "0.5", "validValues": ["0.5", "1.5", "2500m"]},
                        )
                    ),
                }
            dev["allowMultipleAllocations"] = True
            self.shareable = True
            devices.append(dev)
        self.slice_obj(
            f"{driver}-{pool}",
            {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        )

    def classes(self) -> list[str]:
        rng = self.rng
        names = []
        for driver in self.drivers:
            name = f"class-{driver.split('.')[0]}"
            selectors = [{"cel": {"expression": f'device.driver == "{driver}"'}}]
            if rng.random() < 0.3:
                selectors.append(
                    {"cel": {"expression": f"device.attributes['{driver}'].numa <= 1"}}
                )
            spec: Obj = {"selectors": selectors}
            if rng.random() < 0.3:
                spec["config"] = [{"opaque": {"driver": driver, "parameters": {"class": name}}}]
            self.objects.append(
                {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}
            )
            names.append(name)
        if self.shareable and (self.capacity_focus or rng.random() < 0.6):
            # Requests of this class mostly ask for capacity: rounding gets exercised.
            driver = self.drivers[0]
            self.shared_class = "class-shared"
            selector = f"device.driver == '{driver}' && device.attributes['{driver}'].index >= 200"
            self.objects.append(
                {
                    "apiVersion": API,
                    "kind": "DeviceClass",
                    "metadata": {"name": self.shared_class},
                    "spec": {"selectors": [{"cel": {"expression": selector}}]},
                }
            )
        return names

    def taint_rules(self) -> None:
        rng = self.rng
        if rng.random() > 0.1 or not self.devices:
            return
        driver, pool, device, _ = rng.choice(self.devices)
        selector: Obj = {"driver": driver}
        if rng.random() < 0.7:
            selector["pool"] = pool
        if rng.random() < 0.5:
            selector["device"] = device
        self.objects.append(
            {
                "apiVersion": API,
                "kind": "DeviceTaintRule",
                "metadata": {"name": f"rule-{self.seed}"},
                "spec": {
                    "deviceSelector": selector,
                    "taint": {"key": "example.com/rule", "effect": "NoSchedule"},
                },
            }
        )

    def selector(self, driver: str) -> str:
        rng = self.rng
        # Drawn in this order so that a seed keeps meaning the same scenario.
        model, parity, memory = rng.choice(MODELS), rng.randint(0, 1), rng.choice(("20Gi", "40Gi"))
        return rng.choice(
            (
                f"device.attributes['{driver}'].model == '{model}'",
                f"device.attributes['{driver}'].index % 2 == {parity}",
                f"device.capacity['{driver}'].memory.compareTo(quantity('{memory}')) >= 0",
                f"device.attributes['{driver}'].healthy",  # runtime error where missing
                f"device.attributes['{driver}'].driverVersion.isGreaterThan(semver('1.1.0'))",
            )
        )

    def tolerations(self) -> list[Obj]:
        rng = self.rng
        if rng.random() > 0.2:
            return []
        toleration: Obj = {"key": rng.choice(("example.com/broken", "example.com/rule"))}
        if rng.random() < 0.5:
            toleration["operator"] = "Exists"
        else:
            toleration.update({"operator": "Equal", "value": "yes"})
        if rng.random() < 0.5:
            toleration["effect"] = rng.choice(("NoSchedule", "NoExecute"))
        return [toleration]

    def exact_body(self, class_name: str, driver: str) -> Obj:
        rng = self.rng
        body: Obj = {"deviceClassName": class_name}
        if rng.random() < 0.1:
            body["allocationMode"] = "All"
        else:
            body["allocationMode"] = "ExactCount"
            body["count"] = rng.choice((1, 1, 1, 2, 3))
            if class_name == self.shared_class and self.capacity_focus:
                body["count"] = 1  # one share each, so that the rounding decides
        if rng.random() < 0.4:
            body["selectors"] = [{"cel": {"expression": self.selector(driver)}}]
        tolerations = self.tolerations()
        if tolerations:
            body["tolerations"] = tolerations
        # Capacity requests mostly where a device takes them (a pool of shareable devices).
        if rng.random() < (0.7 if class_name == self.shared_class else 0.1):
            body["capacity"] = {"requests": {"memory": rng.choice(("5Gi", "10Gi", "20Gi", "30Gi"))}}
            if rng.random() < 0.5:
                requests = body["capacity"]["requests"]
                requests["memory"] = rng.choice(("700Mi", "1Gi", "1.75Gi", "3.1Gi", "25Gi"))
                if rng.random() < 0.6:
                    requests["cores"] = rng.choice(("0.3", "750m", "1.1", "2", "2.6", "1n"))
        return body

    def request(self, index: int, classes: list[str]) -> Obj:
        rng = self.rng
        pick = rng.randrange(len(classes))
        class_name, driver = classes[pick], self.drivers[pick]
        if self.shared_class and rng.random() < (0.8 if self.capacity_focus else 0.4):
            class_name, driver = self.shared_class, self.drivers[0]
        name = f"r{index}"
        if rng.random() < 0.2:
            subs = []
            for j in range(rng.randint(2, 3)):
                sub = self.exact_body(class_name, driver)
                subs.append({"name": f"s{j}", **sub})
            return {"name": name, "firstAvailable": subs}
        body = self.exact_body(class_name, driver)
        if rng.random() < 0.05:
            body["adminAccess"] = True
        return {"name": name, "exactly": body}

    def pending_claims(self, classes: list[str]) -> list[str]:
        rng = self.rng
        keys = []
        for c in range(rng.randint(1, 3)):
            requests = [self.request(i, classes) for i in range(rng.randint(1, 3))]
            devices: Obj = {"requests": requests}
            names = [r["name"] for r in requests]
            if len(requests) > 1 and rng.random() < 0.3:
                attr = rng.choice(("model", "numa"))
                driver = self.drivers[0]
                kind = rng.choice(("matchAttribute", "distinctAttribute"))
                constraint: Obj = {kind: f"{driver}/{attr}"}
                if rng.random() < 0.5:
                    constraint["requests"] = rng.sample(names, k=2)
                devices["constraints"] = [constraint]
            if rng.random() < 0.2:
                target = rng.choice(names)
                devices["config"] = [
                    {
                        "requests": [target],
                        "opaque": {"driver": self.drivers[0], "parameters": {"claim": c}},
                    }
                ]
            name = f"claim-{c}"
            self.objects.append(
                {
                    "apiVersion": API,
                    "kind": "ResourceClaim",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"devices": devices},
                }
            )
            keys.append(f"default/{name}")
        return keys

    def held_claims(self, classes: list[str]) -> None:
        rng = self.rng
        if not self.devices:
            return
        for h in range(rng.randint(0, 2)):
            driver, pool, device, dev = rng.choice(self.devices)
            result: Obj = {"request": "held", "driver": driver, "pool": pool, "device": device}
            shared = dev.get("allowMultipleAllocations", False)
            if shared:
                result["shareID"] = f"00000000-0000-0000-0000-00000000000{h}"
                result["consumedCapacity"] = {"memory": rng.choice(("10Gi", "40Gi"))}
            elif rng.random() < 0.1:
                result["adminAccess"] = True
            self.objects.append(
                {
                    "apiVersion": API,
                    "kind": "ResourceClaim",
                    "metadata": {"name": f"held-{h}", "namespace": "default"},
                    "spec": {
                        "devices": {
                            "requests": [
                                {
                                    "name": "held",
                                    "exactly": {
                                        "deviceClassName": classes[0],
                                        "allocationMode": "ExactCount",
                                        "count": 1,
                                    },
                                }
                            ]
                        }
                    },
                    "status": {"allocation": {"devices": {"results": [result]}}},
                }
            )

    def duplicate_device_name(self) -> None:
        """Now and then an invalid pool: a node slice repeats a device name."""
        if self.rng.random() > 0.03:
            return
        for obj in self.objects:
            devices = obj.get("spec", {}).get("devices") or []
            if obj["kind"] == "ResourceSlice" and len(devices) >= 2:
                devices[-1]["name"] = devices[0]["name"]
                return

    def pod(self, keys: list[str]) -> None:
        """Sometimes the pod using the claims, with node constraints, and tainted nodes."""
        rng = self.rng
        for obj in self.objects:
            if obj["kind"] == "Node" and rng.random() < 0.15:
                obj["spec"] = {"taints": [{"key": "example.com/node", "effect": "NoSchedule"}]}
        if rng.random() > 0.3 or self.capacity_focus:
            return
        spec: Obj = {
            "containers": [{"name": "main", "image": "busybox"}],
            "resourceClaims": [
                {"name": f"c{i}", "resourceClaimName": key.split("/", 1)[1]}
                for i, key in enumerate(keys)
            ],
        }
        if rng.random() < 0.5:
            spec["nodeSelector"] = {"zone": rng.choice(ZONES)}
        if rng.random() < 0.5:
            spec["tolerations"] = [{"key": "example.com/node", "operator": "Exists"}]
        self.objects.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "pod", "namespace": "default"},
                "spec": spec,
            }
        )

    def features(self) -> str | None:
        """Mostly the defaults; otherwise a gate subset aimed at one upstream variant.

        Upstream's NewAllocator picks its implementation from the enabled features:
        "stable" (no DRAConsumableCapacity or DRAFractionalCapacityRange, not both binding
        gates), "incubating" (the
        default) or "experimental" (an alpha gate, DRAListTypeAttributes); a third of the
        drawn subsets target each.
        """
        rng = self.rng
        if self.capacity_focus:
            # The defaults, or all of them but fractional ranges (integer rounding).
            draw = rng.random()
            if draw < 0.7:
                return None
            if draw < 0.9:
                return ",".join(g for g in GATES if g != "DRAFractionalCapacityRange")
        elif rng.random() > 0.4:
            return None
        target = rng.choice(("stable", "incubating", "experimental"))
        on = {gate: rng.random() < 0.5 for gate in GATES}
        if target == "stable":
            on["DRAConsumableCapacity"] = on["DRAFractionalCapacityRange"] = False
            if on["DRADeviceBindingConditions"]:
                on["DRAResourceClaimDeviceStatus"] = False
        elif target == "incubating" and not (
            on["DRAConsumableCapacity"]
            or on["DRAFractionalCapacityRange"]
            or (on["DRADeviceBindingConditions"] and on["DRAResourceClaimDeviceStatus"])
        ):
            on["DRAConsumableCapacity"] = True
        gates = [gate if value else f"{gate}=false" for gate, value in on.items()]
        if target == "experimental":
            gates.append("DRAListTypeAttributes")
        return ",".join(gates)


def _list_attributes(builder: _Builder, features: str | None) -> None:
    """With DRAListTypeAttributes, list-valued attributes and constraints on them.

    Drawn from a generator of their own after everything else, so that the other seeds'
    scenarios stay as they were.
    """
    if features is None or "DRAListTypeAttributes" not in features.split(","):
        return
    rng = random.Random(f"lists-{builder.seed}")
    for _, _, _, dev in builder.devices:
        if rng.random() < 0.85:
            links = sorted(rng.sample(range(4), rng.randint(1, 3)))
            dev["attributes"]["links"] = {"ints": links}
        if rng.random() < 0.5:
            zones = sorted(rng.sample(("a", "b", "c"), rng.randint(1, 2)))
            dev["attributes"]["zones"] = {"strings": zones}
    driver = builder.drivers[0]
    for obj in builder.objects:
        if obj["kind"] != "ResourceClaim" or "status" in obj:
            continue
        devices = obj["spec"]["devices"]
        if rng.random() > 0.6:
            continue
        kind = rng.choice(("matchAttribute", "distinctAttribute"))
        attr = f"{driver}/{rng.choice(('links', 'links', 'zones', 'numa'))}"
        constraints = devices.get("constraints")
        if constraints:
            constraints[0] = {k: v for k, v in constraints[0].items() if k == "requests"}
            constraints[0][kind] = attr
        else:
            devices["constraints"] = [{kind: attr}]


def random_case(seed: int, *, kube_minor: int = LATEST_KUBE_MINOR) -> OracleCase:
    """The scenario for ``seed``: objects plus the pending claims to allocate together.

    Objects are as release ``1.<kube_minor>`` stores them: before 1.36 the API server has
    no list-valued attributes (it drops them), so none are drawn.
    """
    focus = random.Random(f"capacity-{seed}").random() < 0.15
    b = _Builder(seed, capacity_focus=focus)
    b.node_objects()
    b.node_pools()
    b.network_pool()
    b.partitionable_pool()
    b.shared_pool()
    classes = b.classes()
    b.taint_rules()
    b.held_claims(classes)
    keys = b.pending_claims(classes)
    # Drawn last, so that adding them kept the earlier seeds' scenarios as they were.
    b.duplicate_device_name()
    features = b.features()
    if kube_minor >= LIST_ATTRIBUTES_SINCE:
        _list_attributes(b, features)
    b.pod(keys)
    return OracleCase(id=f"seed-{seed}", objects=b.objects, claims=keys, features=features)
