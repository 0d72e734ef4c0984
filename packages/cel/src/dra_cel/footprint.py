"""What of the ``device`` variable a selector reads: the parts its value can depend on.

A selector's value (or its runtime error) is a function of the device parts it reads: its
driver, ``allowMultipleAllocations``, the attributes and capacities it looks up by constant
names, and the whole attribute or capacity domains it uses as maps. Two devices equal in
those parts get the same result, so a caller evaluating one selector on thousands of devices
(``kubectl dra explain`` on 1,000 nodes: the class selector of every device) may evaluate it
once per distinct footprint value instead of once per device.

The analysis is conservative: any other use of ``device`` (the whole ``device`` or
``device.attributes`` map, a domain looked up by a computed key, a macro variable named
``device``) has no footprint (``None``): the selector must then be evaluated on each device.
"""

from __future__ import annotations

from dataclasses import dataclass

from .syntax import Call, Const, Ident, Index, ListLit, MapLit, Node, Select

__all__ = ["Footprint", "constant_lookup", "footprint"]

_MAPS = ("attributes", "capacity")


@dataclass(frozen=True, slots=True)
class Footprint:
    """The device parts a selector reads (attribute and capacity names fully qualified)."""

    driver: bool = False
    allow_multiple: bool = False
    attributes: tuple[str, ...] = ()
    capacity: tuple[str, ...] = ()
    attribute_domains: tuple[str, ...] = ()
    capacity_domains: tuple[str, ...] = ()


class _Reads:
    """The reads found so far, by kind."""

    def __init__(self) -> None:
        self.driver = False
        self.allow_multiple = False
        self.names: dict[str, set[str]] = {"attributes": set(), "capacity": set()}
        self.domains: dict[str, set[str]] = {"attributes": set(), "capacity": set()}

    def result(self) -> Footprint:
        return Footprint(
            driver=self.driver,
            allow_multiple=self.allow_multiple,
            attributes=tuple(sorted(self.names["attributes"])),
            capacity=tuple(sorted(self.names["capacity"])),
            attribute_domains=tuple(sorted(self.domains["attributes"])),
            capacity_domains=tuple(sorted(self.domains["capacity"])),
        )


def footprint(root: Node) -> Footprint | None:
    """The parts of ``device`` the parsed selector reads, or None when it may read more."""
    reads = _Reads()
    return reads.result() if _walk(root, reads) else None


def _walk(node: Node, reads: _Reads) -> bool:
    """Record the device reads under ``node``; False on a use of ``device`` not understood."""
    if _record(node, reads):
        return True
    if isinstance(node, Ident):
        return node.name != "device"
    if isinstance(node, Const):
        return True
    if isinstance(node, Select):
        return _walk(node.operand, reads)
    if isinstance(node, Index):
        return _walk(node.operand, reads) and _walk(node.index, reads)
    if isinstance(node, Call):
        # A macro variable (or cel.bind name) called ``device`` hides the device below it.
        if any(isinstance(a, Ident) and a.name == "device" for a in node.args[:2]):
            return False
        parts = ((node.target,) if node.target is not None else ()) + node.args
        return all(_walk(part, reads) for part in parts)
    if isinstance(node, ListLit):
        return all(_walk(element, reads) for element in node.elements)
    if isinstance(node, MapLit):
        return all(_walk(part, reads) for part in (*node.keys, *node.values))
    return False


def _record(node: Node, reads: _Reads) -> bool:
    """Record ``node`` when it is one whole read of the device (True), else leave it."""
    if isinstance(node, Select) and _is_device(node.operand):
        if node.field == "driver":
            reads.driver = True
            return True
        if node.field == "allowMultipleAllocations":
            reads.allow_multiple = True
            return True
        return False
    domain = _domain(node)
    if domain is not None:
        which, name = domain
        reads.domains[which].add(name)
        return True
    found = constant_lookup(node)
    if found is None:
        return False
    which, domain_name, name = found
    reads.names[which].add(f"{domain_name}/{name}")
    return True


def constant_lookup(node: Node) -> tuple[str, str, str] | None:
    """(``attributes``|``capacity``, domain, name) for ``device.<map>["domain"].name`` or
    ``device.<map>["domain"]["name"]``: one attribute or capacity named by constants."""
    if isinstance(node, Select):
        name, holder = node.field, node.operand
    elif isinstance(node, Index) and isinstance(node.index, Const):
        if type(node.index.value) is not str:
            return None
        name, holder = node.index.value, node.operand
    else:
        return None
    found = _domain(holder)
    if found is None:
        return None
    return found[0], found[1], name


def _domain(node: Node) -> tuple[str, str] | None:
    """(``attributes``|``capacity``, domain) for ``device.<map>["domain"]``."""
    if not (
        isinstance(node, Index)
        and isinstance(node.index, Const)
        and type(node.index.value) is str
        and isinstance(node.operand, Select)
        and node.operand.field in _MAPS
        and _is_device(node.operand.operand)
    ):
        return None
    return node.operand.field, node.index.value


def _is_device(node: Node) -> bool:
    return isinstance(node, Ident) and node.name == "device"
