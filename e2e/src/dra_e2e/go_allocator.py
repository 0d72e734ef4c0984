"""The upstream structured allocator as a differential oracle (``gobuild/allocator``).

``dra-go-allocate`` links ``k8s.io/dynamic-resource-allocation/structured`` at the
harness's Kubernetes version and runs it offline on the same input as
``kubectl dra allocate``, printing the same report. It is built from the Go module
proxy into the binary cache like the cluster components; :func:`run_batch` feeds it
many cases through one process, and :func:`run_cel_costs` asks it for upstream's
compile-time cost estimate of CEL selectors.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dra_e2e.build import GOBUILD_DIR, GoComponent, Progress, build_component, component_dir
from dra_e2e.errors import E2EError, UnknownVersionError
from dra_e2e.versions import KUBERNETES_VERSION

#: Releases whose upstream allocator can be built: the default from ``gobuild/allocator/go.mod``,
#: the others from ``gobuild/allocator/versions/<version>.mod`` with the same sources.
ALLOCATOR_VERSIONS = (KUBERNETES_VERSION, "v1.36.5", "v1.35.4")

# Build tag of each non-default release: compat_v13*.go, compat_listtype.go,
# compat_nolisttype.go and compat_binding.go hold what the releases' APIs spell differently.
_VERSION_TAGS = {"v1.36": "kube136", "v1.35": "kube135", "v1.34": "kube134"}


def go_allocator_component(version: str = KUBERNETES_VERSION) -> GoComponent:
    """``dra-go-allocate`` linking ``k8s.io/dynamic-resource-allocation`` of ``version``."""
    if version not in ALLOCATOR_VERSIONS:
        known = ", ".join(ALLOCATOR_VERSIONS)
        raise UnknownVersionError(f"no upstream allocator pinned for {version} (known: {known})")
    source_dir = GOBUILD_DIR / "allocator"
    modfile = None if version == KUBERNETES_VERSION else source_dir / "versions" / f"{version}.mod"
    minor = version.rsplit(".", 1)[0]
    tags = (_VERSION_TAGS[minor],) if minor in _VERSION_TAGS else ()
    return GoComponent(
        name="dra-go-allocate",
        version=version,
        packages=(".",),
        outputs=("dra-go-allocate",),
        tags=tags,
        source_dir=source_dir,
        modfile=modfile,
    )


GO_ALLOCATOR = go_allocator_component()


@dataclass(frozen=True)
class OracleCase:
    """One allocation question: objects (v1 JSON), claims to allocate, node, gates."""

    id: str
    objects: Sequence[Mapping[str, Any]]
    claims: Sequence[str] = ()
    node: str = ""
    # None: the default gates of ``kubectl dra allocate``; else its ``--features`` value.
    features: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The batch input line of ``dra-go-allocate --batch``."""
        return {
            "id": self.id,
            "objects": list(self.objects),
            "claims": list(self.claims),
            "node": self.node,
            "features": self.features,
        }


@dataclass(frozen=True)
class OracleResult:
    """What the allocator answered: the exit code and the report or the error text."""

    id: str
    exit: int
    report: Mapping[str, Any] = field(default_factory=dict)
    error: str = ""


def ensure_go_allocator(*, progress: Progress, version: str = KUBERNETES_VERSION) -> Path:
    """Build ``dra-go-allocate`` of ``version`` into the cache unless present; its path."""
    component = go_allocator_component(version)
    return build_component(component, progress=progress) / "dra-go-allocate"


def go_allocator_path(version: str = KUBERNETES_VERSION) -> Path:
    """Where the cached binary is (it may not be built yet)."""
    return component_dir(go_allocator_component(version)) / "dra-go-allocate"


def _run_json_lines(
    binary: Path, flag: str, records: Iterable[dict[str, Any]], *, timeout_s: float
) -> list[dict[str, Any]]:
    """Feed ``records`` to one ``dra-go-allocate FLAG`` process as JSON lines; its JSON lines."""
    lines = "".join(json.dumps(record) + "\n" for record in records)
    proc = subprocess.run(
        [str(binary), flag],
        input=lines,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if proc.returncode != 0:
        raise E2EError(f"dra-go-allocate {flag} exited {proc.returncode}: {proc.stderr.strip()}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def run_batch(
    binary: Path, cases: Iterable[OracleCase], *, timeout_s: float = 600
) -> list[OracleResult]:
    """Run every case through one ``dra-go-allocate --batch`` process, in order."""
    return [
        OracleResult(
            id=str(data["id"]),
            exit=int(data["exit"]),
            report=data.get("report") or {},
            error=str(data.get("error") or ""),
        )
        for data in _run_json_lines(
            binary, "--batch", (case.to_json() for case in cases), timeout_s=timeout_s
        )
    ]


@dataclass(frozen=True)
class CelCostCase:
    """One CEL selector and the two gates that shape the API server's CEL environment."""

    id: str
    expression: str
    consumable_capacity: bool = True
    list_type_attributes: bool = False


@dataclass(frozen=True)
class CelCostResult:
    """Upstream's compile-time ``MaxCost`` of a selector, or its compile error."""

    id: str
    max_cost: int | None
    error: str = ""


def run_cel_costs(
    binary: Path, cases: Iterable[CelCostCase], *, timeout_s: float = 600
) -> list[CelCostResult]:
    """Estimate every selector's cost with ``dra-go-allocate -cel-cost`` (one process)."""
    records = (
        {
            "id": c.id,
            "expression": c.expression,
            "consumableCapacity": c.consumable_capacity,
            "listTypeAttributes": c.list_type_attributes,
        }
        for c in cases
    )
    return [
        CelCostResult(
            id=str(data["id"]),
            max_cost=None if data.get("maxCost") is None else int(data["maxCost"]),
            error=str(data.get("error") or ""),
        )
        for data in _run_json_lines(binary, "-cel-cost", records, timeout_s=timeout_s)
    ]
