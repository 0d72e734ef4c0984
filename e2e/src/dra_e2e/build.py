"""Build the pinned upstream Go components once into a cache keyed by version.

Kubernetes is linked into a single multi-call binary (``gobuild/kube``); etcd and
containerd are built from their own modules. Each component lands in
``<cache>/<name>-<version>-<hash>/`` where the hash covers the Go module files and
the build flags, so later runs (and other checkouts) reuse it: the cache convention of
``dra_nvlib.build_cache`` (lock, ``.partial``, ``.complete``), which the go-nvml mock
library build shares. Builds run under ``nice`` and report progress, because a cold
Kubernetes build takes many minutes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dra_nvlib.build_cache import build_once, content_key, is_complete
from dra_nvlib.build_cache import cache_root as _cache_root

from dra_e2e.errors import BuildError, ToolMissingError, UnknownVersionError
from dra_e2e.versions import (
    CONTAINERD_VERSION,
    ETCD_VERSION,
    KUBERNETES_VERSION,
    KUBERNETES_VERSIONS,
)

Progress = Callable[[str], None]

GOBUILD_DIR = Path(__file__).resolve().parent / "gobuild"
KUBE_COMPONENTS = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
    "kubectl",
)
_PROGRESS_EVERY_S = 20.0


def _kube_ldflags(version: str) -> tuple[str, ...]:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
        ]
    return tuple(flags)


@dataclass(frozen=True)
class GoComponent:
    """One Go module under ``gobuild/`` and the main packages built from it."""

    name: str
    version: str
    packages: tuple[str, ...]
    outputs: tuple[str, ...]
    tags: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ("-s", "-w")
    aliases: tuple[str, ...] = field(default=())
    source_dir: Path | None = None
    # An alternate go.mod (``go build -modfile``; its go.sum sits beside it with the
    # suffix .sum): one module directory serves several pinned versions.
    modfile: Path | None = None
    # cgo on (a C toolchain needed): for modules that dlopen C libraries, e.g. go-nvml.
    cgo: bool = False

    @property
    def module_dir(self) -> Path:
        """The directory holding this component's go.mod (``gobuild/<name>`` by default)."""
        return self.source_dir if self.source_dir is not None else GOBUILD_DIR / self.name

    def input_files(self) -> list[Path]:
        """The files whose content determines the build: sources and module files."""
        files = sorted(p for p in self.module_dir.iterdir() if p.is_file())
        if self.modfile is not None:
            files = [p for p in files if p.name not in ("go.mod", "go.sum")]
            files += [self.modfile, self.modfile.with_suffix(".sum")]
        return files

    def go_flags(self) -> list[str]:
        """Flags every go command on this module needs (the alternate go.mod, if any)."""
        return [f"-modfile={self.modfile}"] if self.modfile is not None else []

    def cache_key(self) -> str:
        """Directory name in the cache: name, version and a hash of inputs and flags."""
        parts = [*self.packages, *self.tags, *self.ldflags, *self.outputs, *self.aliases]
        if self.cgo:
            # Only when set, so the keys of the existing (cgo-free) builds stay the same.
            parts.append("cgo")
        return content_key(self.name, self.version, self.input_files(), parts)


def kube_component(version: str = KUBERNETES_VERSION) -> GoComponent:
    """The Kubernetes multi-call binary pinned at one of ``KUBERNETES_VERSIONS``.

    The default version builds from ``gobuild/kube/go.mod``; each other one from
    ``gobuild/kube/versions/<version>.mod``, with the same ``main.go``.
    """
    if version not in KUBERNETES_VERSIONS:
        known = ", ".join(KUBERNETES_VERSIONS)
        raise UnknownVersionError(f"Kubernetes {version} is not pinned here (known: {known})")
    modfile = None
    if version != KUBERNETES_VERSION:
        modfile = GOBUILD_DIR / "kube" / "versions" / f"{version}.mod"
    return GoComponent(
        name="kube",
        version=version,
        packages=(".",),
        outputs=("kube",),
        ldflags=_kube_ldflags(version),
        aliases=KUBE_COMPONENTS,
        modfile=modfile,
    )


