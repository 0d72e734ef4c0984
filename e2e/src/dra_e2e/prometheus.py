"""Prometheus and promtool, built from the Go module like the cluster components.

The allocation controller's alert rules are unit-tested with ``promtool test rules``,
and the e2e suite runs a real Prometheus server that scrapes the controller. Both
binaries come from ``github.com/prometheus/prometheus`` (``gobuild/prometheus``), with
every service discovery but the static and file ones left out (``remove_all_sd``) and
the web UI assets not embedded: the tests use the HTTP API only.
"""

from __future__ import annotations

from pathlib import Path

from dra_e2e.build import GOBUILD_DIR, GoComponent, Progress, build_component, component_dir
from dra_e2e.versions import PROMETHEUS_VERSION

PROMETHEUS = GoComponent(
    name="prometheus",
    version=PROMETHEUS_VERSION,
    packages=(
        "github.com/prometheus/prometheus/cmd/prometheus",
        "github.com/prometheus/prometheus/cmd/promtool",
    ),
    outputs=("prometheus", "promtool"),
    tags=("remove_all_sd", "netgo", "osusergo"),
    source_dir=GOBUILD_DIR / "prometheus",
)


def prometheus_dir(*, root: Path | None = None) -> Path:
    """Where the cached ``prometheus`` and ``promtool`` live (built or not)."""
    return component_dir(PROMETHEUS, root=root)


def ensure_prometheus(*, progress: Progress, root: Path | None = None) -> Path:
    """Build Prometheus and promtool once into the cache; return their directory."""
    return build_component(PROMETHEUS, progress=progress, root=root)
