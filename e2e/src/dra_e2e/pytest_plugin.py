"""pytest integration: one real cluster per test session for tests marked ``e2e``.

Loaded automatically (``pytest11`` entry point). Fixtures:

* ``e2e_cluster`` (session): a :class:`~dra_e2e.handle.ClusterHandle`. Uses an
  existing cluster only when asked (``pytest --kubeconfig PATH`` or
  ``$DRA_E2E_KUBECONFIG``; never the ambient ``$KUBECONFIG``); otherwise brings up a
  local cluster in a fresh state directory and tears it down at the end of the session.
* ``e2e_cluster_nodes`` (module): a cluster with the N nodes the module asks for with
  ``pytestmark = pytest.mark.e2e_nodes(N)``: the session's when it has them, else a local one
  of its own for the module (the session's stays at ``$DRA_E2E_NODES`` nodes, default 1).
* ``e2e_namespace`` (function): a fresh namespace, deleted after the test.
* ``chaos_record`` (function): ``record(**numbers)`` prints the test's figures and appends
  them to ``$DRA_E2E_CHAOS_RESULTS`` for ``make bench BENCH=chaos``
  (:mod:`dra_e2e.chaos_results`).
* ``helm`` (session): the pinned Helm binary (``dra_e2e.chart.helm_path``, built from the Go
  module proxy on first use), for the chart tests that render or install the chart.

``DRA_E2E_KUBE_VERSION`` (e.g. ``1.36``) picks another pinned Kubernetes version.
For the local cluster the host is checked first (``dra_e2e.preflight``: seconds, one
line with the fix), then missing binaries are built in the background from right after
collection, beside the tests that need no cluster; the first e2e test waits for them before
it starts (so no per-test timeout applies). Set
``DRA_E2E_KEEP=1`` to leave the local cluster running after the session.
"""

from __future__ import annotations

import os
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dra_e2e import preflight
from dra_e2e.build import all_built, ensure_binaries
from dra_e2e.chaos_results import ChaosRecord, record_numbers
from dra_e2e.chart import HelmFailed, helm_path
from dra_e2e.cluster import Cluster
from dra_e2e.errors import E2EError
from dra_e2e.handle import ClusterHandle
from dra_e2e.kubectl import KUBECONFIG_ENV, asked_kubeconfig, default_kubectl
from dra_e2e.prerequisites import Purpose
from dra_e2e.versions import KUBERNETES_VERSION, resolve_kube_version

_BUILD_ERROR = pytest.StashKey[E2EError]()
_BUILD_THREAD = pytest.StashKey[tuple[threading.Thread, Path]]()
#: How many nodes the session's local cluster starts with.
NODES_ENV = "DRA_E2E_NODES"


