"""Our control-plane components during a scale run, read as the host sees them: their pods,
their processes' CPU seconds and resident memory (from ``/proc``, the harness's kubelets run
on this host), and their ``/metrics`` at their pod IPs.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dra_kube_client import KubeTransport

from dra_e2e import chart
from dra_e2e.cluster import Cluster
from dra_e2e.host_cpu import CpuReading, parse_host_totals
from dra_e2e.pod_usage import PodUsage, parse_stat, pod_usage, process_usage
from dra_e2e.process import is_running
from dra_e2e.scale_observe import RssSampler, Say, quiet
from dra_e2e.scale_report import ALLOCATION_CONTROLLER
from dra_e2e.scale_scrape import MetricsScraper, fetch_text

#: Our control-plane components, by the chart's component label.
MEASURED = ("allocation-controller", "compute-domain-controller", "webhook")
METRICS_PORT = 8080
#: The chart's default webhook.metrics.port.
WEBHOOK_METRICS_PORT = 8080
#: How often the allocation controller's resident memory is sampled (a /proc read each).
RSS_SAMPLE_S = 2.0
#: Scrapes timed back to back at a phase's end to price one (see ``Usage.scrape_cpu_s``).
SCRAPES_PRICED = 20


def component_pods(transport: KubeTransport, component: str) -> list[dict[str, Any]]:
    """The pods of one of the chart's components (its ``app.kubernetes.io/component`` label)
    in the driver's namespace."""
    pods = transport.request(
        "GET",
        f"/api/v1/namespaces/{chart.NAMESPACE}/pods",
        query={"labelSelector": f"app.kubernetes.io/component={component}"},
    ).get("items")
    return list(pods or [])


def component_usage(transport: KubeTransport) -> dict[str, PodUsage]:
    """Every pod of the driver's namespace (the kubelet plugins too), by component; the
    processes of a component's pods together."""
    pods = transport.request("GET", f"/api/v1/namespaces/{chart.NAMESPACE}/pods").get("items")
    out: dict[str, PodUsage] = {}
    for pod in pods or []:
        meta = pod["metadata"]
        component = (meta.get("labels") or {}).get("app.kubernetes.io/component", meta["name"])
        usage = pod_usage(str(meta["uid"]))
        if component in out:
            usage = PodUsage(out[component].processes + usage.processes)
        out[component] = usage
    return out


def measured(usage: dict[str, PodUsage]) -> dict[str, PodUsage]:
    """The components whose CPU and peak RSS the figures name (one replica each)."""
    return {component: usage[component] for component in MEASURED if component in usage}


def process_cpu_s(pid: int | str) -> float | None:
    """A process's CPU seconds so far (``None``: it has ended)."""
    try:
        return parse_stat(Path(f"/proc/{pid}/stat").read_text())[1]
    except OSError:  # ended since it was listed
        return None


def cpu_reading(
    cluster: Cluster, ours: dict[str, PodUsage], helpers: Iterable[int | None] = ()
) -> CpuReading:
    """The cluster's processes', our pods' and this benchmark's CPU seconds (its process and
    its ``helpers``' processes, such as the metrics scraper's child), and the host's."""
    processes: dict[str, float] = {}
    for record in cluster.processes():
        cpu = process_cpu_s(record.pid) if is_running(record) else None
        if cpu is not None:
            processes[record.name] = cpu
    for component, usage in ours.items():
        processes[f"ours: {component}"] = usage.cpu_s
    helper_cpu = (process_cpu_s(pid) for pid in helpers if pid is not None)
    processes["the benchmark"] = (process_cpu_s("self") or 0.0) + sum(
        cpu for cpu in helper_cpu if cpu is not None
    )
    return CpuReading(processes, parse_host_totals(Path("/proc/stat").read_text()))


def scrape_cpu_s(transport: KubeTransport, url: str) -> float:
    """CPU seconds the allocation controller spends answering one scrape of ``url`` now
    (``SCRAPES_PRICED`` scrapes back to back, its pod's CPU before and after)."""
    before = component_usage(transport).get(ALLOCATION_CONTROLLER)
    for _ in range(SCRAPES_PRICED):
        fetch_text(url, timeout=30)
    after = component_usage(transport).get(ALLOCATION_CONTROLLER)
    if before is None or after is None:
        return 0.0
    return max(0.0, after.cpu_s - before.cpu_s) / SCRAPES_PRICED


def rss_reader(transport: KubeTransport) -> RssSampler | None:
    """A sampler of the allocation controller's resident memory (its processes' largest, as
    its peak is), or ``None`` without its pod; a process gone since is not read."""
    usage = component_usage(transport).get(ALLOCATION_CONTROLLER)
    if usage is None or not usage.processes:
        return None
    pids = [p.pid for p in usage.processes]

    def read() -> int | None:
        found = (process_usage(pid) for pid in pids)
        return max((u.rss for u in found if u is not None), default=None)

    return RssSampler(read, RSS_SAMPLE_S, step="setup")


def scrape_url(transport: KubeTransport) -> str | None:
    """The allocation controller's plain-HTTP ``/metrics`` URL at its pod IP (``None``: no
    pod has an IP yet)."""
    pods = component_pods(transport, ALLOCATION_CONTROLLER)
    ip = next(
        (p["status"].get("podIP") for p in pods if (p.get("status") or {}).get("podIP")), None
    )
    return None if ip is None else f"http://{ip}:{METRICS_PORT}/metrics"


def controller_text(scraper: MetricsScraper | None, say: Say = quiet) -> str | None:
    """The allocation controller's ``/metrics`` now (``None``: not scraped, or no answer)."""
    if scraper is None:
        return None
    try:
        return fetch_text(scraper.url)
    except OSError as exc:
        say(f"[bench] allocation controller: {scraper.url}: {exc}")
        return None


def webhook_texts(transport: KubeTransport, say: Say = quiet) -> dict[str, str]:
    """Each webhook pod's ``/metrics`` by pod name (pod IP, plain HTTP, as the allocation
    controller's); a pod that does not answer is left out, and said."""
    out = {}
    for pod in component_pods(transport, "webhook"):
        name, ip = pod["metadata"]["name"], (pod.get("status") or {}).get("podIP")
        if not ip:
            continue
        url = f"http://{ip}:{WEBHOOK_METRICS_PORT}/metrics"
        try:
            out[name] = fetch_text(url)
        except OSError as exc:
            say(f"[bench] webhook pod {name}: {url}: {exc}")
    return out
