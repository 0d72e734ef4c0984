"""The host tools the harness, the demo and the test suites use, and the Debian packages with them.

This is the one list: ``e2e-cluster preflight --install`` (run by ``make demo`` and ``make test``)
installs the packages of the missing tools from it, and the preflight checks it before any long
build. Pure: whether a tool is present is asked through a callable, so the logic is unit-testable.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dra_e2e.configs import CNI_BIN_DIRS


class Purpose(enum.IntEnum):
    """What the host is prepared for; each level needs everything the lower ones need."""

    #: ``e2e-cluster up``: containerd, runc, CNI and host networking.
    CLUSTER = 1
    #: The demo and the e2e suites: the cluster plus the registry-free image builds.
    E2E = 2
    #: ``make test``: the e2e suites plus the tools of the unit and integration suites.
    TEST = 3


@dataclass(frozen=True)
class Tool:
    """Something a component runs or reads: a command on PATH, or a file at one of ``paths``."""

    name: str
    #: Absolute paths, any of which satisfies the tool; empty: the command ``name`` on PATH.
    paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class Prerequisite:
    """A tool, the Debian package that provides it, and from which purpose on it is needed."""

    tool: Tool
    package: str
    purpose: Purpose
    why: str


def _cni(plugin: str) -> Tool:
    return Tool(f"CNI plugin {plugin}", tuple(f"{d}/{plugin}" for d in CNI_BIN_DIRS))


PREREQUISITES: tuple[Prerequisite, ...] = (
    Prerequisite(Tool("runc"), "runc", Purpose.CLUSTER, "containerd's OCI runtime"),
    Prerequisite(_cni("bridge"), "containernetworking-plugins", Purpose.CLUSTER, "the pod network"),
    Prerequisite(
        _cni("host-local"), "containernetworking-plugins", Purpose.CLUSTER, "pod addresses"
    ),
    Prerequisite(
        _cni("portmap"), "containernetworking-plugins", Purpose.CLUSTER, "hostPort mappings"
    ),
    Prerequisite(Tool("iptables"), "iptables", Purpose.CLUSTER, "the API server's service DNAT"),
    Prerequisite(Tool("ip"), "iproute2", Purpose.CLUSTER, "the node bridges"),
    Prerequisite(Tool("umount"), "mount", Purpose.CLUSTER, "teardown of the kubelet's mounts"),
    Prerequisite(Tool("mount"), "mount", Purpose.CLUSTER, "each node's kubelet and CDI binds"),
    Prerequisite(
        Tool("unshare"), "util-linux", Purpose.CLUSTER, "creates each node's mount namespace"
    ),
    Prerequisite(
        Tool("nsenter"), "util-linux", Purpose.CLUSTER, "runs a node's daemons in its namespace"
    ),
    Prerequisite(
        Tool("busybox", ("/bin/busybox",)),
        "busybox-static",
        Purpose.CLUSTER,
        "the pause and test images",
    ),
    Prerequisite(
        Tool("apt-get"), "apt", Purpose.E2E, "downloads the image builds' Debian packages"
    ),
    Prerequisite(Tool("dpkg-deb"), "dpkg", Purpose.E2E, "unpacks the image builds' packages"),
    Prerequisite(Tool("cc"), "gcc", Purpose.TEST, "compiles the mock NVML library"),
    Prerequisite(Tool("podman"), "podman", Purpose.TEST, "runs images and CDI edits under runc"),
    Prerequisite(Tool("shellcheck"), "shellcheck", Purpose.TEST, "lints kind/up.sh"),
    Prerequisite(
        Tool("qemu-aarch64-static"),
        "qemu-user-static",
        Purpose.TEST,
        "runs the arm64 driver image's programs",
    ),
)


def needed(purpose: Purpose) -> list[Prerequisite]:
    """The prerequisites of ``purpose`` (those of the lower purposes included)."""
    return [p for p in PREREQUISITES if p.purpose <= purpose]


def missing(purpose: Purpose, present: Callable[[Tool], bool]) -> list[Prerequisite]:
    """The prerequisites of ``purpose`` whose tool ``present`` does not find."""
    return [p for p in needed(purpose) if not present(p.tool)]


def packages(prerequisites: Iterable[Prerequisite]) -> list[str]:
    """The Debian packages of ``prerequisites``, each once, in list order."""
    return list(dict.fromkeys(p.package for p in prerequisites))


def missing_message(absent: list[Prerequisite], *, apt: bool = True) -> tuple[str, str]:
    """``(problem, fix)``, one line together, for the absent tools; for runc:
    ``("required tool 'runc' not found", "apt-get install runc")``.

    Without apt (not a Debian system) the fix names the Debian packages to find an equivalent of.
    """
    if not absent:
        raise ValueError("missing_message needs at least one absent prerequisite")
    names = list(dict.fromkeys(p.tool.name for p in absent))
    quoted = ", ".join(repr(n) for n in names)
    noun = "tool" if len(names) == 1 else "tools"
    pkgs = " ".join(packages(absent))
    fix = f"apt-get install {pkgs}" if apt else f"install what Debian calls {pkgs}"
    return f"required {noun} {quoted} not found", fix
