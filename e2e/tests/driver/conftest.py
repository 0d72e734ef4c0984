"""Fixtures shared by the driver modules: one chart install per module, diagnostics on failure."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from dra_e2e.handle import ClusterHandle
from driver_support import Driver, dump_diagnostics, install, uninstall


@pytest.fixture(scope="module")
def driver(
    e2e_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart installed on fake GPUs (or the release named by DRA_E2E_RELEASE)."""
    installed = install(e2e_cluster, tmp_path_factory.mktemp("driver-images"))
    yield installed
    uninstall(installed)


@pytest.fixture
def driver_diagnostics(request: pytest.FixtureRequest, driver: Driver) -> Iterator[None]:
    """Prints the plugin's logs and recent events when the test failed (``usefixtures``)."""
    failed_before = request.session.testsfailed
    yield
    # The call phase's report is counted before teardown runs.
    if request.session.testsfailed > failed_before:
        print(dump_diagnostics(driver))
