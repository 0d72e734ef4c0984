"""Scenarios over the slices the GPU plugin itself publishes (dra_kubelet_plugin.slices on
fake GPUs): dynamic MIG's partitionable devices and consumable shares, renamed to the
scenario's driver and node, so ``kubectl dra allocate`` and the kube-scheduler are compared
on exactly the counters and request policies real nodes carry."""

from __future__ import annotations

import tempfile
from pathlib import Path

from differential_objects import Names, Obj, claim, device_class, exactly, resource_slice
from differential_support import Scenario
from dra_kubelet_plugin.inventory import build_inventory
from dra_kubelet_plugin.slices import SlicePublication, SliceSpec, build_resource_slices
from dra_nvlib import DeviceLibConfig, open_device_lib
from dra_sharing import ConsumableMode, ConsumableShares

__all__ = ["plugin_consumable_shares", "plugin_dynamic_mig"]


def _plugin_slices(fleet: str, *, dynamic_mig: bool, shares: ConsumableShares) -> list[Obj]:
    with tempfile.TemporaryDirectory(prefix="diff-gpus-") as tmp:
        config = DeviceLibConfig(
            backend="fake",
            node_name="diff",
            fake_fleet=fleet,
            fake_state_path=Path(tmp) / "gpus.json",
        )
        with open_device_lib(config) as lib:
            devices = build_inventory(lib.gpus(), dynamic_mig=dynamic_mig)
    return build_resource_slices(
        SliceSpec(driver_name="gpu.nvidia.com", node_name="diff"),
        devices,
        generation=1,
        publication=SlicePublication(consumable=shares),
    )


def _renamed(n: Names, plugin: list[Obj]) -> list[Obj]:
    return [
        resource_slice(
            n,
            f"p{i}",
            devices=s["spec"].get("devices"),
            shared_counters=s["spec"].get("sharedCounters"),
            slice_count=len(plugin),
        )
        for i, s in enumerate(plugin)
    ]


def _profile(n: Names, profile: str) -> str:
    # Full GPUs have no profile: the type check first keeps the selector free of errors.
    attrs = f'device.attributes["{n.driver}"]'
    return f'{attrs}.type == "mig" && {attrs}.profile == "{profile}"'


def plugin_dynamic_mig() -> Scenario:
    """Two A100s as partitionable devices: MIG placements and full GPUs drawing on the
    same counters (split layout, 1.35+)."""
    plugin = _plugin_slices("2xA100-40GB", dynamic_mig=True, shares=ConsumableShares())

    def pods(n: Names) -> list[list[Obj]]:
        def mig(name: str, profile: str) -> Obj:
            return exactly(n, name, selectors=(_profile(n, profile),))

        full = exactly(n, "gpu", selectors=(f'device.attributes["{n.driver}"].type == "gpu"',))
        same_gpu = [{"requests": [], "matchAttribute": f"{n.driver}/parentUUID"}]
        return [
            # gpu-test4's shape: four MIG devices of one parent.
            [
                claim(
                    n,
                    "test4",
                    [
                        mig("a", "1g.5gb"),
                        mig("b", "1g.5gb"),
                        mig("c", "2g.10gb"),
                        mig("d", "3g.20gb"),
                    ],
                    constraints=same_gpu,
                )
            ],
            [claim(n, "big", [mig("e", "4g.20gb")])],
            [claim(n, "three", [mig("f", "3g.20gb")])],
            # Both GPUs are partly used now: their full GPUs' counters are taken.
            [claim(n, "whole", [full])],
        ]

    return Scenario(
        "plugin-dynamic-mig",
        lambda n: [device_class(n)],
        lambda n: _renamed(n, plugin),
        pods,
        requires=("slices:0.spec.sharedCounters", "slices:1.spec.devices.0.consumesCounters"),
        # The whole GPU: both GPUs' counters are partly taken by then.
        refused={3: "Unschedulable"},
    )


def plugin_consumable_shares() -> Scenario:
    """Two L4s published with ``--consumable-shares 4``: one-share claims pack onto a GPU up
    to four, memory requests are counted too."""
    shares = ConsumableShares(ConsumableMode.SHARES, 4)
    plugin = _plugin_slices("2xL4", dynamic_mig=False, shares=shares)

    def pods(n: Names) -> list[list[Obj]]:
        one = [claim(n, f"share-{i}", [exactly(n, "gpu")]) for i in range(5)]
        memory = {"requests": {"memory": "20Gi"}}
        two = {"requests": {"shares": "2"}}
        return [
            one[:2],
            one[2:],
            [claim(n, "memory", [exactly(n, "gpu", capacity=memory)])],
            [claim(n, "two-shares", [exactly(n, "gpu", capacity=two)])],
        ]

    return Scenario(
        "plugin-consumable-shares",
        lambda n: [device_class(n)],
        lambda n: _renamed(n, plugin),
        pods,
        requires=("slices:0.spec.devices.0.allowMultipleAllocations",),
    )
