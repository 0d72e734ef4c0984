"""The Kubernetes IP and CIDR libraries: ``ip()``, ``isIP()``, ``cidr()``, ``isCIDR()``
and the methods on ``net.IP`` and ``net.CIDR``."""

from __future__ import annotations

from typing import Any

from .errors import CelRuntimeError
from .network import CIDR, CIDR_TYPE, IP, IP_TYPE, parse_address
from .overloads import define


def _ip(text: str) -> IP:
    return IP(parse_address(text))


def _is_ip(text: str) -> bool:
    try:
        parse_address(text)
    except CelRuntimeError:
        return False
    return True


def _is_canonical(text: str) -> bool:
    return str(parse_address(text)) == text


def _cidr(text: str) -> CIDR:
    return CIDR.parse(text)


def _is_cidr(text: str) -> bool:
    try:
        CIDR.parse(text)
    except CelRuntimeError:
        return False
    return True


def _contains_ip(cidr: CIDR, other: Any) -> bool:
    return cidr.contains_ip(other if isinstance(other, IP) else _ip(other))


def _contains_cidr(cidr: CIDR, other: Any) -> bool:
    return cidr.contains_cidr(other if isinstance(other, CIDR) else CIDR.parse(other))


define("ip", ("string",), IP_TYPE, _ip, receiver=False)
define("isIP", ("string",), "bool", _is_ip, receiver=False)
define("ip.isCanonical", ("string",), "bool", _is_canonical, receiver=False)
define("family", (IP_TYPE,), "int", lambda ip: ip.family())
define("isUnspecified", (IP_TYPE,), "bool", lambda ip: ip.address.is_unspecified)
define("isLoopback", (IP_TYPE,), "bool", lambda ip: ip.address.is_loopback)
define("isLinkLocalMulticast", (IP_TYPE,), "bool", lambda ip: ip.is_link_local_multicast())
define(
    "isLinkLocalUnicast",
    (IP_TYPE,),
    "bool",
    lambda ip: ip.address.is_link_local and not ip.address.is_multicast,
)
define("isGlobalUnicast", (IP_TYPE,), "bool", lambda ip: ip.is_global_unicast())
define("cidr", ("string",), CIDR_TYPE, _cidr, receiver=False)
define("isCIDR", ("string",), "bool", _is_cidr, receiver=False)
define("containsIP", (CIDR_TYPE, IP_TYPE), "bool", _contains_ip)
define("containsIP", (CIDR_TYPE, "string"), "bool", _contains_ip)
define("containsCIDR", (CIDR_TYPE, CIDR_TYPE), "bool", _contains_cidr)
define("containsCIDR", (CIDR_TYPE, "string"), "bool", _contains_cidr)
define("ip", (CIDR_TYPE,), IP_TYPE, lambda cidr: IP(cidr.address))
define("masked", (CIDR_TYPE,), CIDR_TYPE, lambda cidr: cidr.masked())
define("prefixLength", (CIDR_TYPE,), "int", lambda cidr: cidr.prefix_length)
define("string", (IP_TYPE,), "string", str, receiver=False)
define("string", (CIDR_TYPE,), "string", str, receiver=False)
