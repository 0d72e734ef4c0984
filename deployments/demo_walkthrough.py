#!/usr/bin/env python3
"""The seed article's walkthrough, live: a local Kubernetes cluster, this driver on fake GPUs,
and a pod that gets one GPU through a ResourceClaimTemplate.

    uv run python deployments/demo_walkthrough.py             # bring up, run, tear down
    uv run python deployments/demo_walkthrough.py --keep      # leave the cluster running
    KUBECONFIG=... uv run python deployments/demo_walkthrough.py   # an existing cluster with
                                                                   # the chart (kind/up.sh)

Steps, each printed with the command a user would type and its output:

1. the cluster (``e2e-cluster up``: kube-apiserver, scheduler, controller-manager, kubelet and
   containerd from upstream sources, built once into ~/.cache);
2. the driver image and the walkthrough's workload image, built without a registry
   (``images/build_image.py``) and imported into the node;
3. ``helm upgrade --install`` of ``deployments/helm/dra-driver-nvidia-gpu`` with fake GPUs;
4. ``kubectl get resourceslices`` / ``deviceclass`` (section 2.4 of the article);
5. the ResourceClaimTemplate ``single-gpu`` and pod ``gpu-test-pod`` of section 3, then
   ``kubectl get pod -o wide``, ``get resourceclaim``, ``describe resourceclaim``, ``logs``.

Exit status 0 when the pod's log ends with ``GPU allocation successful.`` and its claim reads
``allocated,reserved``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "deployments" / "helm" / "dra-driver-nvidia-gpu"
HELM = REPO / "deployments" / "tools" / "helm"
BUILD = REPO / "images" / "build_image.py"
NAMESPACE = RELEASE = "dra-driver-nvidia-gpu"
FAKE_GPUS = "4xGB200"

TEMPLATE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: single-gpu
  namespace: default
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          allocationMode: ExactCount
          count: 1
"""
POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: gpu-test-pod
  namespace: default
spec:
  containers:
  - name: cuda-container
    image: nvidia/cuda:12.1.0-base-ubuntu22.04
    command: ["bash", "-c"]
    args: ["nvidia-smi -L && echo 'GPU allocation successful.' && sleep 3600"]
    resources:
      claims:
      - name: gpu-claim
  resourceClaims:
  - name: gpu-claim
    resourceClaimTemplateName: single-gpu
