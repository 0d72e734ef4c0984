"""This repository's Helm chart and the pinned Helm: the one way the demo and the tests install it.

``local_values`` are the values of an install on a node of the local e2e cluster (fake GPUs, the
node's own kubelet and CDI directories, images imported rather than pulled); ``install`` runs
the seed article's ``helm upgrade --install`` with them. Paths are those of this checkout.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from dra_e2e.build import find_go
from dra_e2e.checkout import REPO
from dra_e2e.errors import E2EError, ToolMissingError

CHART = REPO / "deployments" / "helm" / "dra-driver-nvidia-gpu"
HELM_WRAPPER = REPO / "deployments" / "tools" / "helm"
RELEASE = NAMESPACE = "dra-driver-nvidia-gpu"
#: What the seed article sets on NVIDIA's chart; ours needs the override to install beside a
#: device plugin the same way.
SEED_VALUES: dict[str, str] = {
    "gpuResourcesEnabledOverride": "true",
    "resources.gpus.enabled": "true",
    "resources.computeDomains.enabled": "false",
}


class HelmFailed(E2EError):
    """helm exited non-zero; the message is its stderr."""


def helm_path() -> Path:
    """The pinned Helm binary (deployments/tools/helm builds it from the Go proxy if missing)."""
    env = dict(os.environ)
    # The wrapper builds with the `go` on PATH; the harness also finds one in /usr/local/go.
    with contextlib.suppress(ToolMissingError):
        env["PATH"] = f"{find_go().parent}{os.pathsep}{env.get('PATH', '')}"
    out = subprocess.run(
        [str(HELM_WRAPPER), "--print-path"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=1200,
    )
    if out.returncode != 0:
        raise HelmFailed(f"could not get Helm: {out.stderr.strip()}")
    return Path(out.stdout.strip().splitlines()[-1])


def run_helm(helm: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    """Runs helm, returning stdout; raises HelmFailed with stderr on failure."""
    proc = subprocess.run([str(helm), *args], capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        raise HelmFailed(proc.stderr.strip())
    return proc.stdout


def set_args(sets: Mapping[str, str]) -> list[str]:
    """``--set k=v`` arguments (strings typed as YAML, as helm does)."""
    args: list[str] = []
    for key, value in sets.items():
        args += ["--set", f"{key}={value}"]
    return args


def local_values(*, kubelet_root: Path, cdi_dir: Path, fake_gpus: Sequence[str]) -> dict[str, str]:
    """The values of an install on a local e2e node: fake GPUs, that node's directories."""
    return {
        **SEED_VALUES,
        "devices.backend": "fake",
        "devices.fakeGpus": "{" + ",".join(fake_gpus) + "}",
        "kubeletPlugin.kubeletRegistrarDirectoryPath": str(kubelet_root / "plugins_registry"),
        "kubeletPlugin.kubeletPluginsDirectoryPath": str(kubelet_root / "plugins"),
        "kubeletPlugin.cdiRoot": str(cdi_dir),
        # Imported, never pulled: no registry is reachable.
        "image.pullPolicy": "Never",
    }


def install_args(
    sets: Mapping[str, str],
    *,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    chart: Path = CHART,
    timeout: str = "5m",
) -> list[str]:
    """The arguments of ``helm upgrade --install`` of ``chart`` with ``sets``, waiting."""
    return [
        "upgrade",
        "--install",
        release,
        str(chart),
        "--namespace",
        namespace,
        "--create-namespace",
        "--wait",
        "--timeout",
        timeout,
        *set_args(sets),
    ]


def install(
    kubeconfig: Path,
    sets: Mapping[str, str],
    *,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    echo: Callable[[str], None] | None = None,
) -> str:
    """``helm upgrade --install`` on the cluster of ``kubeconfig``; returns helm's output.

    ``echo`` gets the command as a user would type it (without the kubeconfig), for the demo.
    """
    args = install_args(sets, release=release, namespace=namespace)
    if echo is not None:
        echo(f"$ helm {' '.join(args)}")
    return run_helm(helm_path(), f"--kubeconfig={kubeconfig}", *args)


def uninstall(kubeconfig: Path, *, release: str = RELEASE, namespace: str = NAMESPACE) -> str:
    """``helm uninstall`` of a release, waiting until its resources are gone."""
    args = ["uninstall", release, "--namespace", namespace, "--wait"]
    return run_helm(helm_path(), f"--kubeconfig={kubeconfig}", *args)
