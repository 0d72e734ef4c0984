"""A component that fails during ``up``: its log is shown and kept, the host is cleaned."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from dra_e2e import hostnet
from dra_e2e.build import Binaries, all_built, binaries
from dra_e2e.cluster import Cluster
from dra_e2e.errors import ComponentError

pytestmark = pytest.mark.e2e


def test_failed_up_reports_and_keeps_logs_then_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0 or not all_built():
        pytest.skip("needs root and the built binaries")
    real = binaries()
    broken = tmp_path / "broken-etcd"
    broken.mkdir()
    etcd = broken / "etcd"
    etcd.write_text("#!/bin/sh\necho 'etcd: disk on fire' >&2\nexit 3\n")
    etcd.chmod(0o755)
    monkeypatch.setenv("DRA_E2E_LOGS_DIR", str(tmp_path / "kept"))
    cluster = Cluster(
        tmp_path / "state",
        bins=Binaries(kube_dir=real.kube_dir, etcd_dir=broken, containerd_dir=real.containerd_dir),
    )
    messages: list[str] = []
    with pytest.raises(ComponentError, match="etcd: exited while waiting for etcd /health") as info:
        cluster.up(progress=messages.append, build=False)
    assert "disk on fire" in info.value.log_tail
    report = "\n".join(messages)
    assert "----- etcd (NOT running)" in report
    match = re.search(r"component logs kept in (\S+)", report)
    assert match is not None
    assert "disk on fire" in (Path(match.group(1)) / "etcd.log").read_text()
    assert not cluster.state_dir.exists()
    slot_match = re.search(r"network slot (\d+)", report)
    assert slot_match is not None
    bridge = hostnet.cluster_net(int(slot_match.group(1))).node(0).bridge
    assert subprocess.run(["ip", "link", "show", bridge], capture_output=True).returncode != 0
    owners = "".join(p.read_text() for p in hostnet.SLOT_DIR.glob("slot-*"))
    assert str(cluster.state_dir) not in owners
