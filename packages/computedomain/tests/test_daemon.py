"""The domain daemon with the fake IMEX stand-in: registration, DNS names, restart, check."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from computedomain_support import DRIVER_NS
from dra_computedomain import daemon_cli
from dra_computedomain.api_paths import object_path
from dra_computedomain.daemon import DaemonEnv, DomainDaemon
from dra_computedomain.errors import DaemonEnvironmentError
from dra_computedomain.fake_imex import query
from dra_computedomain.hosts import parse_managed
from dra_computedomain.names import CLIQUE_ID_POD_LABEL
from dra_kube_client.testing import MemoryApi, free_port

CLIQUE = "11111111-2222-3333-4444-555555555555.1"


def _env(tmp: Path, node: str, ip: str) -> dict[str, str]:
    (tmp / node).mkdir()
    hosts = tmp / node / "hosts"
    hosts.write_text("127.0.0.1\tlocalhost\n")
    return {
        "COMPUTE_DOMAIN_UUID": "cd-uid",
        "COMPUTE_DOMAIN_NAME": "cd1",
        "COMPUTE_DOMAIN_NAMESPACE": "team-a",
        "CLIQUE_ID": CLIQUE,
        "NODE_NAME": node,
        "POD_IP": ip,
        "POD_NAME": f"daemon-{node}",
        "POD_NAMESPACE": DRIVER_NS,
        "POD_UID": f"pod-{node}",
        "IMEX_BACKEND": "fake",
        "IMEX_CONFIG_DIR": str(tmp / node / "imexd"),
        "HOSTS_FILE": str(hosts),
        "IMEX_CMD_PORT": str(free_port()),
    }


@pytest.fixture
def daemons(api: MemoryApi, tmp_path: Path) -> Iterator[list[DomainDaemon]]:
    out = []
    for node, ip in (("node-a", "127.0.0.1"), ("node-b", "127.0.0.1")):
        env = DaemonEnv.from_env(_env(tmp_path, node, ip))
        api.put_object(
            object_path("Pod", DRIVER_NS, env.pod_name),
            {"metadata": {"name": env.pod_name, "namespace": DRIVER_NS}},
        )
        daemon = DomainDaemon(env, api)
        daemon.write_config()
        out.append(daemon)
    yield out
    for daemon in out:
        daemon.imex.stop()


def _until_ready(daemon: DomainDaemon, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not daemon.step():
        assert time.monotonic() < deadline, "fake IMEX never became ready"
        time.sleep(0.1)


def test_two_daemons_register_resolve_each_other_and_recover(
    api: MemoryApi, daemons: list[DomainDaemon]
) -> None:
    a, b = daemons
    _until_ready(a)
    _until_ready(b)
    a.step()  # a sees b join: new DNS name, SIGUSR1 to a's IMEX
    clique = api.objects[object_path("ComputeDomainClique", DRIVER_NS, f"cd-uid.{CLIQUE}")]
    assert [(d["nodeName"], d["index"], d["status"]) for d in clique["daemons"]] == [
        ("node-a", 0, "Ready"),
        ("node-b", 1, "Ready"),
    ]
    assert {o["uid"] for o in clique["metadata"]["ownerReferences"]} == {"pod-node-a", "pod-node-b"}
    for d in daemons:
        names = parse_managed(d.env.hosts_file.read_text())
        assert set(names) == {"compute-domain-daemon-0000", "compute-domain-daemon-0001"}
        pod = api.objects[object_path("Pod", DRIVER_NS, d.env.pod_name)]
        assert pod["metadata"]["labels"][CLIQUE_ID_POD_LABEL] == CLIQUE
    # Both IMEX daemons re-resolved their peers after the signal: both names have an address.
    b.step()
    for d in daemons:
        deadline = time.monotonic() + 60
        while True:
            rows = query(d.env.config_path, "NODES").splitlines()
            if all(not r.endswith(" -") for r in rows[:2]):
                break
            assert time.monotonic() < deadline, rows
            time.sleep(0.1)
    # The IMEX daemon dies: the next step restarts it.
    pid = a.imex.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60  # generous: CI's 2 cores may be busy
    while a.imex.pid is not None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    _until_ready(a)
    # Restarted; on a loaded machine a slow start may be retried once more.
    assert a.imex.starts >= 2
    # Leaving frees the index for the next node.
    b.imex.stop()
    b.leave_clique()
    clique = api.objects[object_path("ComputeDomainClique", DRIVER_NS, f"cd-uid.{CLIQUE}")]
    assert [d["nodeName"] for d in clique["daemons"]] == ["node-a"]


def test_check_reports_readiness_of_the_imex_daemon(
    daemons: list[DomainDaemon], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a = daemons[0]
    env = _env_of(a)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert daemon_cli.main(["check"]) == 1  # nothing runs yet
    _until_ready(a)
    assert daemon_cli.main(["check"]) == 0
    assert capsys.readouterr().out.strip().endswith("READY")


def _env_of(daemon: DomainDaemon) -> dict[str, str]:
    e = daemon.env
    return {
        "COMPUTE_DOMAIN_UUID": e.domain_uid,
        "COMPUTE_DOMAIN_NAME": e.domain_name,
        "COMPUTE_DOMAIN_NAMESPACE": e.domain_namespace,
        "CLIQUE_ID": e.clique_id,
        "NODE_NAME": e.node_name,
        "POD_NAME": e.pod_name,
        "POD_NAMESPACE": e.pod_namespace,
        "IMEX_BACKEND": e.imex_backend,
        "IMEX_CONFIG_DIR": str(e.config_dir),
    }


def test_never_ready_imex_keeps_the_node_not_ready(
    api: MemoryApi, daemons: list[DomainDaemon], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_IMEX_NEVER_READY", "1")
    a = daemons[0]
    for _ in range(3):
        assert a.step() is False
        time.sleep(0.2)
    clique = api.objects[object_path("ComputeDomainClique", DRIVER_NS, f"cd-uid.{CLIQUE}")]
    assert clique["daemons"][0]["status"] == "NotReady"


def test_no_clique_id_idles_without_imex(api: MemoryApi, tmp_path: Path) -> None:
    raw = _env(tmp_path, "node-c", "10.0.0.3")
    raw["CLIQUE_ID"] = ""
    env = DaemonEnv.from_env(raw)
    api.put_object(
        object_path("Pod", DRIVER_NS, env.pod_name),
        {"metadata": {"name": env.pod_name, "namespace": DRIVER_NS}},
    )
    daemon = DomainDaemon(env, api)
    assert daemon.step() is True
    assert daemon.imex.pid is None
    pod = api.objects[object_path("Pod", DRIVER_NS, env.pod_name)]
    assert pod["metadata"]["labels"][CLIQUE_ID_POD_LABEL] == ""
    assert api.kind_items("computedomaincliques") == []


def test_missing_cdi_environment_names_the_variable(tmp_path: Path) -> None:
    raw = _env(tmp_path, "node-d", "10.0.0.4")
    del raw["COMPUTE_DOMAIN_UUID"]
    with pytest.raises(DaemonEnvironmentError) as err:
        DaemonEnv.from_env(raw)
    assert err.value.variable == "COMPUTE_DOMAIN_UUID"
    assert "is CDI enabled?" in str(err.value)


def test_daemon_requests_are_declared(api: MemoryApi, daemons: list[DomainDaemon]) -> None:
    from dra_computedomain.api_paths import request_permission
    from dra_computedomain.daemon import REQUESTS

    a, b = daemons
    _until_ready(a)
    _until_ready(b)
    a.leave_clique()
    used = {request_permission(m, p) for m, p in api.requests}
    assert used == REQUESTS


class _RecordedRounds(threading.Event):
    """A stop event that records each wait instead of sleeping; ``then`` runs after each."""

    def __init__(self, n: int, then: Callable[[int], None]) -> None:
        super().__init__()
        self.n, self.then = n, then
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(float(timeout or 0))
        self.then(len(self.waits))
        if len(self.waits) == self.n:
            self.set()
        return self.is_set()


def test_failing_rounds_back_off_with_jitter_and_a_success_resets_the_pace(
    api: MemoryApi, tmp_path: Path
) -> None:
    raw = _env(tmp_path, "node-e", "10.0.0.5")
    raw["CLIQUE_ID"] = ""
    env = DaemonEnv.from_env(raw)
    pod = object_path("Pod", DRIVER_NS, env.pod_name)

    def create_pod_after_three_failures(rounds: int) -> None:
        if rounds == 3:  # the pod appears: the next round's label patch succeeds
            api.put_object(pod, {"metadata": {"name": env.pod_name, "namespace": DRIVER_NS}})

    stop = _RecordedRounds(4, create_pod_after_three_failures)
    DomainDaemon(env, api).run(stop, interval_s=1.0)
    failed, after_success = stop.waits[:3], stop.waits[3]
    for attempt, delay in enumerate(failed, start=1):
        full = 2.0 ** (attempt - 1)
        assert full * 0.8 <= delay <= full
    assert after_success == 1.0
    assert api.objects[pod]["metadata"]["labels"][CLIQUE_ID_POD_LABEL] == ""
