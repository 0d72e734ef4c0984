"""The Helm chart, rendered offline by the pinned Helm: guards, schema, and each object's shape."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dra_api_types
import pytest
import yaml

# --import-mode=importlib gives tests no package: the shared helpers are found by path.
from chart_helpers import (
    BASE_SETS,
    CHART,
    NAMESPACE,
    REPO,
    HelmFailed,
    Render,
    run_helm,
    set_args,
)
from dra_api_types.driver_classes import driver_device_classes

SEED = Path("/work/shared/seeds/002_0fec738554e607fc.txt")


@pytest.fixture(scope="module")
def render(helm: Path) -> Render:
    """Renders the chart with ``--set`` values; returns the manifest objects in order."""

    def _render(
        sets: Mapping[str, str] | None = None,
        *,
        namespace: str = NAMESPACE,
        base: bool = True,
    ) -> list[dict[str, Any]]:
        values = {**(BASE_SETS if base else {}), **(sets or {})}
        args = ["template", "dra", str(CHART), "--namespace", namespace, *set_args(values)]
        out = run_helm(helm, *args)
        return [doc for doc in yaml.safe_load_all(out) if doc]

    return _render


GPU_CLASSES = ["gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"]
CD_CLASSES = ["compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com"]


def _kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def _one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = _kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, got {[o['metadata']['name'] for o in found]}"
    return found[0]


def _container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The GPU plugin's container (the compute-domains one is tested on its own)."""
    pod = _one(objects, "DaemonSet")["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["name"] == "gpus"]
    return dict(container)


def _plugin(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The kubelet plugin's object of ``kind`` (the compute-domain controller and daemons
    have their own: test_chart_rbac_computedomain.py)."""
    found = [o for o in _kind(objects, kind) if o["metadata"]["name"].endswith("-kubelet-plugin")]
    assert len(found) == 1, f"expected one plugin {kind}, got {found}"
    return found[0]


def _slice_policy(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The ResourceSlice admission policy (or its binding) of ``kind`` (the Node policy is
    tested with it in test_chart_admission_policies.py)."""
    (found,) = [
        o for o in _kind(objects, kind) if o["metadata"]["name"].endswith("-resourceslices")
    ]
    return found


def _pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(_one(objects, "DaemonSet")["spec"]["template"]["spec"])


def test_helm_lint_strict_passes(helm: Path) -> None:
    for backend in ("nvml", "fake"):
        sets = {"gpuResourcesEnabledOverride": "true", "devices.backend": backend}
        out = run_helm(
            helm, "lint", "--strict", str(CHART), "--namespace", NAMESPACE, *set_args(sets)
        )
        assert "0 chart(s) failed" in out


def test_default_namespace_is_refused_unless_allowed(render: Render) -> None:
    with pytest.raises(HelmFailed, match="Refusing to install into the 'default' namespace"):
        render(namespace="default")
    objects = render({"allowDefaultNamespace": "true"}, namespace="default")
    assert _one(objects, "DaemonSet")["metadata"]["namespace"] == "default"


def test_gpus_require_the_device_plugin_override(render: Render) -> None:
    with pytest.raises(HelmFailed, match="gpuResourcesEnabledOverride=true"):
        render(base=False)
    # Compute domains alone do not touch nvidia.com/gpu, so they need no override.
    objects = render(
        {
            "resources.gpus.enabled": "false",
            "resources.computeDomains.enabled": "true",
            "image.allowUnpublishedDefault": "true",
        },
        base=False,
    )
    assert [o["metadata"]["name"] for o in _kind(objects, "DeviceClass")] == CD_CLASSES
    (plugin,) = _kind(objects, "DaemonSet")
    containers = plugin["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["compute-domains"]


def test_fake_compute_domain_nodes_get_no_host_dev(render: Render) -> None:
    """Fake nodes back IMEX channels with stand-ins: no host /dev in the plugin pod."""
    objects = render({"resources.computeDomains.enabled": "true", "devices.backend": "fake"})
    (plugin,) = _kind(objects, "DaemonSet")
    pod = plugin["spec"]["template"]["spec"]
    (cd,) = [c for c in pod["containers"] if c["name"] == "compute-domains"]
    assert not any(a.startswith("--dev-root") for a in cd["args"])
    assert all(v.get("hostPath", {}).get("path") != "/dev" for v in pod["volumes"])


@pytest.mark.parametrize("backend", ["nvml", "fake"])
def test_alt_proc_devices_is_mounted_into_the_compute_domains_container(
    render: Render, backend: str
) -> None:
    """NVIDIA's altProcDevices: the host file at /alt-proc-devices, ALT_PROC_DEVICES_PATH."""
    host_file = "/var/lib/nvml-mock/imex/proc-devices"
    values = {"resources.computeDomains.enabled": "true", "devices.backend": backend}
    objects = render({**values, "altProcDevices": host_file})
    pod = _kind(objects, "DaemonSet")[0]["spec"]["template"]["spec"]
    (cd,) = [c for c in pod["containers"] if c["name"] == "compute-domains"]
    assert {"name": "ALT_PROC_DEVICES_PATH", "value": "/alt-proc-devices"} in cd["env"]
    (mount,) = [m for m in cd["volumeMounts"] if m["mountPath"] == "/alt-proc-devices"]
    assert mount["readOnly"] is True
    (vol,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert vol["hostPath"] == {"path": host_file, "type": "File"}
    for other in pod["containers"]:
        if other["name"] != "compute-domains":
            assert "ALT_PROC_DEVICES_PATH" not in str(other.get("env"))
    # Without the value: neither the variable nor the mount.
    pod = _kind(render(values), "DaemonSet")[0]["spec"]["template"]["spec"]
    assert "alt-proc-devices" not in json.dumps(pod)


@pytest.mark.parametrize("enabled", ["true", "false"])
def test_gpu_clique_label_value_reaches_the_compute_domains_container(
    render: Render, enabled: str
) -> None:
    values = {"resources.computeDomains.enabled": "true", "devices.backend": "fake"}
    key = "kubeletPlugin.containers.computeDomains.gpuCliqueLabelEnabled"
    pod = _kind(render({**values, key: enabled}), "DaemonSet")[0]["spec"]["template"]["spec"]
    (cd,) = [c for c in pod["containers"] if c["name"] == "compute-domains"]
    assert {"name": "GPU_CLIQUE_LABEL_ENABLED", "value": enabled} in cd["env"]


def test_nothing_enabled_is_an_error(render: Render) -> None:
    with pytest.raises(HelmFailed, match="Nothing to install"):
        render({"resources.gpus.enabled": "false", "resources.computeDomains.enabled": "false"})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("resources.gpu.enabled", "true", "additional properties 'gpu' not allowed"),
        ("gpuResourceEnabledOverride", "true", "'gpuResourceEnabledOverride' not allowed"),
        ("kubeletPlugin.kubeletPluginDirectoryPath", "/x", "'kubeletPluginDirectoryPath'"),
        ("kubeletPlugin.containers.gpus.healthCheckPort", "1", "'healthCheckPort' not allowed"),
        ("devices.backend", "fak", "value must be one of 'nvml', 'fake'"),
        ("devices.fakeGpus", "eight-h100s", "/devices/fakeGpus"),
        ("image.pullpolicy", "Always", "'pullpolicy' not allowed"),
        ("image.pullPolicy", "Sometimes", "/image/pullPolicy"),
        ("logVerbosity", "loud", "/logVerbosity"),
        ("featureGates.NVMLDeviceHealthCheck", "yes-please", "/featureGates/NVMLDeviceHealthCheck"),
        ("nvidiaDriverRoot", "run/nvidia/driver", "/nvidiaDriverRoot"),
        ("resourceApiVersion", "resource.k8s.io/v2", "/resourceApiVersion"),
    ],
)
def test_schema_rejects_typos_and_bad_values(
    render: Render, key: str, value: str, message: str
) -> None:
    with pytest.raises(HelmFailed) as err:
        render({key: value})
    assert "values don't meet the specifications of the schema" in str(err.value)
    assert message in str(err.value)


def test_every_value_is_described_by_the_schema() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())

    def walk(node: Any, sch: dict[str, Any], path: str) -> None:
        if "$ref" in sch:
            sch = schema["definitions"][sch["$ref"].rsplit("/", 1)[-1]]
        if not isinstance(node, dict) or "properties" not in sch:
            return
        for key, child in node.items():
            assert key in sch["properties"], f"values.yaml key {path}{key} is not in the schema"
            walk(child, sch["properties"][key], f"{path}{key}.")

    walk(values, schema, "")


