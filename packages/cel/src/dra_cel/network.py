"""CEL values of the Kubernetes IP and CIDR libraries (``net.IP``, ``net.CIDR``).

Parsing follows the Kubernetes library: no IPv4-mapped IPv6 addresses, no zones, no
leading zeros in IPv4 octets. Address classification follows Go's ``netip``.
"""

from __future__ import annotations

import ipaddress
from typing import Final

from .errors import CelRuntimeError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

IP_TYPE: Final = "net.IP"
CIDR_TYPE: Final = "net.CIDR"


def parse_address(text: str) -> IPAddress:
    """Parse an IP address as the Kubernetes ``ip()`` function does."""
    if "%" in text:
        raise CelRuntimeError(f"IP address with zone value is not allowed: {text!r}")
    try:
        address = ipaddress.ip_address(text)
    except ValueError as err:
        raise CelRuntimeError(f"IP Address {text!r} parse error during conversion: {err}") from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise CelRuntimeError(f"IPv4-mapped IPv6 address is not allowed: {text!r}")
    return address


class IP:
    """A ``net.IP`` value."""

    __slots__ = ("address",)

    def __init__(self, address: IPAddress) -> None:
        self.address = address

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IP) and other.address == self.address

    def __hash__(self) -> int:
        return hash(self.address)

    def __str__(self) -> str:
        return str(self.address)

    def family(self) -> int:
        """4 or 6."""
        return self.address.version

    def is_global_unicast(self) -> bool:
        """Go's ``IsGlobalUnicast``: not unspecified, loopback, multicast, link-local or
        (IPv4) limited broadcast; private ranges count as global unicast."""
        a = self.address
        if a.is_unspecified or a.is_loopback or a.is_multicast or a.is_link_local:
            return False
        return not (isinstance(a, ipaddress.IPv4Address) and int(a) == 0xFFFFFFFF)

    def is_link_local_multicast(self) -> bool:
        """224.0.0.0/24 or ff02::/16 (Go's ``IsLinkLocalMulticast``)."""
        a = self.address
        if isinstance(a, ipaddress.IPv4Address):
            return a in _V4_LINK_LOCAL_MULTICAST
        return a in _V6_LINK_LOCAL_MULTICAST


_V4_LINK_LOCAL_MULTICAST: Final = ipaddress.ip_network("224.0.0.0/24")
_V6_LINK_LOCAL_MULTICAST: Final = ipaddress.ip_network("ff02::/16")


class CIDR:
    """A ``net.CIDR`` value: an address and a prefix length (host bits kept)."""

    __slots__ = ("address", "network", "prefix_length")

    def __init__(self, address: IPAddress, prefix_length: int) -> None:
        self.address = address
        self.prefix_length = prefix_length
        self.network: IPNetwork = ipaddress.ip_network(f"{address}/{prefix_length}", strict=False)

    @classmethod
    def parse(cls, text: str) -> CIDR:
        """Parse ``address/prefix`` as the Kubernetes ``cidr()`` function does."""
        problem = f"network address parse error during conversion from string: {text!r}"
        address_text, slash, length_text = text.partition("/")
        leading_zero = len(length_text) > 1 and length_text[0] == "0"
        if not slash or not length_text.isdigit() or not length_text.isascii() or leading_zero:
            raise CelRuntimeError(problem)
        address = parse_address(address_text)
        length = int(length_text)
        if length > address.max_prefixlen:
            raise CelRuntimeError(problem)
        return cls(address, length)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, CIDR)
            and other.address == self.address
            and other.prefix_length == self.prefix_length
        )

    def __hash__(self) -> int:
        return hash((self.address, self.prefix_length))

    def __str__(self) -> str:
        return f"{self.address}/{self.prefix_length}"

    def contains_ip(self, ip: IP) -> bool:
        """Whether the address lies in the prefix (same family only)."""
        return ip.address.version == self.address.version and ip.address in self.network

    def contains_cidr(self, other: CIDR) -> bool:
        """Whether ``other`` is a sub-prefix of this one."""
        return (
            other.address.version == self.address.version
            and other.prefix_length >= self.prefix_length
            and other.network.network_address in self.network
        )

    def masked(self) -> CIDR:
        """The prefix with host bits cleared."""
        return CIDR(self.network.network_address, self.prefix_length)
