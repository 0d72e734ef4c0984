"""Feature switches of the structured allocator, named as the Kubernetes feature gates."""

from __future__ import annotations

from dataclasses import dataclass, fields

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
}


@dataclass(frozen=True, slots=True)
class Features:
    """Which optional DRA features the allocator honours (all on: the incubating variant)."""

    prioritized_list: bool = True
    admin_access: bool = True
    device_taints: bool = True
    partitionable_devices: bool = True
    consumable_capacity: bool = True
    device_binding_conditions: bool = True
    resource_claim_device_status: bool = True

    @property
    def binding_and_status(self) -> bool:
        """Binding conditions need both gates, as in the kube-scheduler."""
        return self.device_binding_conditions and self.resource_claim_device_status

    @classmethod
    def none(cls) -> Features:
        """Only the stable core: every optional feature off."""
        return cls(**{f.name: False for f in fields(cls)})

    @classmethod
    def parse(cls, spec: str) -> Features:
        """Parse ``Gate[,Gate=false,...]``: the listed gates are on, all others off.

        ``all`` enables every feature, ``none`` none (useful with explicit ``Gate=true``).
        """
        values = {f.name: False for f in fields(cls)}
        for raw in spec.split(","):
            item = raw.strip()
            if not item or item == "none":
                continue
            if item == "all":
                values = {f.name: True for f in fields(cls)}
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
