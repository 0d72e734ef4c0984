"""The plugin's feature gates: the one table of names, defaults, maturity and what is built.

The table holds NVIDIA's 13 driver gates with NVIDIA's defaults, the Kubernetes logging gates
NVIDIA's chart documents, and this project's own gates. A values file written for NVIDIA's
chart therefore starts this plugin: a gate that is accepted but not built yet only changes a
log line (see :func:`unimplemented`). NVIDIA's dependency rules are enforced as NVIDIA's
driver enforces them, at start. The chart's ``values.schema.json`` lists the same gates (a
chart test compares the two), so an unknown gate already fails ``helm install``.

Pure: parsing and checking only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from dra_kubelet_plugin.core.errors import ConfigurationError

__all__ = [
    "GATES",
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

_FLAG = "--feature-gates"


class Maturity(StrEnum):
    """Stage of a gate, as Kubernetes names them."""

    ALPHA = "alpha"
    BETA = "beta"
    GA = "ga"


class Origin(StrEnum):
    """Who defines a gate's meaning."""

    NVIDIA = "nvidia"  # NVIDIA's driver (pkg/featuregates)
    KUBERNETES = "kubernetes"  # component-base logging gates
    PROJECT = "project"  # this project's own


@dataclass(frozen=True)
class FeatureGate:
    """One gate: its name, default and maturity, and whether this driver acts on it.

    ``implemented``: the gate's on behaviour is built. ``off_built`` False: its off
    behaviour (NVIDIA's older one) is not; the driver then behaves as with the gate on, and
    an explicit ``false`` is reported as not implemented.
    """

    name: str
    default: bool
    maturity: Maturity
    origin: Origin
    implemented: bool
    summary: str
    off_built: bool = True

    def built(self, on: bool) -> bool:
        """Whether the driver does what this gate at ``on`` asks (a gate not built at all
        counts as not built either way: it is named whatever it is set to)."""
        return self.implemented and (on or self.off_built)


class RuleKind(StrEnum):
    """How two gates depend on each other."""

    REQUIRES = "requires"
    EXCLUDES = "excludes"


@dataclass(frozen=True)
class GateRule:
    """``gate`` on requires (or excludes) ``other`` on."""

    gate: str
    kind: RuleKind
    other: str

    def broken_by(self, gates: Mapping[str, bool]) -> bool:
        """Whether the effective ``gates`` break this rule."""
        if not gates.get(self.gate, False):
            return False
        other_on = gates.get(self.other, False)
        return not other_on if self.kind is RuleKind.REQUIRES else other_on

    def message(self) -> str:
        """What is wrong and how to fix it, in one line."""
        if self.kind is RuleKind.REQUIRES:
            return f"feature gate {self.gate} requires {self.other}=true"
        return f"feature gates {self.gate} and {self.other} cannot both be enabled"


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
        "CrashOnNVLinkFabricErrors", True, _B, _NV, False, "refuse to start on fabric errors"
    ),
    FeatureGate("DeviceMetadata", False, _A, _NV, True, "KEP-5304 device metadata"),
    FeatureGate("FabricManagerPartitioning", False, _A, _NV, False, "Fabric Manager partitions"),
    FeatureGate(
        "HostManagedIMEXDaemon",
        False,
        _A,
        _NV,
        True,
        "unlocks resources.computeDomains.imex.mode=hostManaged",
    ),
    FeatureGate("DRAListTypeAttributes", False, _A, _NV, False, "list-valued device attributes"),
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

_BY_NAME: Mapping[str, FeatureGate] = {g.name: g for g in GATES}


def defaults() -> dict[str, bool]:
    """Every gate at its default."""
    return {g.name: g.default for g in GATES}


def check_rules(gates: Mapping[str, bool]) -> None:
    """Raise on the first of NVIDIA's dependency rules that ``gates`` break.

    Raises:
        ConfigurationError: naming ``--feature-gates`` and the two gates.
    """
    for rule in RULES:
        if rule.broken_by(gates):
            raise ConfigurationError(_FLAG, rule.message())


def parse_feature_gates(text: str) -> tuple[dict[str, bool], frozenset[str]]:
    """Parse ``Gate=true,Other=false`` over the defaults; check the rules.

    Returns the effective gates and the names set explicitly in ``text``.

    Raises:
        ConfigurationError: an item that is not ``Gate=true|false``, an unknown gate (the
            message names it and lists the known ones), or a broken dependency rule.
    """
    gates = defaults()
    explicit: set[str] = set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip().lower()
        if not sep or value not in ("true", "false"):
            raise ConfigurationError(_FLAG, f"{item!r} is not Gate=true|false")
        if name not in _BY_NAME:
            known = ", ".join(g.name for g in GATES)
            raise ConfigurationError(_FLAG, f"unknown feature gate {name!r} (known: {known})")
        gates[name] = value == "true"
        explicit.add(name)
    check_rules(gates)
    return gates, frozenset(explicit)


def unimplemented(explicit: frozenset[str], gates: Mapping[str, bool]) -> dict[str, bool]:
    """The explicitly set gates whose value this driver accepts but does not act on."""
    return {
        g.name: gates[g.name]
        for g in GATES
        if g.name in explicit and (not g.implemented or not g.built(gates[g.name]))
    }
