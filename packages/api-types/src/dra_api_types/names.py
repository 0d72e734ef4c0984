"""Name formats of the Kubernetes API, as kube-apiserver checks them.

Each ``*_errors`` function returns a list of human-readable problems (empty when valid), the
way apimachinery's ``IsDNS1123Label`` and friends do.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "c_identifier_errors",
    "device_qualified_name_errors",
    "dns_label_errors",
    "dns_subdomain_errors",
    "fully_qualified_name_errors",
    "label_value_errors",
    "qualified_name_errors",
    "uid_errors",
]

DNS_LABEL_MAX: Final = 63
DNS_SUBDOMAIN_MAX: Final = 253
LABEL_VALUE_MAX: Final = 63
QUALIFIED_NAME_MAX: Final = 63
C_IDENTIFIER_DEVICE_MAX: Final = 32
DEVICE_DOMAIN_MAX: Final = 63

_DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN: Final = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_QUALIFIED_NAME: Final = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE: Final = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_C_IDENTIFIER: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def dns_label_errors(value: str) -> list[str]:
    """RFC 1123 label: lower-case alphanumerics and '-', at most 63 characters."""
    errors = []
    if len(value) > DNS_LABEL_MAX:
        errors.append(f"must be no more than {DNS_LABEL_MAX} characters")
    if not _DNS_LABEL.match(value):
        errors.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
            "'-', and must start and end with an alphanumeric character"
        )
    return errors


def dns_subdomain_errors(value: str, *, max_length: int = DNS_SUBDOMAIN_MAX) -> list[str]:
    """RFC 1123 subdomain: dot-separated labels, at most 253 characters (or ``max_length``)."""
    errors = []
    if len(value) > max_length:
        errors.append(f"must be no more than {max_length} characters")
    if not _DNS_SUBDOMAIN.match(value):
        errors.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character"
        )
    return errors


def qualified_name_errors(value: str) -> list[str]:
    """A label key: ``[prefix/]name``; prefix a DNS subdomain, name at most 63 characters."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
        errors: list[str] = []
    elif len(parts) == 2:
        prefix, name = parts
        errors = []
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors += [f"prefix part {e}" for e in dns_subdomain_errors(prefix)]
    else:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character, with an optional DNS subdomain "
            "prefix and '/'"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        errors.append(f"name part must be no more than {QUALIFIED_NAME_MAX} characters")
    if name and not _QUALIFIED_NAME.match(name):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character"
        )
    return errors


def label_value_errors(value: str) -> list[str]:
    """A label value: empty, or at most 63 alphanumerics, '-', '_', '.'."""
    errors = []
    if len(value) > LABEL_VALUE_MAX:
        errors.append(f"must be no more than {LABEL_VALUE_MAX} characters")
    if not _LABEL_VALUE.match(value):
        errors.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character"
        )
    return errors


def c_identifier_errors(value: str, *, max_length: int = C_IDENTIFIER_DEVICE_MAX) -> list[str]:
    """A C identifier (``[A-Za-z_][A-Za-z0-9_]*``), at most 32 characters for DRA names."""
    errors = []
    if not value:
        return ["must not be empty"]
    if len(value) > max_length:
        errors.append(f"must be no more than {max_length} characters")
    if not _C_IDENTIFIER.match(value):
        errors.append(
            "a valid C identifier must start with alphabetic character or '_', followed by a "
            "string of alphanumeric characters or '_'"
        )
    return errors


def device_qualified_name_errors(value: str) -> list[str]:
    """A DRA attribute/capacity name: ``ID`` or ``domain/ID`` (C identifier, DNS domain)."""
    if "/" not in value:
        return c_identifier_errors(value)
    domain, _, identifier = value.partition("/")
    errors = []
    if not domain:
        errors.append("the domain must not be empty")
    else:
        # The domain follows the driver-name rules, which tolerate upper case.
        errors += [
            f"the domain {e}"
            for e in dns_subdomain_errors(domain.lower(), max_length=DEVICE_DOMAIN_MAX)
        ]
    errors += [f"the name {e}" for e in c_identifier_errors(identifier)]
    return errors


def fully_qualified_name_errors(value: str) -> list[str]:
    """A DRA ``domain/ID`` name where the domain is mandatory (constraints' attributes)."""
    if "/" not in value:
        return ["a fully qualified name must be a domain and a name separated by a slash"]
    return device_qualified_name_errors(value)


_UID: Final = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def uid_errors(value: str) -> list[str]:
    """An RFC 4122 UUID in normalized form (lower-case, 36 characters), as for shareID."""
    if _UID.match(value):
        return []
    return [
        "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with "
        "lowercase hexadecimal characters"
    ]
