"""kwok's pure parts: its version-keyed cache entry, config file, command line and Nodes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from dra_e2e.build import GOBUILD_DIR
from dra_e2e.kwok import (
    KWOK,
    KwokConfigError,
    KwokOptions,
    is_kwok_node,
    kwok_argv,
    kwok_dir,
    kwok_node,
    pod_cidr,
    render_kwok_config,
    toleration,
)
from dra_e2e.versions import KWOK_VERSION

NODE_STAGE = """apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: node-initialize}
spec:
  resourceRef: {apiGroup: v1, kind: Node}
"""
POD_STAGE = """apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-ready}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
"""


def test_cache_entry_is_named_by_version_and_lives_under_the_root(tmp_path: Path) -> None:
    entry = kwok_dir(root=tmp_path)
    assert entry.parent == tmp_path
    assert entry.name.startswith(f"kwok-{KWOK_VERSION}-")
    assert entry == kwok_dir(root=tmp_path)


def test_cache_key_covers_the_pinned_module_files() -> None:
    inputs = {p.name for p in KWOK.input_files()}
    assert {"go.mod", "go.sum", "main.go"} <= inputs
    go_mod = (GOBUILD_DIR / "kwok" / "go.mod").read_text()
    assert f"sigs.k8s.io/kwok {KWOK_VERSION}" in go_mod
    assert KWOK.outputs == ("kwok", "kwok-stages")


def test_another_version_gets_another_cache_entry(tmp_path: Path) -> None:
    other = replace(KWOK, version="v0.7.0")
    assert other.cache_key() != KWOK.cache_key()
    assert other.cache_key().startswith("kwok-v0.7.0-")


def test_config_holds_the_options_then_every_stage() -> None:
    options = KwokOptions(pod_parallelism=32, node_parallelism=8, lease_parallelism=4)
    docs = list(yaml.safe_load_all(render_kwok_config(NODE_STAGE + "---\n" + POD_STAGE, options)))
    assert docs[0]["kind"] == "KwokConfiguration"
    assert docs[0]["options"] == {
        "podPlayStageParallelism": 32,
        "nodePlayStageParallelism": 8,
        "nodeLeaseParallelism": 4,
        "nodeLeaseDurationSeconds": 40,
    }
    assert [d["metadata"]["name"] for d in docs[1:]] == ["node-initialize", "pod-ready"]


def test_config_without_a_pod_stage_is_refused() -> None:
    with pytest.raises(KwokConfigError, match="no Stage for kind Pod") as info:
        render_kwok_config(NODE_STAGE)
    assert info.value.field == "stages"


def test_config_with_a_foreign_document_names_it() -> None:
    with pytest.raises(KwokConfigError) as info:
        render_kwok_config(NODE_STAGE + "---\napiVersion: v1\nkind: ConfigMap\n")
    assert info.value.field == "stages[1].kind"


def test_argv_manages_only_annotated_nodes(tmp_path: Path) -> None:
    argv = kwok_argv(
        tmp_path / "kwok",
        kubeconfig=tmp_path / "k.kubeconfig",
        config=tmp_path / "kwok.yaml",
        options=KwokOptions(lease_duration_s=30),
    )
    assert argv[0] == str(tmp_path / "kwok")
    assert "--manage-all-nodes=false" in argv
    assert "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" in argv
    assert f"--config={tmp_path / 'kwok.yaml'}" in argv
    assert "--node-lease-duration-seconds=30" in argv


def test_node_is_annotated_tainted_and_has_its_own_pod_cidr() -> None:
    node = kwok_node(3, labels={"dra-e2e/fleet": "h100"})
    assert node["metadata"]["name"] == "kwok-node-3"
    assert node["metadata"]["labels"]["type"] == "kwok"
    assert node["metadata"]["labels"]["dra-e2e/fleet"] == "h100"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "kwok-node-3"
    assert node["spec"]["podCIDR"] == "10.128.3.0/24"
    assert node["spec"]["taints"][0]["key"] == toleration()["key"]
    assert is_kwok_node(node)
    assert not is_kwok_node({"metadata": {"name": "e2e-node-0"}})


def test_pod_cidrs_are_distinct_and_bounded() -> None:
    assert pod_cidr(0) == "10.128.0.0/24"
    assert pod_cidr(256) == "10.129.0.0/24"
    assert len({pod_cidr(i) for i in range(1000)}) == 1000
    with pytest.raises(KwokConfigError):
        pod_cidr(128 * 256)
