#!/usr/bin/env python3
"""The seed article's walkthrough, live: a local Kubernetes cluster, this driver on fake GPUs,
and a pod that gets one GPU through a ResourceClaimTemplate.

    uv run python deployments/demo_walkthrough.py             # bring up, run, tear down
    uv run python deployments/demo_walkthrough.py --keep      # leave the cluster running
    uv run python deployments/demo_walkthrough.py --kubeconfig PATH   # an existing cluster with
                                       # the chart (kind/up.sh); or $DRA_E2E_KUBECONFIG

An existing cluster is used only when asked (never the ambient ``$KUBECONFIG``), and there the
walkthrough runs in a namespace of its own (``--namespace``, default ``dra-demo``), which it
creates and deletes; the seed's ``default/gpu-test-pod`` is never touched there.

For the local cluster the missing Debian packages are installed first (``apt-get``, only what is
missing) and the host is checked (seconds; one line with the fix, e.g. ``demo: required tool
'runc' not found: apt-get install runc``), before the one-off build of the cluster binaries.

Steps, each printed with the command a user would type and its output:

1. the cluster (``e2e-cluster up``: kube-apiserver, scheduler, controller-manager, kubelet and
   containerd from upstream sources, built once into ~/.cache);
2. the driver image and the walkthrough's workload image, built without a registry
   (``images/build_image.py``) and imported into the node, then ``helm upgrade --install`` of
   ``deployments/helm/dra-driver-nvidia-gpu`` with fake GPUs, waiting until the plugin has
   published the node's ResourceSlices (``e2e-cluster install-driver`` does the same; the
   chart's default kubelet and CDI paths, which every node of the harness has);
3. ``kubectl get resourceslices`` / ``deviceclass`` (section 2.4 of the article);
4. the ResourceClaimTemplate ``single-gpu`` and pod ``gpu-test-pod`` of section 3 (read from the
   chart's ``files/seed/``), then
   ``kubectl get pod -o wide``, ``get resourceclaim``, ``describe resourceclaim``, ``logs``.

Exit status 0 when the pod's log ends with ``GPU allocation successful.`` and its claim reads
``allocated,reserved``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dra_e2e import preflight, seed
from dra_e2e.build import ensure_binaries
from dra_e2e.cluster import Cluster
from dra_e2e.driver_install import install_driver
from dra_e2e.errors import E2EError, KubectlError
from dra_e2e.kubectl import KUBECONFIG_ENV, Kubectl, asked_kubeconfig, default_kubectl
from dra_e2e.prerequisites import Purpose

FAKE_GPUS = ("4xGB200",)
DEMO_NAMESPACE = "dra-demo"
#: Where the local cluster runs the seed's objects: the article's namespace, verbatim.
LOCAL_NAMESPACE = "default"


class DemoFailed(E2EError):
    """A step of the walkthrough did not reach its expected state."""


def _say(message: str) -> None:
    print(message, flush=True)


def _step(title: str) -> None:
    print(f"\n\033[1m== {title}\033[0m", flush=True)


class Console:
    """kubectl in one namespace, echoing each user-facing command and its output."""

    def __init__(self, kubectl: Kubectl, namespace: str) -> None:
        """Run ``kubectl`` in ``namespace`` (no ``-n`` shown for ``default``)."""
        self.kubectl, self.namespace = kubectl, namespace
        self._ns = [] if namespace == "default" else ["-n", namespace]

    def run(self, *args: str, stdin: str | None = None, show: bool = True) -> str:
        """``kubectl ARGS`` in the namespace; print the command and its output when ``show``."""
        full = [*args, *self._ns]
        if show:
            _say(f"$ kubectl {' '.join(full)}")
        out = self.kubectl.run(*full, input_text=stdin)
        if show:
            _say(out.rstrip())
        return out

    def json(self, *args: str) -> Any:
        """``kubectl ARGS -o json`` in the namespace, decoded, not printed."""
        return self.kubectl.json(*args, *self._ns)


def _wait(what: str, check: Callable[[], Any], *, timeout: float = 240) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = check()
        except KubectlError:
            # Not there yet; a DemoFailed from ``check`` (the pod failed) ends the wait.
            result = None
        if result:
            return result
        time.sleep(2)
    raise DemoFailed(f"timed out after {timeout:.0f}s waiting for {what}")


def _gpu_slices(shell: Console) -> list[dict[str, Any]]:
    items = shell.kubectl.json("get", "resourceslices")["items"]
    return [s for s in items if s["spec"]["driver"] == "gpu.nvidia.com"]


def walkthrough(shell: Console, manifest: str) -> None:
    """Sections 2.4 and 3 of the seed article against a cluster with the driver installed."""
    cluster_wide = Console(shell.kubectl, "default")
    _step("2.4 ResourceSlices: the GPUs the scheduler sees")
    _wait("the driver's ResourceSlices", lambda: _gpu_slices(shell))
    cluster_wide.run("get", "resourceslices")
    first = _gpu_slices(shell)[0]["metadata"]["name"]
    cluster_wide.run("get", "resourceslice", first, "-o", "yaml")
    _step("2.4 DeviceClasses")
    cluster_wide.run("get", "deviceclass")
    cluster_wide.run("get", "deviceclass", "gpu.nvidia.com", "-o", "yaml")

    _step(f"3.1-3.2 ResourceClaimTemplate {seed.TEMPLATE_NAME} and pod {seed.POD_NAME}")
    shell.run("apply", "-f", "-", stdin=manifest)

    def running() -> bool:
        status = shell.json("get", "pod", seed.POD_NAME)["status"]
        if status.get("phase") == "Failed":
            raise DemoFailed(f"{seed.POD_NAME} failed: {status}")
        return bool(status.get("phase") == "Running")

    _wait(f"{seed.POD_NAME} to run", running)
    _step("3.3 Verify")
    shell.run("get", "pod", seed.POD_NAME, "-o", "wide")
    claims = shell.run("get", "resourceclaim")
    name = next(
        line.split()[0]
        for line in claims.splitlines()[1:]
        if line.startswith(f"{seed.POD_NAME}-gpu-claim-")
    )
    shell.run("describe", "resourceclaim", name)

    def finished_log() -> str:
        out = shell.run("logs", seed.POD_NAME, show=False)
        return out if "successful" in out else ""

    logs = _wait("the pod's log", finished_log, timeout=60)
    shell.run("logs", seed.POD_NAME)
    state = next(line.split()[1] for line in claims.splitlines()[1:] if line.startswith(name))
    if state != "allocated,reserved" or not logs.rstrip().endswith("GPU allocation successful."):
        raise DemoFailed(f"claim {name} is {state!r}; log: {logs!r}")


def on_existing_cluster(kubeconfig: Path, namespace: str) -> None:
    """The walkthrough on a cluster with the chart installed, in a namespace it creates."""
    kubectl = Kubectl(default_kubectl(), kubeconfig)
    if kubectl.exists("namespace", namespace):
        raise DemoFailed(
            f"namespace {namespace} already exists on the cluster of {kubeconfig}; "
            "the demo runs only in a namespace of its own: pass --namespace NEW-NAME"
        )
    _say(f"$ kubectl create namespace {namespace}")
    kubectl.run("create", "namespace", namespace)
    try:
        _wait(
            f"the default service account of {namespace}",
            lambda: kubectl.exists("serviceaccount", "default", "-n", namespace),
            timeout=60,
        )
        walkthrough(Console(kubectl, namespace), seed.manifests_in(namespace))
    finally:
        # Only what the demo created: its namespace, with the template and the pod in it.
        _say(f"$ kubectl delete namespace {namespace} --wait=false")
        kubectl.run("delete", "namespace", namespace, "--wait=false")


def _install(cluster: Cluster) -> None:
    """Images built and imported, the chart installed: ``e2e-cluster install-driver``'s way."""
    installed = install_driver(cluster, fake_gpus=FAKE_GPUS, progress=_say, echo=_say)
    _say(installed.helm_output.rstrip())


