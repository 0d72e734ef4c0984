"""NVIDIA's feature gates: the one table of names, defaults, maturity and what is built.

The table holds NVIDIA's 14 driver gates with NVIDIA's defaults, the Kubernetes logging gates
NVIDIA's chart documents, and this project's own gates. Every component of the driver (the
GPU and the compute-domain kubelet plugins, the compute-domain controller, the admission
webhook, which refuses a sharing config whose gate is off) takes the same
``--feature-gates`` from the chart, so they share this table. A values file written for
NVIDIA's chart therefore starts this plugin: a gate that is accepted but not built yet only
changes a log line (see :func:`unimplemented`). NVIDIA's dependency rules are enforced as
NVIDIA's driver enforces them, at start. The chart's ``values.schema.json`` lists the same
gates (a chart test compares the two), so an unknown gate already fails ``helm install``.

Pure: parsing and checking only (the machinery is :mod:`dra_api_types.feature_gates`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dra_api_types.feature_gates import (
    FeatureGate,
    GateRule,
    GateTable,
    Maturity,
    Origin,
    RuleKind,
)

__all__ = [
    "GATES",
    "NVIDIA_GATES",
    "RULES",
    "FeatureGate",
    "GateRule",
    "Maturity",
    "Origin",
    "RuleKind",
    "check_rules",
    "defaults",
    "parse_feature_gates",
    "unimplemented",
]

_A, _B = Maturity.ALPHA, Maturity.BETA
_NV, _K8S, _OWN = Origin.NVIDIA, Origin.KUBERNETES, Origin.PROJECT

#: Every gate the plugin accepts.
GATES: Sequence[FeatureGate] = (
    FeatureGate("TimeSlicingSettings", False, _A, _NV, True, "time-slicing sharing settings"),
    FeatureGate("MPSSupport", False, _A, _NV, True, "MPS sharing (control daemon per claim)"),
    FeatureGate(
        "IMEXDaemonsWithDNSNames",
        True,
        _B,
        _NV,
        True,
        "IMEX daemons addressed by DNS names (/etc/hosts); false (IP-address nodes config) is "
        "not built: behaves as true",
        off_built=False,
    ),
    FeatureGate("PassthroughSupport", False, _A, _NV, True, "vfio-pci passthrough GPUs"),
    FeatureGate(
        "NVMLDeviceHealthCheck",
        False,
        _A,
        _NV,
        False,
        "NVIDIA's NVML XID watch; here the watch is DeviceHealthCheck and DeviceTaints (on)",
    ),
    FeatureGate("DynamicMIG", False, _A, _NV, True, "MIG devices created on demand"),
    FeatureGate(
        "ComputeDomainCliques",
        True,
        _B,
        _NV,
        True,
        "daemons register in ComputeDomainClique objects; false (in the ComputeDomain's "
        "status) is not built: behaves as true",
        off_built=False,
    ),
    FeatureGate(
        "CrashOnNVLinkFabricErrors",
        True,
        _B,
        _NV,
        True,
        "refuse to start on NVLink fabric errors; false: fall back to no clique",
    ),
    FeatureGate("DeviceMetadata", False, _A, _NV, True, "KEP-5304 device metadata"),
    FeatureGate(
        "FabricManagerPartitioning",
        False,
        _A,
        _NV,
        True,
        "Fabric Manager partitions: partitionN attributes, activated at prepare (fake Fabric "
        "Manager; no libnvfm binding for real nodes)",
    ),
    FeatureGate(
        "HostManagedIMEXDaemon",
        False,
        _A,
        _NV,
        True,
        "unlocks resources.computeDomains.imex.mode=hostManaged",
    ),
    FeatureGate(
        "NodeLocalFabricIPC",
        False,
        _A,
        _NV,
        False,
        "single-node IMEX channel on nodes without an NVLink clique",
    ),
    FeatureGate(
        "DRAListTypeAttributes",
        False,
        _A,
        _NV,
        True,
        "numaNode published as a list (ints), as NVIDIA; needs the Kubernetes gate of that name",
    ),
    FeatureGate(
        "ConsumableShares", False, _A, _NV, True, "consumable capacity (--consumable-shares)"
    ),
    FeatureGate(
        "ContextualLogging", True, _B, _K8S, False, "logs are always structured JSON lines"
    ),
    FeatureGate("LoggingAlphaOptions", False, _A, _K8S, False, "alpha logging options"),
    FeatureGate("LoggingBetaOptions", True, _B, _K8S, False, "beta logging options"),
    FeatureGate(
        "DeviceHealthCheck", True, _B, _OWN, True, "DRA health service and GPU health watch"
    ),
    FeatureGate("DeviceTaints", True, _B, _OWN, True, "device taints for unhealthy GPUs"),
)

#: NVIDIA's dependency rules between gates (pkg/featuregates), checked at start.
RULES: Sequence[GateRule] = (
    GateRule("ComputeDomainCliques", RuleKind.REQUIRES, "IMEXDaemonsWithDNSNames"),
    GateRule("DynamicMIG", RuleKind.EXCLUDES, "PassthroughSupport"),
    GateRule("DynamicMIG", RuleKind.EXCLUDES, "NVMLDeviceHealthCheck"),
    GateRule("DynamicMIG", RuleKind.EXCLUDES, "MPSSupport"),
    GateRule("PassthroughSupport", RuleKind.EXCLUDES, "NVMLDeviceHealthCheck"),
    GateRule("DeviceMetadata", RuleKind.REQUIRES, "PassthroughSupport"),
)


#: The table with its rules.
NVIDIA_GATES = GateTable(GATES, RULES)


def defaults() -> dict[str, bool]:
    """Every gate at its default."""
    return NVIDIA_GATES.defaults()


def check_rules(gates: Mapping[str, bool]) -> None:
    """Raise on the first of NVIDIA's dependency rules that ``gates`` break.

    Raises:
        FeatureGateError: naming ``--feature-gates`` and the two gates.
    """
    NVIDIA_GATES.check_rules(gates)


def parse_feature_gates(text: str) -> tuple[dict[str, bool], frozenset[str]]:
    """Parse ``Gate=true,Other=false`` over the defaults; check the rules.

    Returns the effective gates and the names set explicitly in ``text``.

    Raises:
        FeatureGateError: an item that is not ``Gate=true|false``, an unknown gate (the
            message names it and lists the known ones), or a broken dependency rule.
    """
    return NVIDIA_GATES.parse(text)


def unimplemented(explicit: frozenset[str], gates: Mapping[str, bool]) -> dict[str, bool]:
    """The explicitly set gates whose value this driver accepts but does not act on."""
    return NVIDIA_GATES.unimplemented(explicit, gates)