KUBE = kube_component()
ETCD = GoComponent(
    name="etcd",
    version=ETCD_VERSION,
    packages=("go.etcd.io/etcd/server/v3",),
    outputs=("etcd",),
)
CONTAINERD = GoComponent(
    name="containerd",
    version=CONTAINERD_VERSION,
    packages=(
        "github.com/containerd/containerd/v2/cmd/containerd",
        "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
        "github.com/containerd/containerd/v2/cmd/ctr",
    ),
    outputs=("containerd", "containerd-shim-runc-v2", "ctr"),
    # btrfs needs cgo; CGO is off so the binaries are static.
    tags=("urfave_cli_no_docs", "no_btrfs", "osusergo", "netgo"),
    ldflags=(
        "-s",
        "-w",
        f"-X github.com/containerd/containerd/v2/version.Version={CONTAINERD_VERSION}",
    ),
)


@dataclass(frozen=True)
class Binaries:
    """Absolute paths of every executable a cluster needs."""

    kube_dir: Path
    etcd_dir: Path
    containerd_dir: Path

    def kube(self, component: str) -> Path:
        """Path of a Kubernetes component (a symlink to the multi-call binary)."""
        if component not in KUBE_COMPONENTS:
            raise KeyError(component)
        return self.kube_dir / component

    @property
    def kubectl(self) -> Path:
        """The kubectl executable."""
        return self.kube_dir / "kubectl"

    @property
    def etcd(self) -> Path:
        """The etcd server executable."""
        return self.etcd_dir / "etcd"

    @property
    def containerd(self) -> Path:
        """The containerd daemon executable."""
        return self.containerd_dir / "containerd"

    @property
    def ctr(self) -> Path:
        """containerd's ctr client (used to import images)."""
        return self.containerd_dir / "ctr"


def cache_root() -> Path:
    """Root of the binary cache: ``$DRA_E2E_CACHE``, else ``$XDG_CACHE_HOME/dra-e2e``, else
    ``~/.cache/dra-e2e``."""
    return _cache_root("DRA_E2E_CACHE", "dra-e2e")


def component_dir(component: GoComponent, *, root: Path | None = None) -> Path:
    """Where a component's binaries live in the cache once built."""
    return (root or cache_root()) / component.cache_key()


def is_built(component: GoComponent, *, root: Path | None = None) -> bool:
    """Whether the cache holds a complete build of the component."""
    return is_complete(component_dir(component, root=root))


def components(kube_version: str = KUBERNETES_VERSION) -> tuple[GoComponent, ...]:
    """Every component a cluster of the given Kubernetes version needs."""
    return (kube_component(kube_version), ETCD, CONTAINERD)


COMPONENTS = components()


def binaries(*, root: Path | None = None, kube_version: str = KUBERNETES_VERSION) -> Binaries:
    """Paths of the cached binaries (which may not exist yet; see ``ensure_binaries``)."""
    return Binaries(
        kube_dir=component_dir(kube_component(kube_version), root=root),
        etcd_dir=component_dir(ETCD, root=root),
        containerd_dir=component_dir(CONTAINERD, root=root),
    )


def all_built(*, root: Path | None = None, kube_version: str = KUBERNETES_VERSION) -> bool:
    """Whether every component is in the cache."""
    return all(is_built(c, root=root) for c in components(kube_version))


def find_go() -> Path:
    """The Go toolchain: ``$DRA_E2E_GO``, ``go`` on PATH, or /usr/local/go/bin/go."""
    candidates = [os.environ.get("DRA_E2E_GO"), shutil.which("go"), "/usr/local/go/bin/go"]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise ToolMissingError("go", "install Go >= 1.26.8 (containerd v2.3 requires it)")


