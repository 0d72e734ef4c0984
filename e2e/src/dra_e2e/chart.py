"""This repository's Helm chart and the pinned Helm: the one way the demo and the tests install it.

``local_values`` are the values of an install on the local e2e cluster (fake GPUs, images imported
rather than pulled; the chart's default kubelet and CDI paths, which every node of the harness
has in its mount namespace); ``install`` runs the seed article's ``helm upgrade --install`` with
them. Paths are those of this checkout.
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


def local_values(*, fake_gpus: Sequence[str] = ()) -> dict[str, str]:
    """The values of an install on the local e2e cluster: fake GPUs (``fake_gpus``, e.g.
    ``("4xA100-40GB", "4xL4")``; none: the chart's default fleet) and images never pulled.

    No paths: every node of the harness has the chart's default kubelet and CDI directories.
    """
    values = {**SEED_VALUES, "devices.backend": "fake"}
    if fake_gpus:
        values["devices.fakeGpus"] = "{" + ",".join(fake_gpus) + "}"
    # Imported, never pulled: no registry is reachable.
    values["image.pullPolicy"] = "Never"
    return values


def install_args(
    sets: Mapping[str, str],
    *,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    chart: Path = CHART,
    timeout: str = "5m",
    values_files: Sequence[Path] = (),
) -> list[str]:
    """The arguments of ``helm upgrade --install`` of ``chart`` with ``values_files`` and then
    ``sets`` (which win, as on helm's command line), waiting."""
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
        *(f"--values={path}" for path in values_files),
        *set_args(sets),
    ]


def install(
    kubeconfig: Path,
    sets: Mapping[str, str],
    *,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    values_files: Sequence[Path] = (),
    echo: Callable[[str], None] | None = None,
) -> str:
    """``helm upgrade --install`` on the cluster of ``kubeconfig``; returns helm's output.

    ``echo`` gets the command as a user would type it (without the kubeconfig), for the demo.
    """
    args = install_args(sets, release=release, namespace=namespace, values_files=values_files)
    if echo is not None:
        echo(f"$ helm {' '.join(args)}")
    return run_helm(helm_path(), f"--kubeconfig={kubeconfig}", *args)


def uninstall(kubeconfig: Path, *, release: str = RELEASE, namespace: str = NAMESPACE) -> str:
    """``helm uninstall`` of a release, waiting until its resources are gone."""
    args = ["uninstall", release, "--namespace", namespace, "--wait"]
    return run_helm(helm_path(), f"--kubeconfig={kubeconfig}", *args)
