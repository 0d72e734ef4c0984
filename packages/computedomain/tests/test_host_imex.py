"""Host-managed IMEX: NVIDIA's mode/isolation/gate checks and the host daemon's readiness."""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_computedomain.fake_host_imex import start_host_imex
from dra_computedomain.fake_imex import main as fake_imex_main
from dra_computedomain.host_imex import FakeHostImex, HostImex, check_imex_mode
from dra_kubelet_core.errors import ConfigurationError

GATE = {"HostManagedIMEXDaemon": True}


def test_modes_isolations_and_the_gate_as_nvidia_checks_them() -> None:
    assert check_imex_mode("driverManaged", "domain", {}) is False
    assert check_imex_mode("hostManaged", "domain", GATE) is True
    # NVIDIA: an empty isolation is the default, domain.
    assert check_imex_mode("driverManaged", "", {}) is False
    assert check_imex_mode("hostManaged", "", GATE) is True
    cases = [
        ("hostManaged", "domain", {}, "--imex-mode", "HostManagedIMEXDaemon=true"),
        ("host", "domain", GATE, "--imex-mode", "driverManaged or hostManaged"),
        ("driverManaged", "channel", GATE, "--imex-isolation", "not supported"),
        ("driverManaged", "node", GATE, "--imex-isolation", "unknown"),
    ]
    for mode, isolation, gates, setting, text in cases:
        with pytest.raises(ConfigurationError) as err:
            check_imex_mode(mode, isolation, gates)
        assert err.value.setting == setting
        assert text in str(err.value)


def test_the_real_query_is_nvidias_ctl_chrooted_into_the_driver_root() -> None:
    socket = "/etc/nvidia-imex/imex_ctrl.sock"
    assert HostImex(socket, driver_root=Path("/driver-root")).query() == (
        "chroot",
        "/driver-root",
        "nvidia-imex-ctl",
        "-q",
        "--u=/etc/nvidia-imex/imex_ctrl.sock",
    )
    assert HostImex(socket).query()[0] == "nvidia-imex-ctl"


def test_ready_only_when_the_hosts_daemon_answers_ready(capsys: pytest.CaptureFixture[str]) -> None:
    with start_host_imex() as host:
        imex = FakeHostImex(str(host.socket))
        assert imex.ready()
        assert fake_imex_main(["ctl", "-q", f"--u={host.socket}"]) == 0
        assert capsys.readouterr().out.strip() == "READY"
        host.stop()
        assert not imex.ready()  # gone: not reachable
    with start_host_imex(never_ready=True) as host:
        assert not FakeHostImex(str(host.socket)).ready()
    # Below a driver root: the socket path is taken relative to it.
    with start_host_imex() as host:
        root = host.socket.parent.parent
        relative = "/" + str(host.socket.relative_to(root))
        assert FakeHostImex(relative, driver_root=root).ready()


def test_the_controller_refuses_a_bad_mode_or_gate_with_a_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dra_computedomain.controller_cli import main as controller_main

    assert controller_main(["--image-name=driver:1", "--imex-mode=hostManaged"]) == 2
    assert "--imex-mode" in capsys.readouterr().err
    assert controller_main(["--image-name=driver:1", "--feature-gates=NoSuchGate=true"]) == 2
    assert "NoSuchGate" in capsys.readouterr().err
