"""The scale workload's ComputeDomains: valid domains, their pods, the stand-ins (pure)."""

from __future__ import annotations

from dra_api_types import ComputeDomain, DeviceClass, ResourceClaimTemplate
from dra_computedomain.manifests import workload_claim_template
from dra_e2e.scale_domains import (
    DOMAIN_NODES,
    channel_device_class,
    channel_template_name,
    compute_domain,
    domain_count,
    domain_deployment,
    stand_in_channel_template,
)


def test_domain_count_follows_the_share_and_leaves_half_the_gb200_nodes_free() -> None:
    assert domain_count(200, 17) == 2  # 8 % of 200 = 16 pods = 4 domains, but 17 // 2 // 4 = 2
    assert domain_count(5000, 334) == 41
    assert domain_count(5000, 10_000) == 100  # 400 pods: the share
    assert domain_count(10, 17) == 0
    assert domain_count(200, 0) == 0


def test_domain_is_a_valid_four_node_compute_domain() -> None:
    domain = ComputeDomain.from_dict(compute_domain(3, "ns"), validate=True)
    assert domain.spec.num_nodes == DOMAIN_NODES == 4
    assert domain.spec.channel is not None
    assert domain.spec.channel.resource_claim_template.name == channel_template_name(3)


def test_stand_in_template_is_what_the_controller_writes_less_the_finalizer() -> None:
    stand_in = stand_in_channel_template(3, "ns")
    ResourceClaimTemplate.from_dict(stand_in, validate=True)
    domain = ComputeDomain.from_dict(compute_domain(3, "ns"))
    config = stand_in["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    domain.metadata.uid = config["domainID"]
    controllers = workload_claim_template(domain)
    assert controllers["metadata"].pop("finalizers")
    assert stand_in == controllers
    assert stand_in["metadata"]["name"] == channel_template_name(3)
    # The same domain gets the same made-up UID; another domain another.
    assert stand_in_channel_template(3, "ns") == stand_in
    other = stand_in_channel_template(4, "ns")["spec"]["spec"]["devices"]["config"][0]
    assert other["opaque"]["parameters"]["domainID"] != config["domainID"]


def test_channel_class_selects_the_plugins_channel() -> None:
    cls = DeviceClass.from_dict(channel_device_class(), validate=True)
    assert cls.metadata.name == "compute-domain-default-channel.nvidia.com"
    template = stand_in_channel_template(0, "ns")
    request = template["spec"]["spec"]["devices"]["requests"][0]
    assert request["exactly"]["deviceClassName"] == cls.metadata.name


def test_domain_pods_take_a_channel_and_a_gpu_on_gb200_nodes() -> None:
    spec = domain_deployment(2, "ns", 4)["spec"]
    assert spec["replicas"] == 4
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {"type": "kwok", "dra-e2e/fleet": "gb200"}
    assert pod["resourceClaims"] == [
        {"name": "channel", "resourceClaimTemplateName": channel_template_name(2)},
        {"name": "gpu", "resourceClaimTemplateName": "whole-gpu"},
    ]
    assert pod["containers"][0]["resources"]["claims"] == [{"name": "channel"}, {"name": "gpu"}]
