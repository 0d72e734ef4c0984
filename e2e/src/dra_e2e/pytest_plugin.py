"""pytest integration: one real cluster per test session for tests marked ``e2e``.

Loaded automatically (``pytest11`` entry point). Fixtures:

* ``e2e_cluster`` (session): a :class:`~dra_e2e.handle.ClusterHandle`. Uses the
  cluster named by ``$KUBECONFIG`` when set; otherwise brings up a local cluster
  in a fresh state directory and tears it down at the end of the session.
* ``e2e_namespace`` (function): a fresh namespace, deleted after the test.

``DRA_E2E_KUBE_VERSION`` (e.g. ``1.36``) picks another pinned Kubernetes version.
Missing binaries are built right after collection, before any test starts (so
no per-test timeout applies), with progress on the terminal. Set
``DRA_E2E_KEEP=1`` to leave the local cluster running after the session.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dra_e2e.build import all_built, ensure_binaries
from dra_e2e.cluster import Cluster
from dra_e2e.errors import E2EError
from dra_e2e.handle import ClusterHandle, default_kubectl
from dra_e2e.versions import KUBERNETES_VERSION, resolve_kube_version

_BUILD_ERROR = pytest.StashKey[E2EError]()


def _say(config: pytest.Config, message: str) -> None:
    """Write a line to the terminal even while output capturing is active."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capman = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        print(message, flush=True)
        return
    if capman is not None:
        with capman.global_and_fixture_disabled():
            reporter.write_line(message)
    else:
        reporter.write_line(message)


def _kube_version() -> str:
    """The Kubernetes version of the session's local cluster (``DRA_E2E_KUBE_VERSION``)."""
    return resolve_kube_version(os.environ.get("DRA_E2E_KUBE_VERSION") or KUBERNETES_VERSION)


def _wants_local_cluster(items: list[pytest.Item]) -> bool:
    return not os.environ.get("KUBECONFIG") and any(
        item.get_closest_marker("e2e") for item in items
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build missing binaries once, outside any test's timeout."""
    if session.config.option.collectonly or not _wants_local_cluster(session.items):
        return
    if not all_built(kube_version=_kube_version()):
        try:
            ensure_binaries(
                progress=lambda msg: _say(session.config, msg), kube_version=_kube_version()
            )
        except E2EError as exc:
            # Other suites still run; every e2e test errors with this message.
            session.config.stash[_BUILD_ERROR] = exc
            _say(session.config, f"[dra-e2e] building the cluster binaries failed: {exc}")


@pytest.fixture(scope="session")
def e2e_cluster(request: pytest.FixtureRequest) -> Iterator[ClusterHandle]:
    """The cluster under test (see the module docstring)."""
    config = request.config
    external = os.environ.get("KUBECONFIG")
    if external:
        _say(config, f"[dra-e2e] using the existing cluster in KUBECONFIG={external}")
        yield ClusterHandle(kubeconfig=Path(external), kubectl_path=default_kubectl())
        return
    build_error = config.stash.get(_BUILD_ERROR, None)
    if build_error is not None:
        raise build_error
    state_dir = Path(tempfile.mkdtemp(prefix="dra-e2e-"))
    cluster = Cluster(state_dir, kube_version=_kube_version())
    cluster.up(progress=lambda msg: _say(config, msg))
    handle = ClusterHandle(
        kubeconfig=cluster.kubeconfig, kubectl_path=cluster.bins.kubectl, local=cluster
    )
    try:
        yield handle
    finally:
        failed = request.session.testsfailed > 0
        if failed:
            _say(config, cluster.failure_report())
            kept = cluster.save_logs()
            if kept is not None:
                _say(config, f"[dra-e2e] component logs kept in {kept}")
        if os.environ.get("DRA_E2E_KEEP"):
            _say(config, f"[dra-e2e] DRA_E2E_KEEP set: cluster left up in {state_dir}")
        else:
            leftovers = cluster.down(progress=lambda msg: _say(config, msg))
            if leftovers:
                _say(config, f"[dra-e2e] WARNING: teardown left {leftovers}")


@pytest.fixture
def e2e_namespace(e2e_cluster: ClusterHandle) -> Iterator[str]:
    """A fresh namespace for one test, deleted (without waiting) afterwards."""
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    e2e_cluster.kubectl("create", "namespace", name)
    e2e_cluster.wait_until(
        f"service account default in {name}",
        lambda: e2e_cluster.kubectl("get", "serviceaccount", "default", "-n", name),
    )
    try:
        yield name
    finally:
        e2e_cluster.kubectl("delete", "namespace", name, "--wait=false")
