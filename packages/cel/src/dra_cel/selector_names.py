"""Warnings about claims naming what this driver never publishes: selector attributes and
capacities (the webhook's and ``kubectl dra validate``'s), and DeviceClass names.

The API server compiles every selector of a claim and refuses what does not compile or
costs too much, before validating admission webhooks run, so those never reach the
webhook. What it cannot know is which attributes a driver publishes:
``device.attributes["gpu.nvidia.com"].productname`` compiles, and then fails on every
device at allocation (no such key; the pod stays pending). For each selector of a claim's
requests (``exactly``, ``firstAvailable`` subrequests, v1beta1's request-level
``selectors``), every constant lookup in the ``gpu.nvidia.com`` domain of
``device.attributes`` or ``device.capacity`` is compared with the names the driver
publishes (:mod:`dra_api_types.gpu_attributes`); an unknown one is an AdmissionReview
warning naming the field path, with the closest published name. The object is still
admitted: a newer driver may publish the name.

:func:`class_name_warning` does the same for a request's ``deviceClassName`` that is close
to, but not, one of the DeviceClasses the chart installs (``gpu.nvidia.con``).

Pure logic over decoded JSON.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any, Final

from dra_api_types.gpu_attributes import (
    DRIVER_DEVICE_CLASSES,
    GPU_ATTRIBUTES,
    GPU_CAPACITIES,
    is_published_attribute,
    is_published_capacity,
)
from dra_api_types.nvidia_v1beta1 import GPU_DRIVER
from dra_api_types.spelling import closest_name

from .errors import CelCompileError
from .footprint import constant_lookup
from .syntax import Call, Ident, Index, ListLit, MapLit, Node, Select, parse

__all__ = ["class_name_warning", "selector_warnings"]

_FIELDS: Final = {"attributes": "attribute", "capacity": "capacity"}


def selector_warnings(devices: Any, prefix: str) -> list[str]:
    """Warnings for the selectors of the DeviceClaim ``devices`` found at field path
    ``prefix`` (``spec.devices`` of a claim, ``spec.spec.devices`` of a template)."""
    return [
        _warning(path, which, name)
        for path, expression in _selectors(devices, prefix)
        for which, name in _unpublished_lookups(expression)
    ]


@lru_cache(maxsize=1024)
def _unpublished_lookups(expression: str) -> tuple[tuple[str, str], ...]:
    """Each (``attributes``|``capacity``, name) the expression looks up in the driver's
    domain and the driver does not publish, once, in order. Remembered: every claim made
    from one template repeats its template's selectors, each parsed again otherwise."""
    try:
        tree = parse(expression)
    except CelCompileError:
        return ()  # the API server refuses it before the webhook is asked
    return tuple(dict.fromkeys(_gpu_lookups(tree, shadowed=False)))


def _selectors(devices: Any, prefix: str) -> Iterator[tuple[str, str]]:
    requests = devices.get("requests") if isinstance(devices, Mapping) else None
    for i, request in enumerate(requests if isinstance(requests, Sequence) else ()):
        if not isinstance(request, Mapping):
            continue
        base = f"{prefix}.requests[{i}]"
        yield from _cel_of(request.get("exactly"), f"{base}.exactly")
        yield from _cel_of(request, base)  # v1beta1: selectors on the request itself
        subrequests = request.get("firstAvailable")
        for j, sub in enumerate(subrequests if isinstance(subrequests, Sequence) else ()):
            yield from _cel_of(sub, f"{base}.firstAvailable[{j}]")


def _cel_of(holder: Any, path: str) -> Iterator[tuple[str, str]]:
    selectors = holder.get("selectors") if isinstance(holder, Mapping) else None
    for k, selector in enumerate(selectors if isinstance(selectors, Sequence) else ()):
        cel = selector.get("cel") if isinstance(selector, Mapping) else None
        expression = cel.get("expression") if isinstance(cel, Mapping) else None
        if isinstance(expression, str):
            yield f"{path}.selectors[{k}].cel.expression", expression


def _gpu_lookups(node: Node, *, shadowed: bool) -> Iterator[tuple[str, str]]:
    """(``attributes``|``capacity``, name) of each constant lookup in the driver's domain.

    ``shadowed``: a comprehension variable named ``device`` hides the device below.
    """
    if not shadowed:
        found = _lookup(node)
        if found is not None:
            yield found
    if isinstance(node, Select):
        yield from _gpu_lookups(node.operand, shadowed=shadowed)
    elif isinstance(node, Index):
        yield from _gpu_lookups(node.operand, shadowed=shadowed)
        yield from _gpu_lookups(node.index, shadowed=shadowed)
    elif isinstance(node, Call):
        if node.target is not None:
            yield from _gpu_lookups(node.target, shadowed=shadowed)
        # A macro's variable named device shadows it in the macro's other arguments.
        binds_device = any(isinstance(a, Ident) and a.name == "device" for a in node.args[:2])
        for arg in node.args:
            yield from _gpu_lookups(arg, shadowed=shadowed or binds_device)
    elif isinstance(node, ListLit):
        for element in node.elements:
            yield from _gpu_lookups(element, shadowed=shadowed)
    elif isinstance(node, MapLit):
        for part in (*node.keys, *node.values):
            yield from _gpu_lookups(part, shadowed=shadowed)


def _lookup(node: Node) -> tuple[str, str] | None:
    """``device.<attributes|capacity>["gpu.nvidia.com"]`` then ``.name`` or ``["name"]``,
    when the driver does not publish that name."""
    found = constant_lookup(node)
    if found is None or found[1] != GPU_DRIVER:
        return None
    which, _, name = found
    known = is_published_attribute if which == "attributes" else is_published_capacity
    return None if known(name) else (which, name)


def _warning(path: str, which: str, name: str) -> str:
    names = GPU_ATTRIBUTES if which == "attributes" else GPU_CAPACITIES
    close = closest_name(name, names)
    hint = f" (did you mean {close!r}?)" if close else ""
    return f"{path}: {GPU_DRIVER} publishes no {_FIELDS[which]} {name!r}{hint}"


def class_name_warning(name: str) -> str | None:
    """A warning for a ``deviceClassName`` (that no DeviceClass at hand defines) which looks
    like one of the DeviceClasses of this driver but is none of them; None for those and
    for names unlike them (other drivers' classes)."""
    if name in DRIVER_DEVICE_CLASSES:
        return None
    close = closest_name(name, DRIVER_DEVICE_CLASSES)
    if close is None:
        return None
    return f"no DeviceClass {name!r}, and this driver installs none (did you mean {close!r}?)"
