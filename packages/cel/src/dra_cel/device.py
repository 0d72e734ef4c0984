"""The ``device`` variable that DRA CEL selectors see."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeAlias

from dra_api_types import Quantity, Version

from .errors import CelRuntimeError

if TYPE_CHECKING:
    from dra_api_types import Device

AttributeValue: TypeAlias = (
    int | bool | str | Version | list[int] | list[bool] | list[str] | list[Version]
)
"""A typed attribute value; the list forms are Kubernetes 1.36's list-valued attributes."""


class DomainMap(dict[str, Any]):
    """``device.attributes`` / ``device.capacity``: domain -> {name -> value}.

    Upstream returns an empty map for a domain the device does not have, so that
    ``device.attributes['other.example.com'].x`` fails on the missing *attribute*
    rather than on the domain, and ``has()`` on it is simply false.
    """

    def __missing__(self, key: str) -> dict[str, Any]:
        return {}


def _group(flat: Mapping[str, Any]) -> DomainMap:
    grouped = DomainMap()
    for key, value in flat.items():
        domain, _, name = key.partition("/")
        grouped.setdefault(domain, {})[name] = value
    return grouped


@dataclass(frozen=True)
class CelDevice:
    """One device as seen by CEL: what ``device.*`` evaluates against.

    ``attributes`` and ``capacity`` are keyed by fully qualified names
    (``"gpu.nvidia.com/uuid"``); :func:`device_from_api` qualifies the driver's
    unqualified names.
    """

    driver: str
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    capacity: Mapping[str, Quantity] = field(default_factory=dict)
    allow_multiple_allocations: bool = False

    @cached_property
    def attribute_domains(self) -> DomainMap:
        """``device.attributes`` as CEL sees it: grouped by domain."""
        return _group(self.attributes)

    @cached_property
    def capacity_domains(self) -> DomainMap:
        """``device.capacity`` as CEL sees it: grouped by domain."""
        return _group(self.capacity)

    def __hash__(self) -> int:
        # The mappings are not hashable; equal devices still hash equally.
        return hash((self.driver, len(self.attributes), len(self.capacity)))


def qualify(driver: str, name: str) -> str:
    """Fully qualify an attribute or capacity name: bare names live in the driver's domain."""
    return name if "/" in name else f"{driver}/{name}"


def _version(driver: str, name: str, value: object) -> Version:
    if isinstance(value, Version):
        return value
    try:
        return Version.parse(str(value))
    except ValueError as err:
        raise CelRuntimeError(
            f"device attribute {qualify(driver, name)}: invalid semantic version {value!r}: {err}"
        ) from err


def _attribute_value(driver: str, name: str, attribute: Any) -> AttributeValue:
    # Exactly one field is set on a valid attribute; the order mirrors the API's.
    value = getattr(attribute, "int_", None)
    if value is not None:
        return int(value)
    value = getattr(attribute, "bool_", None)
    if value is not None:
        return bool(value)
    value = getattr(attribute, "string", None)
    if value is not None:
        return str(value)
    value = getattr(attribute, "version", None)
    if value is not None:
        return _version(driver, name, value)
    value = getattr(attribute, "ints", None)
    if value is not None:
        return [int(x) for x in value]
    value = getattr(attribute, "bools", None)
    if value is not None:
        return [bool(x) for x in value]
    value = getattr(attribute, "strings", None)
    if value is not None:
        return [str(x) for x in value]
    value = getattr(attribute, "versions", None)
    if value is not None:
        return [_version(driver, name, x) for x in value]
    raise CelRuntimeError(f"device attribute {qualify(driver, name)}: no value set")


def device_from_api(driver: str, device: Device) -> CelDevice:
    """Build the CEL view of an API ``Device`` published by ``driver``.

    Raises :class:`CelRuntimeError` for an attribute without a value or with an
    unparsable version, like upstream's conversion does before evaluation.
    """
    attributes: dict[str, AttributeValue] = {}
    for name, attribute in (device.attributes or {}).items():
        attributes[qualify(driver, name)] = _attribute_value(driver, name, attribute)
    capacity: dict[str, Quantity] = {}
    for name, cap in (device.capacity or {}).items():
        capacity[qualify(driver, name)] = cap.value
    allow_multiple = bool(getattr(device, "allow_multiple_allocations", None) or False)
    return CelDevice(
        driver=driver,
        attributes=attributes,
        capacity=capacity,
        allow_multiple_allocations=allow_multiple,
    )