def test_fake_backend_runs_unprivileged_with_only_the_mounts_it_needs(render: Render) -> None:
    objects = render({"devices.backend": "fake", "devices.fakeGpus": "{4xA100-40GB,4xL4}"})
    container = _container(objects)
    sc = container["securityContext"]
    assert sc["privileged"] is False
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "--device-backend=fake" in container["args"]
    assert "--fake-gpus=4xA100-40GB,4xL4" in container["args"]
    assert not any(a.startswith("--nvidia-driver-root") for a in container["args"])
    host_paths = {
        v["name"]: v["hostPath"]["path"] for v in _pod_spec(objects)["volumes"] if "hostPath" in v
    }
    cd_dir = host_paths.pop("compute-domain-plugin-dir")
    assert cd_dir == "/var/lib/kubelet/plugins/compute-domain.nvidia.com"
    assert host_paths == {
        "plugins-registry": "/var/lib/kubelet/plugins_registry",
        "plugin-dir": "/var/lib/kubelet/plugins/gpu.nvidia.com",
        "cdi": "/var/run/cdi",
        # Read-only (below): the kubelet's PodResources socket, for the container label.
        "pod-resources": "/var/lib/kubelet/pod-resources",
    }
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["pod-resources"]["readOnly"] is True
    for name, path in host_paths.items():
        assert mounts[name]["mountPath"] == path, "sockets and CDI paths must match the host's"
        assert "mountPropagation" not in mounts[name], "Bidirectional needs a privileged container"
    # Every node gets fake GPUs: no GPU-hardware affinity.
    assert "affinity" not in _pod_spec(objects)