"""


class DemoFailed(RuntimeError):
    """A step of the walkthrough did not reach its expected state."""


def _step(title: str) -> None:
    print(f"\n\033[1m== {title}\033[0m", flush=True)


class Kubectl:
    """kubectl against one kubeconfig, echoing each user-facing command."""

    def __init__(self, binary: Path, kubeconfig: Path) -> None:
        """Use ``binary`` with ``kubeconfig``."""
        self.binary, self.kubeconfig = binary, kubeconfig

    def run(self, *args: str, stdin: str | None = None, show: bool = True) -> str:
        """Run ``kubectl ARGS``; print the command and its output when ``show``."""
        if show:
            print(f"$ kubectl {' '.join(args)}", flush=True)
        proc = subprocess.run(
            [str(self.binary), f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise DemoFailed(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        if show:
            print(proc.stdout.rstrip(), flush=True)
        return proc.stdout

    def json(self, *args: str) -> Any:
        """``kubectl ARGS -o json``, decoded, not printed."""
        return json.loads(self.run(*args, "-o", "json", show=False))


def _wait(what: str, check: Callable[[], Any], *, timeout: float = 240) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = check()
        except DemoFailed:
            result = None
        if result:
            return result
        time.sleep(2)
    raise DemoFailed(f"timed out after {timeout:.0f}s waiting for {what}")


def _build_and_import(import_image: Callable[[Path], object], workdir: Path) -> None:
    for kind in ("driver", "workload"):
        out = workdir / f"{kind}.tar"
        print(f"$ python images/build_image.py {kind}", flush=True)
        subprocess.run([sys.executable, str(BUILD), kind, "--output", str(out)], check=True)
        import_image(out)


def _install(kubeconfig: Path, node_status: dict[str, Any]) -> None:
    kubelet_root = Path(node_status["kubelet_root"])
    sets = [
        "gpuResourcesEnabledOverride=true",
        "resources.gpus.enabled=true",
        "resources.computeDomains.enabled=false",
        "devices.backend=fake",
        f"devices.fakeGpus={FAKE_GPUS}",
        f"kubeletPlugin.kubeletRegistrarDirectoryPath={kubelet_root / 'plugins_registry'}",
        f"kubeletPlugin.kubeletPluginsDirectoryPath={kubelet_root / 'plugins'}",
        f"kubeletPlugin.cdiRoot={node_status['cdi_dir']}",
        "image.pullPolicy=Never",
    ]
    args = [
        "upgrade",
        "--install",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        "--wait",
        "--timeout",
        "5m",
    ]
    for item in sets:
        args += ["--set", item]
    print(f"$ helm {' '.join(args)}", flush=True)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    subprocess.run([str(HELM), *args], check=True, env=env)


def walkthrough(kubectl: Kubectl) -> None:
    """Sections 2.4 and 3 of the seed article against a cluster with the driver installed."""
    _step("2.4 ResourceSlices: the GPUs the scheduler sees")
    _wait(
        "the driver's ResourceSlices",
        lambda: [
            s
            for s in kubectl.json("get", "resourceslices")["items"]
            if s["spec"]["driver"] == "gpu.nvidia.com"
        ],
    )
    kubectl.run("get", "resourceslices")
    first = next(
        s["metadata"]["name"]
        for s in kubectl.json("get", "resourceslices")["items"]
        if s["spec"]["driver"] == "gpu.nvidia.com"
    )
    kubectl.run("get", "resourceslice", first, "-o", "yaml")
    _step("2.4 DeviceClasses")
    kubectl.run("get", "deviceclass")
    kubectl.run("get", "deviceclass", "gpu.nvidia.com", "-o", "yaml")

    _step("3.1-3.2 ResourceClaimTemplate single-gpu and pod gpu-test-pod")
    kubectl.run("apply", "-f", "-", stdin=TEMPLATE + "---\n" + POD)

    def running() -> bool:
        status = kubectl.json("get", "pod", "gpu-test-pod", "-n", "default")["status"]
        if status.get("phase") == "Failed":
            raise DemoFailed(f"gpu-test-pod failed: {status}")
        return bool(status.get("phase") == "Running")

    _wait("gpu-test-pod to run", running)
    _step("3.3 Verify")
    kubectl.run("get", "pod", "gpu-test-pod", "-o", "wide")
    claims = kubectl.run("get", "resourceclaim")
    name = next(
        line.split()[0]
        for line in claims.splitlines()[1:]
        if line.startswith("gpu-test-pod-gpu-claim-")
    )
    kubectl.run("describe", "resourceclaim", name)

    def finished_log() -> str:
        out = kubectl.run("logs", "gpu-test-pod", show=False)
        return out if "successful" in out else ""

    logs = _wait("the pod's log", finished_log, timeout=60)
    print("$ kubectl logs gpu-test-pod")
    print(logs.rstrip(), flush=True)
    state = next(line.split()[1] for line in claims.splitlines()[1:] if line.startswith(name))
    if state != "allocated,reserved" or not logs.rstrip().endswith("GPU allocation successful."):
        raise DemoFailed(f"claim {name} is {state!r}; log: {logs!r}")


def _cleanup(kubectl: Kubectl) -> None:
    kubectl.run(
        "delete", "pod", "gpu-test-pod", "--grace-period=1", "--ignore-not-found", show=False
    )
    kubectl.run("delete", "resourceclaimtemplate", "single-gpu", "--ignore-not-found", show=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keep", action="store_true", help="leave the local cluster running")
    args = parser.parse_args(argv)

    external = os.environ.get("KUBECONFIG")
    if external:
        from dra_e2e.handle import default_kubectl

        kubectl = Kubectl(default_kubectl(), Path(external))
        try:
            walkthrough(kubectl)
        except DemoFailed as exc:
            print(f"\ndemo failed: {exc}", file=sys.stderr)
            return 1
        finally:
            _cleanup(kubectl)
        print("\nDone: the pod got a GPU through DRA.")
        return 0

    from dra_e2e.build import ensure_binaries
    from dra_e2e.cluster import Cluster

    _step("1. A local Kubernetes cluster (binaries built once into ~/.cache/dra-e2e)")
    ensure_binaries(progress=lambda msg: print(msg, flush=True))
    state_dir = Path(tempfile.mkdtemp(prefix="dra-demo-"))
    cluster = Cluster(state_dir)
    try:
        cluster.up(progress=lambda msg: print(msg, flush=True))
        kubectl = Kubectl(cluster.bins.kubectl, cluster.kubeconfig)
        kubectl.run("get", "nodes", "-o", "wide")
        _step("2. The driver image, built without a registry, and the chart on fake GPUs")
        with tempfile.TemporaryDirectory(prefix="dra-demo-images-") as tmp:
            _build_and_import(cluster.import_image, Path(tmp))
        (node_status,) = cluster.status()["nodes"].values()
        _install(cluster.kubeconfig, node_status)
        try:
            walkthrough(kubectl)
        finally:
            if not args.keep:
                _cleanup(kubectl)
    except (DemoFailed, subprocess.CalledProcessError) as exc:
        print(f"\ndemo failed: {exc}", file=sys.stderr)
        print(cluster.failure_report(), file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"\nThe cluster is still up: export KUBECONFIG={cluster.kubeconfig}")
            print(f"Stop it with: e2e-cluster --state-dir {state_dir} down")
        else:
            cluster.down(progress=lambda msg: print(msg, flush=True))
    print("\nDone: the pod got a GPU through DRA.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
