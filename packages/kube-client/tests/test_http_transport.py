"""The urllib3 transport against the in-memory API server over real HTTP(S): client
certificates, CAs, bearer tokens and their rotation, typed errors, timeouts, watch streams,
and the one-time choice of the kubernetes client for what only it does."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from dra_kube_client import (
    ClientLibraryTransport,
    HttpTransport,
    KubeApiError,
    KubeConfigError,
    KubeTransport,
)
from dra_kube_client.testing import (
    HttpFront,
    MemoryApi,
    Reply,
    Request,
    ScriptedServer,
    TestCa,
    serve_http,
)

NODES = "/api/v1/nodes"


def write_kubeconfig(
    path: Path, server: str, *, cluster: dict[str, Any], user: dict[str, Any]
) -> Path:
    """A kubeconfig at ``path`` whose current context is ``server`` with ``cluster`` and
    ``user`` settings, and a second context ``other`` pointing nowhere."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": server, **cluster}},
            {"name": "nowhere", "cluster": {"server": "http://127.0.0.1:9"}},
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [
            {"name": "other", "context": {"cluster": "nowhere", "user": "u"}},
            {"name": "main", "context": {"cluster": "c", "user": "u"}},
        ],
        "current-context": "main",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def b64(data: bytes) -> str:
    """``data`` as a kubeconfig ``*-data`` field holds it."""
    return base64.b64encode(data).decode()


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCa:
    """One CA for the module's servers and clients."""
    return TestCa(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def tls_front(ca: TestCa) -> Iterator[HttpFront]:
    """The in-memory API server over HTTPS, requiring a client certificate of ``ca``."""
    api = MemoryApi(watch_wait_s=5)
    context = ca.server_context(ca.server("apiserver"), client_certs=True)
    with serve_http(api, tls=context) as front:
        yield front


def wait_until(check: Any) -> None:
    """Poll ``check`` for up to 10 s."""
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_client_certificate_files_over_tls_round_trip_requests_errors_and_watches(
    ca: TestCa, tls_front: HttpFront, tmp_path: Path
) -> None:
    alice = ca.client("alice", common_name="alice")
    # Relative paths are read from the kubeconfig's directory.
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem)
    config = write_kubeconfig(
        tmp_path / "kc",
        tls_front.url,
        cluster={"certificate-authority": "ca.crt"},
        user={"client-certificate": str(alice.cert), "client-key": str(alice.key)},
    )
    client = KubeTransport.from_kubeconfig(str(config))
    assert isinstance(client.backend, HttpTransport)
    assert client.server == tls_front.url
    node = client.request("POST", NODES, body={"metadata": {"name": "n1", "labels": {"a": "b"}}})
    assert node["metadata"]["resourceVersion"] == "1"
    listed = client.request("GET", NODES, query={"labelSelector": "a=b"})
    assert [n["metadata"]["name"] for n in listed["items"]] == ["n1"]
    patched = client.request(
        "PATCH",
        f"{NODES}/n1",
        body={"metadata": {"labels": {"x": "1"}}},
        content_type="application/merge-patch+json",
    )
    assert patched["metadata"]["labels"] == {"a": "b", "x": "1"}
    with pytest.raises(KubeApiError) as err:
        client.request("PUT", f"{NODES}/n1", body=node)  # a stale resourceVersion
    assert (err.value.method, err.value.status, err.value.reason) == ("PUT", 409, "Conflict")
    with pytest.raises(KubeApiError) as err:
        client.request("GET", f"{NODES}/absent")
    assert (err.value.status, err.value.reason) == (404, "NotFound")

    seen: list[tuple[str, str]] = []

    def read() -> None:
        for event in client.watch_lines(NODES, query={"resourceVersion": "2"}, timeout_s=5):
            seen.append((event["type"], event["object"]["metadata"]["name"]))

    reader = threading.Thread(target=read)
    reader.start()
    wait_until(lambda: ("WATCH", NODES) in tls_front.api.requests)
    client.request("DELETE", f"{NODES}/n1")
    wait_until(lambda: bool(seen))  # handed on while the watch is still open
    tls_front.api.close()
    reader.join(10)
    assert seen == [("DELETED", "n1")]
    client.close()
    assert tls_front.client_names == {"alice"}
    assert tls_front.authorizations == {"None"}