def pytest_configure(config: pytest.Config) -> None:
    """Registers ``e2e_nodes(N)``: the module needs a cluster of N nodes (``e2e_cluster_nodes``)."""
    config.addinivalue_line(
        "markers", "e2e_nodes(n): needs a cluster of n nodes (fixture e2e_cluster_nodes)"
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--kubeconfig``: test an existing cluster instead of starting a local one."""
    parser.addoption(
        "--kubeconfig",
        default=None,
        help=f"e2e tests: use the existing cluster of this kubeconfig (default ${KUBECONFIG_ENV};"
        " without either a local cluster is started; $KUBECONFIG is never used)",
    )


def external_kubeconfig(config: pytest.Config) -> Path | None:
    """The kubeconfig of the existing cluster asked for, or None for a local cluster."""
    return asked_kubeconfig(config.getoption("kubeconfig"))


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


def _wants_local_cluster(session: pytest.Session) -> bool:
    return external_kubeconfig(session.config) is None and any(
        item.get_closest_marker("e2e") for item in session.items
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Check the host, then start building missing binaries beside the first tests.

    The build (``nice``, minutes when cold) runs in a background thread while the tests
    that need no cluster run; the first ``e2e`` test waits for it before its own setup,
    outside its timeout (:func:`pytest_runtest_protocol`).
    """
    config = session.config
    if config.option.collectonly or not _wants_local_cluster(session):
        return
    try:
        preflight.check(Purpose.E2E)
    except E2EError as exc:
        # Other suites still run; every e2e test errors with this one line.
        config.stash[_BUILD_ERROR] = exc
        _say(config, f"[dra-e2e] {exc}")
        return
    if all_built(kube_version=_kube_version()):
        return
    log_path = Path(tempfile.gettempdir()) / f"dra-e2e-build-{os.getpid()}.log"
    _say(
        config, f"[dra-e2e] building the cluster binaries in the background (progress: {log_path})"
    )

    def build() -> None:
        with log_path.open("a", encoding="utf-8") as log:

            def progress(message: str) -> None:
                log.write(message + "\n")
                log.flush()

            try:
                ensure_binaries(progress=progress, kube_version=_kube_version())
            except E2EError as exc:
                config.stash[_BUILD_ERROR] = exc

    thread = threading.Thread(target=build, name="dra-e2e-build", daemon=True)
    config.stash[_BUILD_THREAD] = (thread, log_path)
    thread.start()


def _join_build(config: pytest.Config) -> None:
    """Wait for the background build, if one runs, and report how it ended."""
    started = config.stash.get(_BUILD_THREAD, None)
    if started is None:
        return
    thread, log_path = started
    del config.stash[_BUILD_THREAD]
    if thread.is_alive():
        _say(config, "[dra-e2e] waiting for the cluster binaries to finish building")
        thread.join()
    error = config.stash.get(_BUILD_ERROR, None)
    if error is not None:
        _say(config, f"[dra-e2e] building the cluster binaries failed: {error} (log: {log_path})")
        return
    lines = log_path.read_text(encoding="utf-8").splitlines() if log_path.exists() else []
    for line in lines:
        if ": done in " in line:
            _say(config, line)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Before the first ``e2e`` test (and outside its timeout): the binaries are built."""
    if item.get_closest_marker("e2e") is not None:
        _join_build(item.config)
    yield


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Never leave a half-finished build behind when no e2e test ran (``-x``, ``-k``)."""
    _join_build(session.config)


def session_nodes() -> int:
    """How many nodes the session's local cluster starts with (``$DRA_E2E_NODES``, default 1)."""
    text = os.environ.get(NODES_ENV, "1")
    try:
        count = int(text)
    except ValueError:
        raise E2EError(f"{NODES_ENV}={text!r} is not a number of nodes") from None
    if count < 1:
        raise E2EError(f"{NODES_ENV}={count}: a cluster needs at least one node")
    return count


def wanted_nodes(node: pytest.Item | pytest.Collector) -> int:
    """The nodes a module or test asks for with ``pytest.mark.e2e_nodes(N)`` (default 1)."""
    marker = node.get_closest_marker("e2e_nodes")
    if marker is None:
        return 1
    (count,) = marker.args
    if not isinstance(count, int) or count < 1:
        raise E2EError(f"{node.nodeid}: e2e_nodes takes a positive number of nodes, not {count!r}")
    return count


@contextmanager
def _local_cluster(request: pytest.FixtureRequest, *, nodes: int) -> Iterator[ClusterHandle]:
    """A local cluster of ``nodes`` nodes in a fresh state directory, down afterwards."""
    config = request.config
    build_error = config.stash.get(_BUILD_ERROR, None)
    if build_error is not None:
        raise build_error
    state_dir = Path(tempfile.mkdtemp(prefix="dra-e2e-"))
    cluster = Cluster(state_dir, kube_version=_kube_version())
    cluster.up(progress=lambda msg: _say(config, msg), nodes=nodes)
    handle = ClusterHandle(
        kubeconfig=cluster.kubeconfig, kubectl_path=cluster.bins.kubectl, local=cluster
    )
    failed_before = request.session.testsfailed
    try:
        yield handle
    finally:
        if request.session.testsfailed > failed_before:
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


@pytest.fixture(scope="session")
def e2e_cluster(request: pytest.FixtureRequest) -> Iterator[ClusterHandle]:
    """The cluster under test (see the module docstring)."""
    config = request.config
    external = external_kubeconfig(config)
    if external is not None:
        _say(config, f"[dra-e2e] using the existing cluster of --kubeconfig {external}")
        yield ClusterHandle(kubeconfig=external, kubectl_path=default_kubectl())
        return
    with _local_cluster(request, nodes=session_nodes()) as handle:
        yield handle


@pytest.fixture(scope="module")
def e2e_cluster_own(request: pytest.FixtureRequest) -> Iterator[ClusterHandle]:
    """A local single-node cluster for this module alone, down when the module ends: for
    tests that restart or kill control-plane components (chaos), so the session's cluster
    stays as the other suites expect it. With ``--kubeconfig`` it is that cluster. A module
    using it overrides ``e2e_cluster`` with it, so its namespaces live there too."""
    external = external_kubeconfig(request.config)
    if external is not None:
        yield ClusterHandle(kubeconfig=external, kubectl_path=default_kubectl())
        return
    with _local_cluster(request, nodes=1) as own:
        yield own


@pytest.fixture(scope="module")
def e2e_cluster_nodes(request: pytest.FixtureRequest) -> Iterator[ClusterHandle]:
    """A cluster with the nodes the module asks for (``pytest.mark.e2e_nodes(N)``).

    The session's cluster when it has them (an existing one, or ``$DRA_E2E_NODES`` nodes);
    otherwise a local cluster of N nodes of its own, up for this module only, so that the
    other suites keep their single node. An existing cluster with fewer nodes skips the module.
    """
    wanted = wanted_nodes(request.node)
    if external_kubeconfig(request.config) is not None or session_nodes() >= wanted:
        handle: ClusterHandle = request.getfixturevalue("e2e_cluster")
        have = handle.node_names()
        if len(have) < wanted:
            pytest.skip(f"needs {wanted} nodes; the cluster under test has {have}")
        yield handle
        return
    with _local_cluster(request, nodes=wanted) as handle:
        yield handle


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


@pytest.fixture
def chaos_record(request: pytest.FixtureRequest) -> ChaosRecord:
    """``record(**numbers)``: the test's figures, printed and appended to
    ``$DRA_E2E_CHAOS_RESULTS`` when set (:func:`dra_e2e.chaos_results.record_numbers`)."""

    def record(**numbers: float) -> None:
        record_numbers(request.node.name, numbers)

    return record


@pytest.fixture(scope="session")
def helm() -> Path:
    """The pinned Helm binary (built from the Go module proxy on first use); a build that
    fails fails the test that asked, with the reason."""
    try:
        return helm_path()
    except HelmFailed as exc:
        pytest.fail(str(exc))
