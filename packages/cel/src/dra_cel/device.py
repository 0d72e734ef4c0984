"""The ``device`` variable that DRA CEL selectors see."""

from __future__ import annotations

from collections.abc import Callable, Mapping
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


#: An attribute's members in the API's order, each as ``(kind, model field)``: exactly one
#: is set on a valid attribute.
_MEMBERS = (
    ("int", "int_"),
    ("bool", "bool_"),
    ("string", "string"),
    ("version", "version"),
    ("ints", "ints"),
    ("bools", "bools"),
    ("strings", "strings"),
    ("versions", "versions"),
)
#: The kinds whose value is the CEL value as it is (nothing to convert, nothing can fail).
SCALAR_KINDS = frozenset(("int", "bool", "string"))
_LIST_KINDS = frozenset(("ints", "bools", "strings"))


def attribute_value(
    name: str,
    kind: str,
    value: object,
    *,
    parse_version: Callable[[str], Version] = Version.parse,
) -> AttributeValue:
    """An attribute's CEL value from its member (``kind``: the API's field name, ``int`` ...
    ``versions``) and that member's value; ``name`` (qualified) is for errors.

    ``parse_version`` parses a version's text (a caller may remember parses); it raises
    ``ValueError`` for an invalid one.

    Raises:
        CelRuntimeError: an invalid semantic version, or no value of a known kind: upstream
            fails the conversion, so every selector on the device fails.
    """
    if kind in SCALAR_KINDS:
        return value  # type: ignore[return-value]
    if kind == "version":
        try:
            return value if isinstance(value, Version) else parse_version(str(value))
        except ValueError as err:
            raise CelRuntimeError(
                f"device attribute {name}: invalid semantic version {value!r}: {err}"
            ) from err
    if kind == "versions" and isinstance(value, list | tuple):
        try:
            return [v if isinstance(v, Version) else parse_version(str(v)) for v in value]
        except ValueError as err:
            raise CelRuntimeError(
                f"device attribute {name}: invalid semantic version in {value!r}: {err}"
            ) from err
    if kind in _LIST_KINDS and isinstance(value, list | tuple):
        return list(value)
    raise CelRuntimeError(f"device attribute {name}: no value set")


def _attribute_value(driver: str, name: str, attribute: Any) -> AttributeValue:
    for kind, member in _MEMBERS:
        value = getattr(attribute, member, None)
        if value is not None:
            return attribute_value(qualify(driver, name), kind, value)
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
