"""The objects the controller makes for one ComputeDomain, rendered without any I/O.

Per domain: a DaemonSet of domain daemons and the daemon ResourceClaimTemplate (both in the
driver namespace, named ``computedomain-daemon-<uid>``), and the workload ResourceClaimTemplate
named by ``spec.channel.resourceClaimTemplate.name`` in the domain's namespace. All carry the
domain label and the finalizer, so a restarted controller finds and cleans them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dra_api_types import COMPUTE_DOMAIN_DRIVER, ComputeDomain
from dra_api_types.nvidia_v1beta1 import API_VERSION as NVIDIA_API_VERSION

from .errors import SpecError
from .names import (
    COMPUTE_DOMAIN_LABEL,
    DAEMON_CLASS,
    DAEMON_SERVICE_ACCOUNT,
    DEFAULT_CHANNEL_CLASS,
    FINALIZER,
    MAX_NODES_PER_IMEX_DOMAIN,
    TARGET_DAEMON,
    TARGET_LABEL,
    TARGET_WORKLOAD,
    daemon_object_name,
)

__all__ = [
    "DaemonSettings",
    "daemon_claim_template",
    "daemon_set",
    "domain_ref",
    "workload_claim_template",
    "workload_template_name",
]

_DAEMON_CLAIM = "compute-domain-daemon"


@dataclass(frozen=True)
class DaemonSettings:
    """How the controller runs domain daemons (from its flags)."""

    namespace: str
    image: str
    image_pull_policy: str = "IfNotPresent"
    image_pull_secrets: tuple[str, ...] = ()
    max_nodes_per_imex_domain: int = MAX_NODES_PER_IMEX_DOMAIN
    log_verbosity: int = 1
    #: ``real`` runs nvidia-imex, ``fake`` this project's stand-in (fake GPU nodes).
    imex_backend: str = "real"
    extra_env: dict[str, str] = field(default_factory=dict)
    #: host-managed IMEX (``--imex-mode=hostManaged``): no daemons at all, the hosts run IMEX
    host_managed_imex: bool = False


def domain_ref(domain: ComputeDomain) -> str:
    """``namespace/name`` of a domain, for messages."""
    return f"{domain.metadata.namespace or ''}/{domain.metadata.name or ''}"


def _uid(domain: ComputeDomain) -> str:
    uid = domain.metadata.uid
    if not uid:
        raise SpecError(domain_ref(domain), "metadata.uid", "required value (not yet created?)")
    return uid


def workload_template_name(domain: ComputeDomain) -> str:
    """``spec.channel.resourceClaimTemplate.name``, or a :class:`SpecError` if missing."""
    channel = domain.spec.channel
    name = channel.resource_claim_template.name if channel is not None else ""
    if not name:
        raise SpecError(
            domain_ref(domain), "spec.channel.resourceClaimTemplate.name", "required value"
        )
    return name


def _labels(uid: str, target: str | None = None) -> dict[str, str]:
    labels = {COMPUTE_DOMAIN_LABEL: uid}
    if target is not None:
        labels[TARGET_LABEL] = target
    return labels


def _template(
    *,
    name: str,
    namespace: str,
    uid: str,
    target: str,
    request: str,
    device_class: str,
    parameters: dict[str, Any],
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": _labels(uid, target),
            "finalizers": [FINALIZER],
        },
        "spec": {
            "metadata": {"labels": _labels(uid, target)},
            "spec": {
                "devices": {
                    "requests": [{"name": request, "exactly": {"deviceClassName": device_class}}],
                    "config": [
                        {
                            "requests": [request],
                            "opaque": {"driver": COMPUTE_DOMAIN_DRIVER, "parameters": parameters},
                        }
                    ],
                }
            },
        },
    }


def workload_claim_template(
    domain: ComputeDomain, *, host_managed_imex: bool = False
) -> dict[str, Any]:
    """The workload ResourceClaimTemplate: one channel with the domain's allocation mode.

    With host-managed IMEX the mode is always ``Single`` whatever the domain asks, as
    NVIDIA's controller does: the hosts' IMEX service, not a daemon of the domain, owns the
    channels, so a claim may not take all of them.
    """
    uid = _uid(domain)
    channel = domain.spec.channel
    mode = (channel.allocation_mode if channel is not None else None) or "Single"
    if host_managed_imex:
        mode = "Single"
    return _template(
        name=workload_template_name(domain),
        namespace=domain.metadata.namespace or "default",
        uid=uid,
        target=TARGET_WORKLOAD,
        request="channel",
        device_class=DEFAULT_CHANNEL_CLASS,
        parameters={
            "apiVersion": NVIDIA_API_VERSION,
            "kind": "ComputeDomainChannelConfig",
            "domainID": uid,
            "allocationMode": mode,
        },
    )


def daemon_claim_template(domain: ComputeDomain, settings: DaemonSettings) -> dict[str, Any]:
    """The daemon ResourceClaimTemplate (driver namespace): the node's ``daemon-0``."""
    uid = _uid(domain)
    return _template(
        name=daemon_object_name(uid),
        namespace=settings.namespace,
        uid=uid,
        target=TARGET_DAEMON,
        request="daemon",
        device_class=DAEMON_CLASS,
        parameters={
            "apiVersion": NVIDIA_API_VERSION,
            "kind": "ComputeDomainDaemonConfig",
            "domainID": uid,
        },
    )


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def daemon_set(domain: ComputeDomain, settings: DaemonSettings) -> dict[str, Any]:
    """The DaemonSet of domain daemons: one pod on every node labelled with the domain's UID.

    The kubelet plugin labels a node when it prepares a channel of the domain there, so the
    daemons follow the workload. The pod claims the node's ``daemon-0`` through the daemon
    template; its probes are ``dra-compute-domain-daemon check`` (NVIDIA's timings).
    """
    uid = _uid(domain)
    name = daemon_object_name(uid)
    env: list[dict[str, Any]] = [
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
        {"name": "MAX_NODES_PER_IMEX_DOMAIN", "value": str(settings.max_nodes_per_imex_domain)},
        {"name": "IMEX_BACKEND", "value": settings.imex_backend},
        {"name": "LOG_VERBOSITY", "value": str(settings.log_verbosity)},
        _field_env("NODE_NAME", "spec.nodeName"),
        _field_env("POD_IP", "status.podIP"),
        _field_env("POD_NAME", "metadata.name"),
        _field_env("POD_NAMESPACE", "metadata.namespace"),
        _field_env("POD_UID", "metadata.uid"),
    ]
    env += [{"name": k, "value": v} for k, v in sorted(settings.extra_env.items())]
    # A check starts two Python processes (the probe and the IMEX query): more than the
    # default 1 s timeout on a busy node.
    check = {"exec": {"command": ["dra-compute-domain-daemon", "check"]}, "timeoutSeconds": 10}
    pod_spec: dict[str, Any] = {
        "serviceAccountName": DAEMON_SERVICE_ACCOUNT,
        "nodeSelector": {COMPUTE_DOMAIN_LABEL: uid},
        # A daemon must run wherever its workload runs, whatever taints the node has.
        "tolerations": [
            {"operator": "Exists", "effect": effect}
            for effect in ("NoSchedule", "NoExecute", "PreferNoSchedule")
        ],
        "terminationGracePeriodSeconds": 10,
        "containers": [
            {
                "name": "compute-domain-daemon",
                "image": settings.image,
                "imagePullPolicy": settings.image_pull_policy,
                "command": ["dra-compute-domain-daemon", "run"],
                "env": env,
                "startupProbe": {**check, "periodSeconds": 1, "failureThreshold": 1200},
                "readinessProbe": {**check, "periodSeconds": 10},
                "livenessProbe": {**check, "periodSeconds": 60, "failureThreshold": 20},
                "resources": {"claims": [{"name": _DAEMON_CLAIM}]},
            }
        ],
        "resourceClaims": [{"name": _DAEMON_CLAIM, "resourceClaimTemplateName": name}],
    }
    if settings.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": s} for s in settings.image_pull_secrets]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": _labels(uid),
            "finalizers": [FINALIZER],
        },
        "spec": {
            "selector": {"matchLabels": _labels(uid)},
            "template": {
                "metadata": {"labels": _labels(uid)},
                "spec": pod_spec,
            },
        },
    }
