"""The previous chart version that the upgrade e2e test starts from (offline checks).

``e2e/tests/driver/fixtures/dra-driver-nvidia-gpu-0.1.0.tgz`` is ``git archive`` of the chart at
commit b7d2eca (see the README there). Here: it is that commit's chart, it renders with the
values the harness installs it with, and the chart in the tree is newer.
"""

from __future__ import annotations

import io
import re
import subprocess
import tarfile

import pytest
import yaml
from chart_helpers import BASE_SETS, CHART, NAMESPACE, REPO, helm_path, run_helm, set_args

FIXTURE = REPO / "e2e" / "tests" / "driver" / "fixtures" / "dra-driver-nvidia-gpu-0.1.0.tgz"
COMMIT = "b7d2eca"
PREFIX = "dra-driver-nvidia-gpu/"


def _version(text: str | bytes) -> tuple[int, ...]:
    version = str(yaml.safe_load(text)["version"])
    return tuple(int(x) for x in re.findall(r"\d+", version.split("-")[0]))


def _fixture_files() -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    with tarfile.open(FIXTURE) as tar:
        for member in tar.getmembers():
            if member.isfile():
                data = tar.extractfile(member)
                assert data is not None
                files[member.name] = data.read()
    return files


def test_fixture_is_the_chart_at_the_recorded_commit() -> None:
    known = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "-e", f"{COMMIT}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    if known.returncode != 0:
        pytest.skip(f"this clone lacks commit {COMMIT} (shallow); the fixture is checked in")
    archive = subprocess.run(
        [
            "git",
            "-C",
            str(REPO),
            "archive",
            "--format=tar",
            f"--prefix={PREFIX}",
            f"{COMMIT}:deployments/helm/dra-driver-nvidia-gpu",
        ],
        capture_output=True,
        check=True,
    ).stdout
    expected: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            if member.isfile():
                data = tar.extractfile(member)
                assert data is not None
                expected[member.name] = data.read()
    assert _fixture_files() == expected


def test_chart_in_the_tree_is_newer_than_the_fixture() -> None:
    files = _fixture_files()
    previous = _version(files[PREFIX + "Chart.yaml"])
    current = _version((CHART / "Chart.yaml").read_text())
    assert previous == (0, 1, 0)
    assert current > previous, "bump deployments/helm/dra-driver-nvidia-gpu/Chart.yaml's version"
    fixture_meta = yaml.safe_load(files[PREFIX + "Chart.yaml"])
    assert fixture_meta["name"] == yaml.safe_load((CHART / "Chart.yaml").read_text())["name"]


def test_fixture_renders_with_the_harness_values() -> None:
    # The keys test_upgrade.py installs the fixture with (driver_support's install values).
    # The 0.1.0 chart predates image.allowUnpublishedDefault (its schema refuses the key).
    sets = {
        **{k: v for k, v in BASE_SETS.items() if k != "image.allowUnpublishedDefault"},
        "devices.backend": "fake",
        "devices.fakeGpus": "{4xA100-40GB,4xL4}",
        "image.pullPolicy": "Never",
        "image.tag": "0.1.0-previous",
    }
    out = run_helm(
        helm_path(),
        "template",
        "dra-driver-nvidia-gpu",
        str(FIXTURE),
        "--namespace",
        NAMESPACE,
        *set_args(sets),
    )
    kinds = {d["kind"] for d in yaml.safe_load_all(out) if d}
    assert {"DaemonSet", "DeviceClass", "ServiceAccount"} <= kinds
    (daemonset,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "DaemonSet"]
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    assert container["image"].endswith(":0.1.0-previous")
    assert daemonset["metadata"]["labels"]["helm.sh/chart"] == "dra-driver-nvidia-gpu-0.1.0"
