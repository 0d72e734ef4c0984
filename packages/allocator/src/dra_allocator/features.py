"""Feature switches of the structured allocator, named as the Kubernetes feature gates."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .errors import AllocationError

# Kubernetes feature gate name -> attribute of Features.
GATE_NAMES: dict[str, str] = {
    "DRAPrioritizedList": "prioritized_list",
    "DRAAdminAccess": "admin_access",
    "DRADeviceTaints": "device_taints",
    "DRAPartitionableDevices": "partitionable_devices",
    "DRAConsumableCapacity": "consumable_capacity",
    "DRADeviceBindingConditions": "device_binding_conditions",
    "DRAResourceClaimDeviceStatus": "resource_claim_device_status",
    "DRAListTypeAttributes": "list_type_attributes",
    "DRAFractionalCapacityRange": "fractional_capacity_range",
}

# Upstream's allocator implementations (k8s.io/dynamic-resource-allocation/structured/
# internal/...), most stable first, with the allocator features each supports. NewAllocator
# takes the first whose features include every enabled one; so do we.
STABLE = "stable"
INCUBATING = "incubating"
EXPERIMENTAL = "experimental"
_STABLE_FEATURES = frozenset(
    {"admin_access", "prioritized_list", "partitionable_devices", "device_taints"}
)
_INCUBATING_FEATURES = _STABLE_FEATURES | {
    "consumable_capacity",
    "binding_and_status",
    "fractional_capacity_range",
}
VARIANTS: tuple[tuple[str, frozenset[str]], ...] = (
    (STABLE, _STABLE_FEATURES),
    (INCUBATING, _INCUBATING_FEATURES),
    (EXPERIMENTAL, _INCUBATING_FEATURES | {"list_type_attributes"}),
)
# Up to this minor release each variant supported less: stable nothing optional,
# incubating the stable core of 1.36, experimental also consumable capacity and binding
# conditions (1.36 moved those down a step).
SHIFTED_VARIANTS_UNTIL = 35
VARIANTS_1_35: tuple[tuple[str, frozenset[str]], ...] = (
    (STABLE, frozenset()),
    (INCUBATING, _STABLE_FEATURES),
    (EXPERIMENTAL, _STABLE_FEATURES | {"consumable_capacity", "binding_and_status"}),
)


# Kubernetes releases whose allocator behaviour is modelled (``--kube-version``), newest last.
# 1.35 is checked against upstream's v1.35.4 allocator (its "experimental" variant, the one
# the scheduler picks with DRAConsumableCapacity on), 1.36 and 1.37 against their own.
KUBE_MINORS: tuple[int, ...] = (35, 36, 37)
LATEST_KUBE_MINOR = KUBE_MINORS[-1]


def parse_kube_version(text: str) -> int:
    """The minor release of ``1.37``, ``v1.36`` or ``1.36.5``; refuses unmodelled ones."""
    parts = text.strip().lstrip("v").split(".")
    if len(parts) < 2 or parts[0] != "1" or not parts[1].isdigit():
        raise AllocationError(
            f"invalid Kubernetes version {text!r} (expected e.g. 1.37)", field="--kube-version"
        )
    minor = int(parts[1])
    if minor not in KUBE_MINORS:
        known = ", ".join(f"1.{m}" for m in KUBE_MINORS)
        raise AllocationError(
            f"the allocator of Kubernetes 1.{minor} is not modelled (known: {known})",
            field="--kube-version",
        )
    return minor


@dataclass(frozen=True, slots=True)
class Features:
    """Which optional DRA features the allocator honours.

    The defaults (every gate on but the alpha ``DRAListTypeAttributes``, as the kube-scheduler
    of 1.37 has them; 1.36 has no DRAFractionalCapacityRange) select upstream's
    incubating allocator; :attr:`variant` says which one a feature set selects.

    ``kube_minor`` picks the release whose allocator behaviour is reproduced where
    releases differ (e.g. 1.37 drops a config's request list when it covers every
    request, and tracks distinctAttribute per device instead of per request).
    """

    prioritized_list: bool = True
    admin_access: bool = True
    device_taints: bool = True
    partitionable_devices: bool = True
    consumable_capacity: bool = True
    device_binding_conditions: bool = True
    resource_claim_device_status: bool = True
    list_type_attributes: bool = False
    fractional_capacity_range: bool = True
    kube_minor: int = LATEST_KUBE_MINOR

    @property
    def fractional_range(self) -> bool:
        """DRAFractionalCapacityRange, a gate 1.37 added (1.36 always rounds on integers)."""
        return self.fractional_capacity_range and self.kube_minor >= 37

    @property
    def list_attributes(self) -> bool:
        """DRAListTypeAttributes as the allocator sees it (1.35 has no such gate)."""
        return self.list_type_attributes and self.kube_minor > SHIFTED_VARIANTS_UNTIL

    @property
    def binding_and_status(self) -> bool:
        """Binding conditions need both gates, as in the kube-scheduler."""
        return self.device_binding_conditions and self.resource_claim_device_status

    def allocator_features(self) -> frozenset[str]:
        """The allocator's own switches that are on (binding needs both of its gates)."""
        on = {attr for attr in GATE_NAMES.values() if getattr(self, attr)}
        on -= {"device_binding_conditions", "resource_claim_device_status"}
        if not self.fractional_range:
            on.discard("fractional_capacity_range")
        if self.kube_minor <= SHIFTED_VARIANTS_UNTIL:
            # 1.35 has no DRAListTypeAttributes gate: the scheduler ignores the name.
            on.discard("list_type_attributes")
        if self.binding_and_status:
            on.add("binding_and_status")
        return frozenset(on)

    @property
    def variant(self) -> str:
        """Which upstream implementation the kube-scheduler picks for these features.

        ``stable`` (only the stable core: no consumable capacity, no binding conditions)
        ignores capacity requests, refuses distinctAttribute, tries devices of a request in
        every order and pools in Go map order; ``incubating`` is the default;
        ``experimental`` is picked by alpha gates (DRAListTypeAttributes).
        """
        return _variant(self)

    @property
    def variant_knows_capacity(self) -> bool:
        """Whether the selected variant has the consumable-capacity code (capacity requests,
        distinctAttribute, binding conditions tried last); the others ignore or refuse them."""
        if self.kube_minor <= SHIFTED_VARIANTS_UNTIL:
            return self.variant == EXPERIMENTAL
        return self.variant != STABLE

    @property
    def random_pool_order(self) -> bool:
        """Whether upstream walks a node's pools in Go map order (random per call): the
        stable variant, and every variant of 1.35 (1.36 sorts them elsewhere)."""
        return self.variant == STABLE or self.kube_minor <= SHIFTED_VARIANTS_UNTIL

    @property
    def counters_by_pool_name(self) -> bool:
        """1.35 files counters under the pool name alone, reserves them before the taint and
        constraint checks and does not give them back when those reject the device."""
        return self.kube_minor <= SHIFTED_VARIANTS_UNTIL

    @classmethod
    def none(cls) -> Features:
        """Only the stable core: every optional feature off."""
        return cls(**dict.fromkeys(GATE_NAMES.values(), False))

    @classmethod
    def parse(cls, spec: str) -> Features:
        """Parse ``Gate[,Gate=false,...]``: the listed gates are on, all others off.

        ``all`` enables every feature, ``none`` none (useful with explicit ``Gate=true``).
        """
        values = dict.fromkeys(GATE_NAMES.values(), False)
        for raw in spec.split(","):
            item = raw.strip()
            if not item or item == "none":
                continue
            if item == "all":
                values = dict.fromkeys(GATE_NAMES.values(), True)
                continue
            name, _, setting = item.partition("=")
            attr = GATE_NAMES.get(name.strip())
            if attr is None:
                known = ", ".join(sorted(GATE_NAMES))
                raise AllocationError(
                    f"unknown feature {name.strip()!r} (known: {known}, all, none)",
                    field="--features",
                )
            setting = setting.strip().lower() or "true"
            if setting not in ("true", "false"):
                raise AllocationError(
                    f"feature {name.strip()}: value must be true or false, got {setting!r}",
                    field="--features",
                )
            values[attr] = setting == "true"
        return cls(**values)

    def enabled_gates(self) -> list[str]:
        """The Kubernetes gate names that are on, sorted."""
        return sorted(gate for gate, attr in GATE_NAMES.items() if getattr(self, attr))


# Features are frozen values; the allocator asks for the variant of the same few for every
# node it gathers pools for (the allocation controller: every node, every reconcile).
@lru_cache(maxsize=64)
def _variant(features: Features) -> str:
    on = features.allocator_features()
    variants = VARIANTS_1_35 if features.kube_minor <= SHIFTED_VARIANTS_UNTIL else VARIANTS
    for name, supported in variants:
        if on <= supported:
            return name
    return EXPERIMENTAL