def test_fake_backend_defaults_its_fleet(render: Render) -> None:
    container = _container(render({"devices.backend": "fake"}))
    assert "--fake-gpus=8xH100-80GB" in container["args"]
    escaped = _container(render({"devices.backend": "fake", "devices.fakeGpus": r"2xT4\,1xL4"}))
    assert "--fake-gpus=2xT4,1xL4" in escaped["args"]
    mig = _container(render({"devices.backend": "fake", "devices.fakeGpus": "2xA100-40GB:mig"}))
    assert "--fake-gpus=2xA100-40GB:mig" in mig["args"]
    layout = _container(
        render({"devices.backend": "fake", "devices.fakeGpus": "{4xL4,2xGH200-96GB:mig=7x1g.12gb}"})
    )
    assert "--fake-gpus=4xL4,2xGH200-96GB:mig=7x1g.12gb" in layout["args"]


def test_nvml_backend_is_privileged_and_reads_the_driver_root(render: Render) -> None:
    objects = render({"nvidiaDriverRoot": "/run/nvidia/driver"})
    container = _container(objects)
    assert container["securityContext"] == {"privileged": True}
    assert "--device-backend=nvml" in container["args"]
    assert "--nvidia-driver-root=/run/nvidia/driver" in container["args"]
    assert "--container-driver-root=/driver-root" in container["args"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["driver-root"]["mountPath"] == "/driver-root"
    assert mounts["driver-root"]["readOnly"] is True
    volumes = {v["name"]: v for v in _pod_spec(objects)["volumes"]}
    assert volumes["driver-root"]["hostPath"]["path"] == "/run/nvidia/driver"
    terms = _pod_spec(objects)["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    keys = {t["matchExpressions"][0]["key"] for t in terms}
    assert "nvidia.com/gpu.present" in keys
    assert "feature.node.kubernetes.io/pci-10de.present" in keys


@pytest.mark.parametrize(
    ("root", "host_root"),
    [
        ("/", "/"),
        ("/run/nvidia/driver", "/run/nvidia/driver"),
        ("/run/nvidia/driver/", "/run/nvidia/driver"),
    ],
)
def test_cdi_specs_name_host_driver_paths_the_plugin_reads_below_driver_root(
    render: Render, root: str, host_root: str
) -> None:
    # CDI specs are resolved by the container runtime on the host: --nvidia-driver-root must be
    # the host path, and --container-driver-root where the plugin sees the same files.
    objects = render({"nvidiaDriverRoot": root})
    container = _container(objects)
    args = [a for a in container["args"] if "driver-root" in a]
    assert args == [f"--nvidia-driver-root={host_root}", "--container-driver-root=/driver-root"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["driver-root"]["mountPath"] == "/driver-root"
    volumes = {v["name"]: v for v in _pod_spec(objects)["volumes"]}
    assert volumes["driver-root"]["hostPath"]["path"] == root


def test_security_context_values_override_the_default_key_by_key(render: Render) -> None:
    container = _container(
        render(
            {
                "devices.backend": "fake",
                "kubeletPlugin.containers.gpus.securityContext.runAsUser": "1000",
            }
        )
    )
    assert container["securityContext"]["runAsUser"] == 1000
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_fake_gpus_with_nvml_is_refused(render: Render) -> None:
    with pytest.raises(HelmFailed, match=r"only applies to devices\.backend=fake"):
        render({"devices.fakeGpus": "8xH100-80GB"})


def test_flags_follow_the_values(render: Render) -> None:
    objects = render(
        {
            "devices.backend": "fake",
            "kubeletPlugin.kubeletRegistrarDirectoryPath": "/var/lib/k/plugins_registry",
            "kubeletPlugin.kubeletPluginsDirectoryPath": "/var/lib/k/plugins",
            "kubeletPlugin.cdiRoot": "/etc/cdi",
            "kubeletPlugin.containers.gpus.healthcheckPort": "6000",
            "kubeletPlugin.metrics.gpuHttpEndpoint": ":9400",
            "logVerbosity": "6",
            "featureGates.NVMLDeviceHealthCheck": "true",
            "featureGates.DRAListTypeAttributes": "false",
        }
    )
    container = _container(objects)
    args = container["args"]
    for flag in (
        "--kubelet-registrar-directory-path=/var/lib/k/plugins_registry",
        "--kubelet-plugins-directory-path=/var/lib/k/plugins",
        "--cdi-root=/etc/cdi",
        "--healthcheck-port=6000",
        "--http-endpoint=:9400",
        "-v=6",
        "--feature-gates=DRAListTypeAttributes=false,NVMLDeviceHealthCheck=true",
        "--node-name=$(NODE_NAME)",
    ):
        assert flag in args
    assert container["livenessProbe"]["grpc"]["port"] == 6000
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "healthz": 6000,
        "metrics": 9400,
    }
    volumes = {
        v["name"]: v["hostPath"]["path"] for v in _pod_spec(objects)["volumes"] if "hostPath" in v
    }
    assert volumes["plugin-dir"] == "/var/lib/k/plugins/gpu.nvidia.com"
    assert volumes["cdi"] == "/etc/cdi"


def test_the_kubelets_pod_resources_directory_is_mounted_read_only_into_the_gpu_plugin(
    render: Render,
) -> None:
    objects = render()
    container = _container(objects)
    assert (
        "--kubelet-pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock"
        in (container["args"])
    )
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "pod-resources"]
    assert mount == {
        "name": "pod-resources",
        "mountPath": "/var/lib/kubelet/pod-resources",
        "readOnly": True,
    }
    (volume,) = [v for v in _pod_spec(objects)["volumes"] if v["name"] == "pod-resources"]
    assert volume["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    # Only the GPU plugin asks the kubelet (the compute domain plugin has no per-pod series).
    for other in _pod_spec(objects)["containers"]:
        if other["name"] != "gpus":
            assert all(m["name"] != "pod-resources" for m in other.get("volumeMounts", []))

    moved = render(
        {"kubeletPlugin.kubeletPodResourcesDirectoryPath": "/var/lib/k0s/kubelet/pod-resources/"}
    )
    assert (
        "--kubelet-pod-resources-socket=/var/lib/k0s/kubelet/pod-resources/kubelet.sock"
        in (_container(moved)["args"])
    )
    (volume,) = [v for v in _pod_spec(moved)["volumes"] if v["name"] == "pod-resources"]
    assert volume["hostPath"]["path"] == "/var/lib/k0s/kubelet/pod-resources"


def test_an_empty_pod_resources_directory_mounts_nothing_and_leaves_the_label_empty(
    render: Render,
) -> None:
    objects = render({"kubeletPlugin.kubeletPodResourcesDirectoryPath": ""})
    container = _container(objects)
    assert "--kubelet-pod-resources-socket=" in container["args"]
    assert all(m["name"] != "pod-resources" for m in container["volumeMounts"])
    assert all(v["name"] != "pod-resources" for v in _pod_spec(objects)["volumes"])
    with pytest.raises(HelmFailed, match="kubeletPodResourcesDirectoryPath"):
        render({"kubeletPlugin.kubeletPodResourcesDirectoryPath": "pod-resources"})


def test_negative_healthcheck_port_disables_the_probe(render: Render) -> None:
    container = _container(
        render(
            {
                "kubeletPlugin.containers.gpus.healthcheckPort": "-1",
                "kubeletPlugin.metrics.enabled": "false",
            }
        )
    )
    assert "livenessProbe" not in container
    assert "ports" not in container
    assert not any(a.startswith("--http-endpoint") for a in container["args"])


def test_image_reference_defaults_to_app_version(render: Render) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert _container(render())["image"] == f"dra-driver-nvidia-gpu-py:{chart['appVersion']}"
    custom = _container(render({"image.repository": "registry.example.com/dra", "image.tag": "v9"}))
    assert custom["image"] == "registry.example.com/dra:v9"


def test_device_classes_are_nvidias(render: Render) -> None:
    # Compute domains are on by default (NVIDIA's default), with their two classes.
    classes = {o["metadata"]["name"]: o for o in _kind(render(), "DeviceClass")}
    assert sorted(classes) == sorted(GPU_CLASSES + CD_CLASSES)
    expected = {
        "gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && "
        "device.attributes['gpu.nvidia.com'].type == 'gpu'",
        "mig.nvidia.com": "device.driver == 'gpu.nvidia.com' && "
        "device.attributes['gpu.nvidia.com'].type == 'mig'",
        "vfio.gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && "
        "device.attributes['gpu.nvidia.com'].type == 'vfio'",
    }
    for name, expression in expected.items():
        assert classes[name]["apiVersion"] == "resource.k8s.io/v1"
        assert classes[name]["spec"]["selectors"] == [{"cel": {"expression": expression}}]
    assert classes["gpu.nvidia.com"]["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    assert "extendedResourceName" not in classes["mig.nvidia.com"]["spec"]


def test_device_classes_equal_the_ones_offline_tools_know(render: Render) -> None:
    # kubectl dra uses dra_api_types' list when the input has no class of that name.
    rendered = [
        {**o, "metadata": {"name": o["metadata"]["name"]}}
        for o in _kind(render({"resources.computeDomains.enabled": "true"}), "DeviceClass")
    ]
    assert rendered == driver_device_classes()


def test_gpu_class_selector_is_the_one_in_the_seed_article(render: Render) -> None:
    seed = SEED.read_text()
    m = re.search(r"name: gpu\.nvidia\.com\n.*?expression: (.*?)\n\n", seed, re.DOTALL)
    assert m, "the seed article shows the gpu.nvidia.com class"
    published = " ".join(m.group(1).split())
    classes = {o["metadata"]["name"]: o for o in _kind(render(), "DeviceClass")}
    gpu = classes["gpu.nvidia.com"]
    assert gpu["spec"]["selectors"][0]["cel"]["expression"] == published


def test_compute_domain_classes_when_enabled(render: Render) -> None:
    objects = render({"resources.computeDomains.enabled": "true"})
    classes = {o["metadata"]["name"]: o for o in _kind(objects, "DeviceClass")}
    assert sorted(classes) == sorted(GPU_CLASSES + CD_CLASSES)
    channel = classes["compute-domain-default-channel.nvidia.com"]["spec"]["selectors"][0]
    assert "device.attributes['compute-domain.nvidia.com'].id == 0" in channel["cel"]["expression"]
    vap = _slice_policy(objects, "ValidatingAdmissionPolicy")
    drivers = vap["spec"]["validations"][2]["expression"]
    assert '["gpu.nvidia.com","compute-domain.nvidia.com"]' in drivers


def test_older_resource_api_has_no_extended_resource_name(render: Render) -> None:
    objects = render({"resourceApiVersion": "resource.k8s.io/v1beta2"})
    for cls in _kind(objects, "DeviceClass"):
        assert cls["apiVersion"] == "resource.k8s.io/v1beta2"
        assert "extendedResourceName" not in cls["spec"]


def test_device_classes_validate_with_the_api_models(render: Render) -> None:
    objects = render({"resources.computeDomains.enabled": "true"})
    classes = [o for o in objects if o["kind"] == "DeviceClass"]
    loaded = dra_api_types.load_all(yaml.safe_dump_all(classes), validate=True)
    assert len(loaded) == 5
    assert all(isinstance(o, dra_api_types.DeviceClass) for o in loaded)


def test_rbac_is_least_privilege(render: Render) -> None:
    # The kubelet plugin's RBAC (the allocation controller's has a test module of its own).
    objects = render()
    role = _plugin(objects, "ClusterRole")
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    assert all("*" not in verbs for verbs in granted.values())
    assert all(resource != "*" and group != "*" for group, resource in granted)
    # The exact verbs are pinned against the plugin's code in test_chart_rbac.py.
    assert granted[("resource.k8s.io", "resourceclaims")] == {"get"}
    # get: the slices' owner; patch: the compute-domain plugin's node label.
    assert granted[("", "nodes")] == {"get", "patch"}
    for forbidden in ("secrets", "pods", "configmaps", "resourceclaimtemplates"):
        assert not any(resource == forbidden for _, resource in granted)
    sa = _plugin(objects, "ServiceAccount")
    bound = [
        b
        for b in _kind(objects, "RoleBinding")
        if any(s["name"] == sa["metadata"]["name"] for s in b["subjects"])
    ]
    # One namespaced binding: the MPS daemon Deployments (and their pods, listed) in the
    # driver's own namespace; nothing else, and no secrets.
    (mps,) = bound
    assert mps["metadata"]["namespace"] == NAMESPACE
    (mps_role,) = [
        r for r in _kind(objects, "Role") if r["metadata"]["name"] == mps["roleRef"]["name"]
    ]
    assert mps_role["metadata"]["namespace"] == NAMESPACE
    assert {r for rule in mps_role["rules"] for r in rule["resources"]} == {"deployments", "pods"}
    assert all("*" not in rule["verbs"] for rule in mps_role["rules"])
    binding = _plugin(objects, "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NAMESPACE}
    ]
    assert _pod_spec(objects)["serviceAccountName"] == sa["metadata"]["name"]


def test_admission_policy_confines_the_plugin_to_its_node(render: Render) -> None:
    objects = render({"allocationController.enabled": "false"})
    vap = _slice_policy(objects, "ValidatingAdmissionPolicy")
    binding = _slice_policy(objects, "ValidatingAdmissionPolicyBinding")
    sa = _plugin(objects, "ServiceAccount")["metadata"]["name"]
    assert binding["spec"]["policyName"] == vap["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    (condition,) = vap["spec"]["matchConditions"]
    assert f'"system:serviceaccount:{NAMESPACE}:{sa}"' in condition["expression"]
    rules = vap["spec"]["matchConstraints"]["resourceRules"]
    assert rules == [
        {
            "apiGroups": ["resource.k8s.io"],
            "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE", "DELETE"],
            "resources": ["resourceslices"],
        }
    ]
    expressions = [v["expression"] for v in vap["spec"]["validations"]]
    assert "variables.objectNodeName == variables.userNodeName" in expressions
    assert vap["spec"]["failurePolicy"] == "Fail"


def test_namespace_override_moves_every_namespaced_object(render: Render) -> None:
    objects = render({"namespaceOverride": "gpu-system"})
    namespaced = [o for o in objects if "namespace" in o["metadata"]]
    assert {o["metadata"]["namespace"] for o in namespaced} == {"gpu-system"}
    assert {o["kind"] for o in namespaced} == {
        "ServiceAccount",
        "DaemonSet",
        "Deployment",
        # The allocation controller's.
        "Service",
        "ConfigMap",
        "Role",
        "RoleBinding",
        # The metrics scraper's token (secure /metrics).
        "Secret",
    }
    for binding in _kind(objects, "ClusterRoleBinding") + _kind(objects, "RoleBinding"):
        assert binding["subjects"][0]["namespace"] == "gpu-system"


def test_chart_ships_the_crds_generated_by_api_types() -> None:
    generated = {
        p.name: p.read_text()
        for p in (REPO / "packages/api-types/src/dra_api_types/crds").glob("*.yaml")
    }
    shipped = {p.name: p.read_text() for p in (CHART / "crds").glob("*.yaml")}
    assert generated, "api-types generates CRD manifests"
    assert shipped == generated, (
        "chart CRDs are stale: run "
        "`uv run python -m dra_api_types.crds deployments/helm/dra-driver-nvidia-gpu/crds`"
    )
    for text in shipped.values():
        (crd,) = [d for d in yaml.safe_load_all(text) if d]
        assert crd["kind"] == "CustomResourceDefinition"
        assert crd["spec"]["group"] == "resource.nvidia.com"


@pytest.mark.parametrize(("value", "env"), [("4", "4"), ("memory", "memory"), ("", None)])
def test_consumable_shares_reaches_the_plugin(render: Render, value: str, env: str | None) -> None:
    container = _container(render({"devices.backend": "fake", "consumableShares": value}))
    found = {e["name"]: e.get("value") for e in container["env"]}
    assert found.get("CONSUMABLE_SHARES") == env
