"""Prometheus and promtool, built from the Go module like the cluster components.

The allocation controller's alert rules are unit-tested with ``promtool test rules``,
and the e2e suite runs a real Prometheus server that scrapes the controller. Both
binaries come from ``github.com/prometheus/prometheus`` (``gobuild/prometheus``), with
every service discovery but the static and file ones left out (``remove_all_sd``) and
the web UI assets not embedded: the tests use the HTTP API only.

The driver's ``/metrics`` are HTTPS behind TokenReview and SubjectAccessReview (the chart's
``metrics.insecure`` false), and the API server's proxy drops the caller's token, so the
harness scrapes the pods directly (pod networks are host bridges: every pod IP is reachable
from the host) with a token of the chart's metrics reader account: :func:`scraper_token`,
:func:`secure_scrape_config` (a Prometheus job) and :func:`fetch_metrics` (one scrape).
"""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dra_e2e.build import GOBUILD_DIR, GoComponent, Progress, build_component, component_dir
from dra_e2e.handle import ClusterHandle
from dra_e2e.versions import PROMETHEUS_VERSION

#: The chart's scraper account and ClusterRole (``templates/metrics-auth.yaml``) end so.
METRICS_READER_SUFFIX = "-metrics-reader"

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


def secure_scrape_config(
    job_name: str,
    targets: Sequence[str],
    *,
    token_file: Path,
    metrics_path: str = "/metrics",
    honor_labels: bool = False,
) -> dict[str, Any]:
    """A Prometheus ``scrape_configs`` entry for the driver's secure metrics at ``targets``
    (``host:port``): HTTPS, the bearer token in ``token_file``, the self-signed certificate
    not verified (as the chart's monitors)."""
    job: dict[str, Any] = {
        "job_name": job_name,
        "scheme": "https",
        "metrics_path": metrics_path,
        "authorization": {"type": "Bearer", "credentials_file": str(token_file)},
        "tls_config": {"insecure_skip_verify": True},
        "static_configs": [{"targets": list(targets)}],
    }
    if honor_labels:
        job["honor_labels"] = True
    return job


def pod_target(pod: dict[str, Any], port: int) -> str:
    """``podIP:port`` of a running pod (IPv6 in brackets)."""
    ip = str(pod["status"]["podIP"])
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def scraper_token(cluster: ClusterHandle, namespace: str, *, duration: str = "1h") -> str:
    """A token of the chart's metrics reader service account in ``namespace``."""
    accounts = cluster.kubectl_json("get", "serviceaccounts", "-n", namespace)["items"]
    names = [
        a["metadata"]["name"]
        for a in accounts
        if a["metadata"]["name"].endswith(METRICS_READER_SUFFIX)
    ]
    if len(names) != 1:
        raise AssertionError(
            f"expected one *{METRICS_READER_SUFFIX} service account in {namespace}, got {names}"
        )
    token: str = cluster.kubectl(
        "create", "token", names[0], "-n", namespace, f"--duration={duration}"
    )
    return token.strip()


def fetch_metrics(target: str, token: str, *, path: str = "/metrics") -> str:
    """One scrape of ``https://target/path`` with ``token`` (certificate not verified)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the endpoints' self-signed certificates
    request = urllib.request.Request(
        f"https://{target}{path}", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=10, context=context) as resp:
        text: str = resp.read().decode()
    return text