def test_certificate_data_and_a_bearer_token(
    ca: TestCa, tls_front: HttpFront, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    bob = ca.client("bob", common_name="bob")
    config = write_kubeconfig(
        tmp_path / "kc",
        tls_front.url,
        cluster={"certificate-authority-data": b64(ca.cert_pem)},
        user={
            "client-certificate-data": b64(bob.cert_pem),
            "client-key-data": b64(bob.key_pem),
            "token": "bobs-token",
        },
    )
    client = KubeTransport.from_kubeconfig(str(config))
    client.request("POST", NODES, body={"metadata": {"name": "n1"}})
    assert (tls_front.client_names, tls_front.authorizations) == ({"bob"}, {"Bearer bobs-token"})
    # The key was loaded from a private directory that is gone again.
    assert list(scratch.iterdir()) == []


def test_a_client_certificate_without_its_key_is_a_configuration_error(
    ca: TestCa, tmp_path: Path
) -> None:
    bob = ca.client("bob", common_name="bob")
    config = write_kubeconfig(
        tmp_path / "kc",
        "https://127.0.0.1:9",
        cluster={},
        user={"client-certificate-data": b64(bob.cert_pem)},
    )
    with pytest.raises(KubeConfigError) as err:
        KubeTransport.from_kubeconfig(str(config))
    assert err.value.source == str(config)
    assert "client-key-data" in err.value.message
    config = write_kubeconfig(
        tmp_path / "kc",
        "https://127.0.0.1:9",
        cluster={"certificate-authority": "absent.crt"},
        user={},
    )
    with pytest.raises(KubeConfigError, match="certificate-authority"):
        KubeTransport.from_kubeconfig(str(config))


def test_the_server_certificate_is_checked_unless_told_otherwise(
    ca: TestCa, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api = MemoryApi()
    api.documents["/version"] = {"gitVersion": "v1.34.0"}
    # A certificate for the service name only, not for the address dialled.
    serving = ca.server("named", hosts=("kubernetes.default.svc",))
    other_ca = TestCa(tmp_path / "other", name="other-ca")
    with serve_http(api, tls=ca.server_context(serving, client_certs=False)) as front:

        def version(cluster: dict[str, Any]) -> dict[str, Any]:
            config = write_kubeconfig(tmp_path / "kc", front.url, cluster=cluster, user={})
            return KubeTransport.from_kubeconfig(str(config)).request("GET", "/version")

        with pytest.raises(KubeApiError) as err:
            version({"certificate-authority": str(ca.cert)})
        assert err.value.status == 0
        assert "127.0.0.1" in err.value.message  # the name that did not match
        named = {"certificate-authority": str(ca.cert), "tls-server-name": "kubernetes.default.svc"}
        assert version(named) == {"gitVersion": "v1.34.0"}
        with pytest.raises(KubeApiError) as err:
            version(
                {
                    "certificate-authority": str(other_ca.cert),
                    "tls-server-name": "kubernetes.default.svc",
                }
            )
        assert (err.value.status, "CERTIFICATE_VERIFY_FAILED" in err.value.message) == (0, True)
        assert not [r for r in caplog.records if getattr(r, "event", "") == "tls_unverified"]
        assert version({"insecure-skip-tls-verify": True}) == {"gitVersion": "v1.34.0"}
        # Said once, when the transport is built, naming the server.
        (said,) = [r for r in caplog.records if getattr(r, "event", "") == "tls_unverified"]
        assert getattr(said, "server", "") == front.url


def test_in_cluster_rereads_the_service_account_token_when_rotated(
    ca: TestCa, tmp_path: Path
) -> None:
    api = MemoryApi()
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "ca.crt").write_bytes(ca.cert_pem)
    (account / "token").write_text("first\n")
    context = ca.server_context(ca.server("apiserver"), client_certs=False)
    with serve_http(api, tls=context) as front:
        port = front.url.rsplit(":", 1)[1]
        env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": port}
        client = KubeTransport.in_cluster(env, service_account_dir=str(account))
        assert client.server == front.url
        client.request("POST", NODES, body={"metadata": {"name": "n1"}})
        assert front.authorizations == {"Bearer first"}
        # The kubelet writes the new token beside the old one and swaps it in.
        (account / "token.new").write_text("second\n")
        os.replace(account / "token.new", account / "token")
        front.authorizations.clear()
        client.request("GET", f"{NODES}/n1")
        list(client.watch_lines(NODES, query={"resourceVersion": "1"}, timeout_s=1))
        assert front.authorizations == {"Bearer second"}
        (account / "token").unlink()
        with pytest.raises(KubeApiError) as err:
            client.request("GET", f"{NODES}/n1")
        assert (err.value.status, "bearer token" in err.value.message) == (0, True)
    with pytest.raises(KubeConfigError) as config_err:
        KubeTransport.in_cluster(env, service_account_dir=str(account))
    assert config_err.value.source == "in-cluster config"
    assert "tokenFile" in config_err.value.message


def _slow(request: Request) -> Reply:
    """Answers after 3 s."""
    time.sleep(3)
    return Reply.json(200, {})


def test_a_request_that_outlives_its_timeout_is_status_0(tmp_path: Path) -> None:
    with ScriptedServer(_slow) as server:
        config = write_kubeconfig(tmp_path / "kc", server.url, cluster={}, user={"token": "t"})
        client = KubeTransport.from_kubeconfig(str(config))
        started = time.monotonic()
        with pytest.raises(KubeApiError) as err:
            client.request("POST", "/slow", body={}, timeout_s=0.3)  # POST: never retried
        assert time.monotonic() - started < 2
        assert (err.value.method, err.value.status) == ("POST", 0)
        assert "timed out" in err.value.message


def _watch_then_object(request: Request) -> Reply:
    """A watch of three events (chunked, kept alive), or an object."""
    if request.path.startswith("/broken"):
        return Reply(200, b'{"type": "ADDED"}\nnot json\n', chunks=(5,))
    if "watch=true" in request.path:
        events = [{"type": "ADDED", "object": {"metadata": {"name": n}}} for n in "abc"]
        return Reply.lines(events, chunks=(10,))
    return Reply.json(200, {"kind": "Thing"})


def test_a_watch_left_early_or_broken_leaves_the_transport_usable(tmp_path: Path) -> None:
    with ScriptedServer(_watch_then_object) as server:
        config = write_kubeconfig(tmp_path / "kc", server.url, cluster={}, user={})
        client = KubeTransport.from_kubeconfig(str(config))
        events = client.watch_lines("/things", query={}, timeout_s=5)
        assert isinstance(events, Generator)
        assert next(events)["object"]["metadata"]["name"] == "a"
        events.close()  # the caller stops reading mid-stream
        assert client.request("GET", "/thing") == {"kind": "Thing"}
        with pytest.raises(KubeApiError) as err:
            list(client.watch_lines("/broken", query={}, timeout_s=5))
        assert (err.value.method, err.value.status) == ("WATCH", 0)
        assert "not JSON" in err.value.message
        assert client.request("GET", "/thing") == {"kind": "Thing"}


EXEC_PLUGIN = """
import json
print(json.dumps({
    "apiVersion": "client.authentication.k8s.io/v1beta1",
    "kind": "ExecCredential",
    "status": {"token": "from-exec"},
}))
"""


def test_credential_plugins_and_merged_files_go_through_the_kubernetes_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(EXEC_PLUGIN)
    api = MemoryApi()
    with serve_http(api) as front:
        exec_user = {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": sys.executable,
                "args": [str(plugin)],
            }
        }
        config = write_kubeconfig(tmp_path / "exec", front.url, cluster={}, user=exec_user)
        client = KubeTransport.from_kubeconfig(str(config))
        assert isinstance(client.backend, ClientLibraryTransport)
        node = client.request("POST", NODES, body={"metadata": {"name": "n1"}})
        assert node["metadata"]["resourceVersion"] == "1"
        assert front.authorizations == {"Bearer from-exec"}
        with pytest.raises(KubeApiError) as err:
            client.request("GET", f"{NODES}/absent")
        assert (err.value.status, err.value.reason) == (404, "NotFound")
        # Several files in $KUBECONFIG are merged by the client.
        plain = write_kubeconfig(tmp_path / "plain", front.url, cluster={}, user={"token": "t"})
        monkeypatch.setenv("KUBECONFIG", f"{plain}{os.pathsep}{tmp_path / 'absent'}")
        merged = KubeTransport.from_kubeconfig(in_cluster=False)
        assert isinstance(merged.backend, ClientLibraryTransport)
        assert merged.request("GET", f"{NODES}/n1")["metadata"]["name"] == "n1"
        # A chosen context is honoured by both.
        monkeypatch.setenv("KUBECONFIG", str(plain))
        other = KubeTransport.from_kubeconfig(in_cluster=False, context="other")
        assert isinstance(other.backend, HttpTransport)
        assert other.server == "http://127.0.0.1:9"
        assert KubeTransport.from_kubeconfig(str(config), context="other").server == other.server


