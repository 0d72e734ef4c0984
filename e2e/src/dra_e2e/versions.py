"""Pinned versions of the upstream components the harness builds and runs.

The Go module files under ``gobuild/`` pin the same versions; the build cache key
hashes those files too, so a bump in either place triggers a rebuild.
"""

from __future__ import annotations

KUBERNETES_VERSION = "v1.37.2"
# Every Kubernetes version the harness can build (``e2e-cluster --kube-version``),
# newest first; CI builds only the default. Each non-default one has its module
# file in ``gobuild/kube/versions/``.
KUBERNETES_VERSIONS = ("v1.37.2", "v1.36.5", "v1.35.4", "v1.34.4")
ETCD_VERSION = "v3.6.16"
CONTAINERD_VERSION = "v2.3.7"
# github.com/prometheus/prometheus v0.316.0 is Prometheus 3.16.0 (and its promtool):
# the server that scrapes the allocation controller in e2e, and the rule unit tests.
PROMETHEUS_VERSION = "v0.316.0"
# sigs.k8s.io/kwok: simulated Nodes (and Pods on them) for the scale harness.
KWOK_VERSION = "v0.8.0"
# nvidia-ctk and nvidia-cdi-hook for the CDI parity tests (not part of a cluster).
NVIDIA_CONTAINER_TOOLKIT_VERSION = "v1.19.1"
# tags.cncf.io/container-device-interface: the CDI library containerd and CRI-O load specs
# with (its spec cache, for the CDI validity tests). Its JSON schema package left the library
# module after v0.8.1 for a module of its own that the Go module proxy does not serve; the
# schema is taken from v0.8.1, the last release that ships it inside the library module.
CDI_VERSION = "v1.1.2"
CDI_SCHEMA_VERSION = "v0.8.1"

# Names under which locally built images are imported. The pause image carries
# the name containerd's CRI plugin pins as its sandbox image, so nothing is pulled.
PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1"
TEST_IMAGE = "docker.io/dra-e2e/busybox:1.35"


def resolve_kube_version(text: str) -> str:
    """The pinned version that ``text`` names: ``v1.36.5``, ``1.36.5``, ``1.36`` or ``v1.36``.

    A minor version alone picks that minor's pinned patch release. An unknown
    version is returned unchanged, for the build to refuse with the list of known ones.
    """
    wanted = text.strip()
    if not wanted.startswith("v"):
        wanted = f"v{wanted}"
    for version in KUBERNETES_VERSIONS:
        if wanted == version or version.startswith(f"{wanted}."):
            return version
    return wanted
