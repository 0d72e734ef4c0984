"""A pod's CPU seconds and peak RSS from /proc (a fake /proc tree)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_e2e.pod_usage import ProcStatError, in_pod, parse_stat, pod_pids, pod_usage

UID = "0b6a3c1e-1111-2222-3333-444455556666"


def _stat(comm: str, utime: int, stime: int) -> str:
    rest = ["S", "1", "1", "1", "0", "-1", "4194560", "10", "0", "0", "0", str(utime), str(stime)]
    return f"42 ({comm}) " + " ".join(rest + ["0"] * 40) + "\n"


def _status(rss_kib: int, hwm_kib: int) -> str:
    return f"Name:\tx\nVmHWM:\t{hwm_kib} kB\nVmRSS:\t{rss_kib} kB\nThreads:\t3\n"


def _process(proc: Path, pid: int, cgroup: str, comm: str, ticks: int, kib: int) -> None:
    d = proc / str(pid)
    d.mkdir(parents=True)
    (d / "cgroup").write_text(cgroup)
    (d / "stat").write_text(_stat(comm, ticks, ticks))
    (d / "status").write_text(_status(kib // 2, kib))


def test_parse_stat_counts_fields_after_the_last_paren() -> None:
    assert parse_stat(_stat("python3 (x) y", 150, 50), ticks=100) == ("python3 (x) y", 2.0)
    with pytest.raises(ProcStatError, match="comm"):
        parse_stat("42 python 1 2 3")
    with pytest.raises(ProcStatError, match="utime"):
        parse_stat("42 (python) S 1 2")


def test_in_pod_reads_cgroupfs_and_systemd_paths() -> None:
    cgroupfs = f"4:memory:/e2e-node-0/kubepods/burstable/pod{UID}/abc123\n0::/\n"
    systemd = (
        "0::/kubepods.slice/kubepods-burstable.slice/"
        f"kubepods-burstable-pod{UID.replace('-', '_')}.slice/cri-containerd-abc.scope\n"
    )
    assert in_pod(cgroupfs, UID)
    assert in_pod(systemd, UID)
    assert not in_pod(cgroupfs.replace(UID, "0b6a3c1e-0000"), UID)
    assert not in_pod("0::/\n", UID)


def test_pod_usage_sums_cpu_and_takes_the_largest_peak_without_pause(tmp_path: Path) -> None:
    mine = f"4:memory:/n/kubepods/pod{UID}/c1\n"
    _process(tmp_path, 10, mine, "pause", 100, 1000)
    _process(tmp_path, 11, mine, "dra-allocation", 300, 80_000)
    _process(tmp_path, 12, mine, "helper", 100, 20_000)
    _process(tmp_path, 13, "4:memory:/n/kubepods/podother/c2\n", "other", 900, 900_000)
    (tmp_path / "self").mkdir()
    assert pod_pids(UID, proc=tmp_path) == [10, 11, 12]
    usage = pod_usage(UID, proc=tmp_path)
    assert [p.comm for p in usage.processes] == ["dra-allocation", "helper"]
    ticks = usage.processes[0].cpu_s / 600  # 300 + 300 ticks
    assert usage.cpu_s == pytest.approx(800 * ticks)
    assert usage.peak_rss == 80_000 * 1024
    assert usage.processes[0].rss == 40_000 * 1024
    assert pod_usage("nobody", proc=tmp_path).processes == ()
    assert pod_usage("nobody", proc=tmp_path).peak_rss == 0
