"""Install guardrails: the unpublished default image on real GPUs, NVIDIA's image, NVIDIA users'
`kubeletPlugin.affinity: null`, and the NOTES on the kubelet plugin's placement (how many
nodes match, a warning when none can run it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import OWN_IMAGE, HelmFailed, gpus_container, plugin_pod
from chart_render import NVIDIA_VALUES, render_notes, render_objects

OVERRIDE = {"gpuResourcesEnabledOverride": "true"}
NO_NODE_WARNING = "WARNING: none of the cluster's"


def _image(objects: list[dict[str, Any]]) -> str:
    return str(gpus_container(objects)["image"])


def test_real_gpus_with_the_unpublished_default_image_fail_with_the_fix(helm: Path) -> None:
    with pytest.raises(HelmFailed) as err:
        render_objects(helm, OVERRIDE, base=False)
    message = str(err.value)
    assert "image.repository is the chart's default, dra-driver-nvidia-gpu-py" in message
    assert "ImagePullBackOff" in message
    assert "--set image.repository=<registry>/dra-driver-nvidia-gpu-py" in message
    assert "image.allowUnpublishedDefault=true" in message
    # The operator's registry, or the operator's word that the nodes have the image.
    own = render_objects(helm, {**OVERRIDE, "image.repository": OWN_IMAGE}, base=False)
    assert _image(own) == f"{OWN_IMAGE}:0.1.0"
    imported = {**OVERRIDE, "image.allowUnpublishedDefault": "true"}
    assert _image(render_objects(helm, imported, base=False)) == "dra-driver-nvidia-gpu-py:0.1.0"


def test_fake_gpus_need_no_published_image(helm: Path) -> None:
    objects = render_objects(helm, {**OVERRIDE, "devices.backend": "fake"}, base=False)
    assert _image(objects) == "dra-driver-nvidia-gpu-py:0.1.0"


@pytest.mark.parametrize(
    "repository",
    [
        "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu",
        "nvcr.io/nvidia/k8s-dra-driver-gpu",
        "ghcr.io/nvidia/k8s-dra-driver-gpu",
        "mirror.example.com/nvidia/k8s-dra-driver-gpu",
        "k8s-dra-driver",
    ],
)
def test_nvidias_image_is_refused_even_when_allowed(helm: Path, repository: str) -> None:
    for backend in ("nvml", "fake"):
        with pytest.raises(HelmFailed) as err:
            render_objects(helm, {"image.repository": repository, "devices.backend": backend})
        assert f'image.repository="{repository}" is NVIDIA\'s image of its Go driver' in str(
            err.value
        )
        assert "Set image.repository to this driver's image" in str(err.value)


def test_nvidias_values_need_this_drivers_image(helm: Path) -> None:
    # NVIDIA's values file names NVIDIA's image: moving over, the operator sets ours.
    with pytest.raises(HelmFailed, match="is NVIDIA's image of its Go driver"):
        render_objects(helm, values=[NVIDIA_VALUES])
    objects = render_objects(helm, {"image.repository": OWN_IMAGE}, values=[NVIDIA_VALUES])
    assert _image(objects) == f"{OWN_IMAGE}:0.1.0"


def test_affinity_null_drops_the_default_affinity(helm: Path, tmp_path: Path) -> None:
    assert "nodeAffinity" in plugin_pod(render_objects(helm))["affinity"]
    # NVIDIA users' way, in a values file and on the command line.
    null_file = tmp_path / "null.yaml"
    null_file.write_text(yaml.safe_dump({"kubeletPlugin": {"affinity": None}}))
    assert "affinity" not in plugin_pod(render_objects(helm, values=[null_file]))
    assert "affinity" not in plugin_pod(render_objects(helm, {"kubeletPlugin.affinity": "null"}))
    # NVIDIA's own values with the affinity dropped.
    dropped = render_objects(
        helm, {"image.repository": OWN_IMAGE}, values=[NVIDIA_VALUES, null_file]
    )
    assert "affinity" not in plugin_pod(dropped)
    custom = {"kubeletPlugin.affinity.podAntiAffinity.x": "y"}
    assert plugin_pod(render_objects(helm, custom))["affinity"] == {"podAntiAffinity": {"x": "y"}}


def _node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


PLAIN = [_node("cpu-1"), _node("cpu-2", **{"kubernetes.io/os": "linux"})]
GPU = _node("gpu-1", **{"nvidia.com/gpu.present": "true"})
NFD = _node("gpu-2", **{"feature.node.kubernetes.io/pci-10de.present": "true"})


def test_notes_warn_when_no_node_matches_the_default_affinity(helm: Path) -> None:
    notes = render_notes(helm, nodes=PLAIN)
    assert "WARNING: none of the cluster's 2 nodes matches the kubelet plugin's" in notes
    assert "`rollout status` still succeeds" in notes
    assert "set kubeletPlugin.affinity (null: every node)" in notes
    for matching in (GPU, NFD):
        assert NO_NODE_WARNING not in render_notes(helm, nodes=[*PLAIN, matching])


def test_notes_count_the_nodes_that_match(helm: Path) -> None:
    notes = render_notes(helm, nodes=[*PLAIN, GPU, NFD])
    assert "Kubelet plugin placement: 2 of the cluster's 4 nodes match" in notes
    assert "affinity (gpu-1, gpu-2)." in notes
    assert "Kubelet plugin placement:" not in render_notes(helm, nodes=PLAIN)


def test_notes_say_placement_is_unchecked_offline(helm: Path) -> None:
    for notes in (render_notes(helm), render_notes(helm, nodes=[])):
        assert "Kubelet plugin placement: not checked (no Node could be read" in notes
        assert "get daemonset shows DESIRED 0" in notes


def test_notes_stay_quiet_offline_with_fake_gpus_and_with_affinity_null(helm: Path) -> None:
    assert NO_NODE_WARNING not in render_notes(helm)
    assert NO_NODE_WARNING not in render_notes(helm, nodes=[])
    assert NO_NODE_WARNING not in render_notes(helm, {"devices.backend": "fake"}, nodes=PLAIN)
    null = {"kubeletPlugin.affinity": "null"}
    assert NO_NODE_WARNING not in render_notes(helm, null, nodes=PLAIN)


def test_notes_check_the_node_selector_too(helm: Path) -> None:
    selector = {"devices.backend": "fake", "kubeletPlugin.nodeSelector.pool": "gpu"}
    assert NO_NODE_WARNING in render_notes(helm, selector, nodes=PLAIN)
    labelled = [*PLAIN, _node("gpu-3", pool="gpu")]
    assert NO_NODE_WARNING not in render_notes(helm, selector, nodes=labelled)
    # Both must hold: the selector's node lacks the GPU labels of the default affinity.
    nvml = {"kubeletPlugin.nodeSelector.pool": "gpu"}
    assert NO_NODE_WARNING in render_notes(helm, nvml, nodes=[*labelled, GPU])
    both = _node("gpu-4", pool="gpu", **{"nvidia.com/gpu.present": "true"})
    assert NO_NODE_WARNING not in render_notes(helm, nvml, nodes=[*labelled, both])


@pytest.mark.parametrize(
    ("operator", "values", "labels", "warns"),
    [
        ("In", ["a", "b"], {"tier": "b"}, False),
        ("In", ["a"], {"tier": "b"}, True),
        ("NotIn", ["a"], {"tier": "b"}, False),
        ("NotIn", ["b"], {"tier": "b"}, True),
        ("NotIn", ["b"], {}, False),
        ("Exists", None, {"tier": ""}, False),
        ("Exists", None, {}, True),
        ("DoesNotExist", None, {}, False),
        ("DoesNotExist", None, {"tier": "x"}, True),
    ],
)
def test_notes_evaluate_custom_affinity_operators(
    helm: Path,
    tmp_path: Path,
    operator: str,
    values: list[str] | None,
    labels: dict[str, str],
    warns: bool,
) -> None:
    expression: dict[str, Any] = {"key": "tier", "operator": operator}
    if values is not None:
        expression["values"] = values
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expression]}]
            }
        }
    }
    file = tmp_path / "affinity.yaml"
    file.write_text(yaml.safe_dump({"kubeletPlugin": {"affinity": affinity}}))
    notes = render_notes(helm, values=[file], nodes=[_node("n1", **labels)])
    assert (NO_NODE_WARNING in notes) is warns


def _controller_args(objects: list[dict[str, Any]]) -> list[str]:
    (deployment,) = [
        o for o in objects if o["kind"] == "Deployment" and "allocation" in o["metadata"]["name"]
    ]
    return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])


def test_the_placement_grace_period_reaches_the_allocation_controller(helm: Path) -> None:
    assert "--placement-grace-period=300" in _controller_args(render_objects(helm))
    short = {"allocationController.placementGracePeriod": "5"}
    assert "--placement-grace-period=5" in _controller_args(render_objects(helm, short))
    with pytest.raises(HelmFailed, match="placementGracePeriod"):
        render_objects(helm, {"allocationController.placementGracePeriod": "-1"})
