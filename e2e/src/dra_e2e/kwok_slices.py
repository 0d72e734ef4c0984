"""The ResourceSlices of a simulated node, built and published by the GPU plugin's own code.

Each kwok node stands for one GPU node of a mixed fleet (:func:`fleet_of`: GB200, H100 and
MIG-partitioned A100 nodes in turn). Its slices come out of the same path as
``dra-kubelet-plugin --print-resource-slices``: the plugin's settings parser, the fake nvlib
fleet held in memory, the plugin's device enumeration and slice source, and the kubelet
core's :class:`~dra_kubelet_core.publisher.SlicePublisher` writing them to the API server.
Nothing here writes slice YAML by hand, so a scale run measures what the plugin publishes.

GB200 nodes (NVLink, so ComputeDomains) also get the compute-domain plugin's slice
(:func:`publish_channel_slices`: its ``compute_domain_slices``, ``daemon-0`` and
``channel-0``, through the same publisher), so ComputeDomain channel claims can be allocated
on them.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dra_api_types import COMPUTE_DOMAIN_DRIVER
from dra_computedomain.plugin_driver import compute_domain_slices
from dra_kube_client import JsonTransport
from dra_kubelet_core.health import HealthHub
from dra_kubelet_core.metrics import PluginMetrics
from dra_kubelet_core.publisher import SlicePublisher, SliceSource
from dra_kubelet_plugin.backend import open_devices
from dra_kubelet_plugin.plugin import enumerate_devices, publication_of, publishable
from dra_kubelet_plugin.settings import DRIVER_NAME, Settings, build_parser, settings_from_args
from dra_kubelet_plugin.slices import SliceSpec, gpu_slice_source

#: The label naming a simulated node's fleet kind, for nodeSelectors.
FLEET_LABEL = "dra-e2e/fleet"
#: The MIG layout every A100 of a MIG node starts with (as mig-parted leaves it): one 3g and
#: two 1g devices, so claims for either profile fit.
A100_MIG_LAYOUT = "3g.20gb/2x1g.5gb"


@dataclass(frozen=True)
class FleetKind:
    """One kind of GPU node: its label value and the fake fleet spec of ``gpus`` GPUs."""

    name: str
    model: str
    options: str = ""
    #: whether the node also publishes the compute-domain plugin's devices (NVLink nodes)
    channels: bool = False

    def spec(self, gpus: int) -> str:
        """The fake fleet spec of a node with ``gpus`` of this kind."""
        return f"{gpus}x{self.model}{self.options}"


GB200 = FleetKind("gb200", "GB200", channels=True)
H100 = FleetKind("h100", "H100-80GB")
A100_MIG = FleetKind("a100-mig", "A100-40GB", f":mig={A100_MIG_LAYOUT}")
#: The mix, in the order node indices cycle through.
FLEET_MIX: tuple[FleetKind, ...] = (GB200, H100, A100_MIG)


def fleet_of(index: int, mix: Sequence[FleetKind] = FLEET_MIX) -> FleetKind:
    """The kind of simulated node ``index``: the mix in turn, so every kind is evenly spread."""
    return mix[index % len(mix)]


def plugin_settings(
    node_name: str, fleet: str, *, environ: Mapping[str, str] | None = None
) -> Settings:
    """The GPU plugin's settings for a fake node printing its slices: the fleet lives in
    memory and nothing is written (the plugin directory is never created)."""
    scratch = Path(tempfile.gettempdir()) / "dra-e2e-kwok-unused"
    args = build_parser(environ or {}).parse_args(
        [
            "--device-backend=fake",
            f"--fake-gpus={fleet}",
            f"--node-name={node_name}",
            f"--kubelet-plugins-directory-path={scratch}",
            "--print-resource-slices",
        ]
    )
    return settings_from_args(args)


def node_slice_source(settings: Settings, *, node_uid: str = "") -> tuple[SliceSource, HealthHub]:
    """The plugin's slice source for the node ``settings`` describe, and its (all-healthy)
    health hub; with ``node_uid`` the slices are owned by the Node, so deleting the Node
    garbage-collects them as it does a real node's."""
    with open_devices(settings) as lib:
        devices = enumerate_devices(lib, None, dynamic_mig=settings.gate("DynamicMIG"))
    taints = settings.gate("DeviceTaints")
    published = publishable(devices, taints=taints)
    hub = HealthHub(settings.node_name)
    spec = SliceSpec(driver_name=DRIVER_NAME, node_name=settings.node_name, node_uid=node_uid)
    source = gpu_slice_source(spec, lambda: published, hub, publication_of(settings))
    return source, hub


def publish_node_slices(
    transport: JsonTransport,
    settings: Settings,
    *,
    node_uid: str = "",
    metrics: PluginMetrics | None = None,
) -> bool:
    """Publish the node's pool once through the kubelet core's publisher; return whether it
    wrote anything (False: the API server already held exactly these slices)."""
    source, hub = node_slice_source(settings, node_uid=node_uid)
    publisher = SlicePublisher(
        transport=transport,
        driver_name=DRIVER_NAME,
        node_name=settings.node_name,
        slices=source,
        health=hub,
        metrics=metrics or PluginMetrics(),
    )
    return publisher.reconcile_once()


def publish_channel_slices(
    transport: JsonTransport,
    node_name: str,
    *,
    node_uid: str = "",
    metrics: PluginMetrics | None = None,
) -> bool:
    """Publish the compute-domain plugin's pool of ``node_name`` (its daemon slot and IMEX
    channel) once through the kubelet core's publisher, owned by the Node when ``node_uid``
    is given; return whether it wrote anything."""
    publisher = SlicePublisher(
        transport=transport,
        driver_name=COMPUTE_DOMAIN_DRIVER,
        node_name=node_name,
        slices=lambda generation: compute_domain_slices(node_name, node_uid or None, generation),
        health=HealthHub(node_name),
        metrics=metrics or PluginMetrics(),
    )
    return publisher.reconcile_once()
