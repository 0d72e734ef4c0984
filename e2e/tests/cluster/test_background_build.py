"""The session's binary build runs beside the tests that need no cluster.

An inner pytest session (a subprocess, so the plugin's patched build stays there) has a
plain test and an ``e2e`` test after it, and a build that takes a few seconds: the plain
test runs while the build is still going, the ``e2e`` test only once it is done.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CONFTEST = """
import time
from pathlib import Path

import dra_e2e.pytest_plugin as plugin

DONE = Path(__file__).parent / "built"


def _build(*, progress, kube_version):
    progress("[dra-e2e build] fake: started")
    time.sleep(3)
    DONE.write_text("yes")
    progress("[dra-e2e build] fake: done in 0m03s")


plugin.all_built = lambda kube_version: False
plugin.ensure_binaries = _build
plugin.preflight.check = lambda purpose: None
"""

TESTS = """
from pathlib import Path

import pytest

DONE = Path(__file__).parent / "built"


def test_runs_while_the_build_goes_on():
    assert not DONE.exists()


@pytest.mark.e2e
def test_e2e_waits_for_the_build():
    assert DONE.read_text() == "yes"
"""


def test_plain_tests_run_during_the_build_and_e2e_tests_after_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nmarkers =\n    e2e: needs the cluster\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*building the cluster binaries in the background*",
            "*test_runs_while_the_build_goes_on PASSED*",
            "*waiting for the cluster binaries to finish building*",
            "*fake: done in 0m03s*",
            "*test_e2e_waits_for_the_build PASSED*",
        ]
    )
