"""NVIDIA's demo manifests (demo/specs of NVIDIA's repository), kept verbatim as the API types'
fixtures: where they are, one read unchanged, and the namespaces one creates.

Their workload images (ubuntu:22.04, the CUDA nbody sample) are the harness's stand-in under
the real names.
"""

from __future__ import annotations

import yaml
from dra_e2e.checkout import REPO

__all__ = ["DEMO_SPECS", "demo", "namespaces_of"]

DEMO_SPECS = REPO / "packages" / "api-types" / "tests" / "fixtures" / "nvidia-demo-specs"


def demo(name: str) -> str:
    """A demo manifest, unchanged."""
    return (DEMO_SPECS / name).read_text()


def namespaces_of(manifest: str) -> tuple[str, ...]:
    """The namespaces a manifest creates (deleted with it)."""
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    return tuple(d["metadata"]["name"] for d in docs if d["kind"] == "Namespace")
