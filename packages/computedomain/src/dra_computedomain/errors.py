"""Typed errors of the ComputeDomain components, each naming the object and field at fault."""

from __future__ import annotations

__all__ = [
    "CliqueFullError",
    "CliqueIdError",
    "ComputeDomainError",
    "DaemonEnvironmentError",
    "ImexConfigError",
    "SpecError",
]


class ComputeDomainError(Exception):
    """Base class of this package's errors."""


class SpecError(ComputeDomainError):
    """A ComputeDomain's spec cannot be reconciled (e.g. no workload template name)."""

    def __init__(self, domain: str, field: str, message: str) -> None:
        super().__init__(f"ComputeDomain {domain}: {field}: {message}")
        self.domain = domain
        self.field = field


class CliqueIdError(ComputeDomainError):
    """The GPUs of a node disagree about, or misreport, their NVLink clique."""

    def __init__(self, node: str, message: str) -> None:
        super().__init__(f"node {node}: clique ID: {message}")
        self.node = node


class CliqueFullError(ComputeDomainError):
    """Every DNS-name slot of a clique is taken (``maxNodesPerIMEXDomain`` reached)."""

    def __init__(self, clique: str, node: str, limit: int) -> None:
        super().__init__(
            f"ComputeDomainClique {clique}: daemons: no free index for node {node} "
            f"(all {limit} taken)"
        )
        self.clique = clique
        self.node = node
        self.limit = limit


class DaemonEnvironmentError(ComputeDomainError):
    """The domain daemon was started without an environment variable it needs."""

    def __init__(self, variable: str, message: str) -> None:
        super().__init__(f"environment {variable}: {message}")
        self.variable = variable


class ImexConfigError(ComputeDomainError):
    """An IMEX config file is malformed."""

    def __init__(self, path: str, field: str, message: str) -> None:
        super().__init__(f"{path}: {field}: {message}")
        self.path = path
        self.field = field