def test_the_common_case_never_imports_the_kubernetes_client(tmp_path: Path) -> None:
    api = MemoryApi()
    with serve_http(api) as front:
        config = write_kubeconfig(tmp_path / "kc", front.url, cluster={}, user={"token": "t"})
        script = textwrap.dedent(
            f"""
            import sys
            from dra_kube_client import KubeTransport
            client = KubeTransport.from_kubeconfig({str(config)!r})
            client.request("POST", "/api/v1/nodes", body={{"metadata": {{"name": "n1"}}}})
            print(sorted(m for m in sys.modules if m.split(".")[0] == "kubernetes"))
            """
        )
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert f"{NODES}/n1" in api.objects


def test_a_json_kubeconfig_is_read_without_the_yaml_parser(tmp_path: Path) -> None:
    # A pod reads no YAML (in-cluster configuration); a JSON kubeconfig should not make a
    # process pay for PyYAML either (docs/scale.md, "Per-node footprint").
    config = tmp_path / "kc.json"
    config.write_text(
        json.dumps(
            {
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "main",
            }
        )
    )
    script = textwrap.dedent(
        f"""
        import sys
        from dra_kube_client import KubeTransport
        print(KubeTransport.from_kubeconfig({str(config)!r}).server)
        print("yaml" in sys.modules)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["http://127.0.0.1:9", "False"]


def test_a_kubeconfig_in_yaml_flow_style_is_still_yaml(tmp_path: Path) -> None:
    # "{" starts YAML's flow style too: text that is not JSON goes to the YAML parser.
    config = tmp_path / "kc"
    config.write_text(
        "{clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}],"
        " users: [{name: u, user: {token: t}}],"
        " contexts: [{name: main, context: {cluster: c, user: u}}],"
        " current-context: main}\n"
    )
    assert KubeTransport.from_kubeconfig(str(config)).server == "http://127.0.0.1:9"