def on_local_cluster(*, keep: bool, install: bool = True) -> None:
    """Start a local cluster, install the chart, run the walkthrough; tear down what started."""
    if install:
        preflight.install_missing(Purpose.E2E, progress=_say)
    preflight.check(Purpose.E2E)
    _step("1. A local Kubernetes cluster (binaries built once into ~/.cache/dra-e2e)")
    ensure_binaries(progress=_say)
    state_dir = Path(tempfile.mkdtemp(prefix="dra-demo-"))
    cluster = Cluster(state_dir)
    # A failed `up` tears down what it started itself; from here on the cluster is ours to stop.
    cluster.up(progress=_say, build=False)
    try:
        shell = Console(Kubectl(cluster.bins.kubectl, cluster.kubeconfig), LOCAL_NAMESPACE)
        shell.run("get", "nodes", "-o", "wide")
        _step("2. The driver image, built without a registry, and the chart on fake GPUs")
        _install(cluster)
        walkthrough(shell, seed.manifests())
    except E2EError:
        print(cluster.failure_report(), file=sys.stderr)
        raise
    finally:
        if keep:
            _say(f"\nThe cluster is still up: kubectl --kubeconfig {cluster.kubeconfig} get pods")
            _say(f"Stop it with: e2e-cluster --state-dir {state_dir} down")
        else:
            cluster.down(progress=_say)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: exit status 0 when the pod got its GPU; 1 with one line on a failure."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keep", action="store_true", help="leave the local cluster running")
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help=f"an existing cluster with the chart installed (default ${KUBECONFIG_ENV}; "
        "$KUBECONFIG is never used)",
    )
    parser.add_argument(
        "--no-install",
        action="store_true",
        help="local cluster: only check the host, do not apt-get install missing packages",
    )
    parser.add_argument(
        "--namespace",
        default=DEMO_NAMESPACE,
        help="on an existing cluster: the new namespace to run in (default %(default)s)",
    )
    args = parser.parse_args(argv)
    try:
        existing = asked_kubeconfig(args.kubeconfig)
        if existing is not None:
            on_existing_cluster(existing, args.namespace)
        else:
            on_local_cluster(keep=args.keep, install=not args.no_install)
    except E2EError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 1
    _say("\nDone: the pod got a GPU through DRA.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