def _go_env(go: Path, *, cgo: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    # "auto": an older local Go fetches the toolchain go.mod asks for from the
    # module proxy instead of failing.
    env.setdefault("GOTOOLCHAIN", "auto")
    env.update(
        {
            "CGO_ENABLED": "1" if cgo else "0",
            "GOFLAGS": "-mod=readonly -buildvcs=false",
            "PATH": f"{go.parent}:{env.get('PATH', '')}",
        }
    )
    return env


def _count_deps(go: Path, component: GoComponent, env: dict[str, str]) -> int:
    cmd = [str(go), "list", *component.go_flags(), "-deps"]
    if component.tags:
        cmd += ["-tags", ",".join(component.tags)]
    proc = subprocess.run(
        [*cmd, *component.packages],
        cwd=component.module_dir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        # Usually a module download failure; the build itself reports it properly.
        return 0
    return len(proc.stdout.split())


def _fmt_elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


def build_component(
    component: GoComponent, *, progress: Progress, root: Path | None = None
) -> Path:
    """Build one component into the cache unless present; return its directory."""
    final = component_dir(component, root=root)
    return build_once(
        final,
        lambda staging: _go_build(component, staging, final=final, progress=progress),
        marker=f"{component.version}\n",
    )


def _go_build(component: GoComponent, staging: Path, *, final: Path, progress: Progress) -> None:
    go = find_go()
    env = _go_env(go, cgo=component.cgo)
    log_path = staging / "build.log"
    label = f"{component.name} {component.version}"
    progress(f"[dra-e2e build] {label}: resolving modules (first run downloads them)")
    resolve_started = time.monotonic()
    total = _count_deps(go, component, env)
    resolve_s = time.monotonic() - resolve_started
    cmd = ["nice", "-n", "10", str(go), "build", *component.go_flags(), "-v", "-trimpath"]
    if component.tags:
        cmd += ["-tags", ",".join(component.tags)]
    cmd += ["-ldflags", " ".join(component.ldflags), "-o", f"{staging}/"]
    if len(component.packages) == 1:
        # A single main package would otherwise be named after its import path.
        cmd[-1] = str(staging / component.outputs[0])
    cmd += list(component.packages)
    progress(
        f"[dra-e2e build] {label}: modules resolved in {_fmt_elapsed(resolve_s)}; "
        f"go build of {total} packages -> {final}"
    )
    started = time.monotonic()
    compiled = 0
    last_report = started
    with (
        log_path.open("w") as log,
        subprocess.Popen(
            cmd,
            cwd=component.module_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        ) as proc,
    ):
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            if line.strip() and " " not in line.strip():
                compiled += 1
            now = time.monotonic()
            if now - last_report >= _PROGRESS_EVERY_S:
                last_report = now
                progress(
                    f"[dra-e2e build] {label}: compiled {compiled} of {total or '?'} packages "
                    f"(Go build cache hits are not listed), {_fmt_elapsed(now - started)}"
                )
        returncode = proc.wait()
    if returncode != 0:
        tail = "".join(log_path.read_text().splitlines(keepends=True)[-30:])
        kept = final.with_name(final.name + ".failed.log")
        shutil.copyfile(log_path, kept)
        raise BuildError(component.name, f"go build exited {returncode}:\n{tail}", log=kept)
    for alias in component.aliases:
        (staging / alias).symlink_to(component.outputs[0])
    for output in component.outputs:
        if not (staging / output).is_file():
            raise BuildError(component.name, f"expected output {output} missing", log=log_path)
    progress(f"[dra-e2e build] {label}: done in {_fmt_elapsed(time.monotonic() - started)}")


def ensure_binaries(
    *, progress: Progress, root: Path | None = None, kube_version: str = KUBERNETES_VERSION
) -> Binaries:
    """Build whatever is missing from the cache and return the binary paths."""
    for component in components(kube_version):
        if is_built(component, root=root):
            continue
        build_component(component, progress=progress, root=root)
    return binaries(root=root, kube_version=kube_version)
