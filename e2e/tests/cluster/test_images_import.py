"""Images reach the nodes without a registry: archives are imported and run."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from dra_e2e import images
from dra_e2e.handle import ClusterHandle

pytestmark = pytest.mark.e2e


def _run_pod(e2e_cluster: ClusterHandle, namespace: str, image: str, marker: str) -> str:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "imported", "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "c", "image": image, "imagePullPolicy": "IfNotPresent",
                 "command": ["/bin/cat", "/etc/marker"]},
            ],
        },
    }  # fmt: skip
    e2e_cluster.apply(json.dumps(pod))

    def succeeded() -> bool:
        status = e2e_cluster.kubectl_json("get", "pod", "imported", "-n", namespace)["status"]
        assert status.get("phase") != "Failed", status
        return bool(status.get("phase") == "Succeeded")

    e2e_cluster.wait_until(f"a pod from {image}", succeeded, timeout=120)
    return e2e_cluster.kubectl("logs", "imported", "-n", namespace).strip()


def test_imported_oci_archive_runs_as_a_pod(
    e2e_cluster: ClusterHandle, e2e_namespace: str, tmp_path: Path
) -> None:
    if e2e_cluster.local is None:
        pytest.skip("image import targets the local cluster's containerd")
    marker = uuid.uuid4().hex
    reference = f"docker.io/dra-e2e/imported:{marker[:8]}"
    archive = images.write_oci_archive(
        tmp_path / "img.tar",
        images.ImageSpec(
            reference=reference, extra_files=(("/etc/marker", marker.encode(), 0o644),)
        ),
    )
    assert e2e_cluster.import_image(archive) == [reference]
    assert _run_pod(e2e_cluster, e2e_namespace, reference, marker) == marker


@pytest.mark.podman
def test_podman_saved_docker_archive_imports_under_its_tag(
    e2e_cluster: ClusterHandle, e2e_namespace: str, tmp_path: Path
) -> None:
    podman = shutil.which("podman")
    if e2e_cluster.local is None or podman is None:
        pytest.skip("needs podman and the local cluster")
    marker = uuid.uuid4().hex
    reference = f"localhost/dra-e2e/podman-saved:{marker[:8]}"
    source = images.write_oci_archive(
        tmp_path / "src.tar",
        images.ImageSpec(
            reference=reference, extra_files=(("/etc/marker", marker.encode(), 0o644),)
        ),
    )
    subprocess.run([podman, "load", "-i", str(source)], capture_output=True, check=True)
    saved = tmp_path / "saved.tar"
    try:
        subprocess.run(
            [podman, "save", "--format", "docker-archive", "-o", str(saved), reference],
            capture_output=True,
            check=True,
        )
    finally:
        subprocess.run([podman, "rmi", "-f", reference], capture_output=True, check=False)
    assert reference in e2e_cluster.import_image(saved)
    assert _run_pod(e2e_cluster, e2e_namespace, reference, marker) == marker
