"""Reading a kubeconfig document or the in-cluster environment into a Connection."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from dra_kube_client.connection import (
    Connection,
    NeedsClientLibrary,
    connection_from_kubeconfig,
    in_cluster_connection,
)
from dra_kube_client.errors import KubeConfigError


def b64(text: str) -> str:
    """``text`` base64-encoded, as kubeconfig ``*-data`` fields hold it."""
    return base64.b64encode(text.encode()).decode()


def doc(**users: dict[str, Any]) -> dict[str, Any]:
    """Two clusters and a context per user (``ctx-<user>``), on cluster ``a`` unless the
    user is called ``b...``; the current context is the first user's."""
    names = list(users)
    return {
        "clusters": [
            {
                "name": "a",
                "cluster": {"server": "https://a.example:6443/", "certificate-authority": "ca.crt"},
            },
            {
                "name": "b",
                "cluster": {
                    "server": "https://10.0.0.1",
                    "certificate-authority-data": b64("PEM-B"),
                    "insecure-skip-tls-verify": True,
                    "tls-server-name": "kubernetes.default",
                },
            },
        ],
        "users": [{"name": n, "user": u} for n, u in users.items()],
        "contexts": [
            {
                "name": f"ctx-{n}",
                "context": {"cluster": "b" if n.startswith("b") else "a", "user": n},
            }
            for n in names
        ],
        "current-context": f"ctx-{names[0]}",
    }


def read(document: object, context: str | None = None) -> Connection | NeedsClientLibrary:
    """The connection of ``document`` as read from ``/etc/kube/config``."""
    return connection_from_kubeconfig(
        document, source="/etc/kube/config", base_dir="/etc/kube", context=context
    )


def test_current_context_with_files_relative_to_the_kubeconfig() -> None:
    found = read(
        doc(
            alice={"client-certificate": "alice.crt", "client-key": "/abs/alice.key"},
            bob={"token": "t"},
        )
    )
    assert found == Connection(
        server="https://a.example:6443",  # the trailing slash dropped, as the client does
        ca_file="/etc/kube/ca.crt",
        cert_file="/etc/kube/alice.crt",
        key_file="/abs/alice.key",
    )


def test_a_chosen_context_with_data_fields_token_and_tls_options() -> None:
    users = {
        "alice": {"token": "unused"},
        "bob": {
            "client-certificate-data": b64("CERT"),
            "client-key-data": b64("KEY"),
            "token": "tok",
        },
    }
    found = read(doc(**users), context="ctx-bob")
    assert found == Connection(
        server="https://10.0.0.1",
        ca_data="PEM-B",
        cert_data=b"CERT",
        key_data=b"KEY",
        token="tok",
        insecure=True,
        tls_server_name="kubernetes.default",
    )


def test_token_file_and_basic_auth() -> None:
    found = read(doc(carol={"tokenFile": "tokens/carol", "username": "u", "password": "p"}))
    assert isinstance(found, Connection)
    assert (found.token, found.token_file, found.basic_auth) == (
        None,
        "/etc/kube/tokens/carol",
        ("u", "p"),
    )


@pytest.mark.parametrize(
    ("user", "reason"),
    [
        ({"exec": {"command": "aws", "apiVersion": "v1"}}, "user 'dave' uses exec"),
        ({"auth-provider": {"name": "oidc"}}, "user 'dave' uses auth-provider"),
    ],
)
def test_credential_plugins_need_the_client_library(user: dict[str, Any], reason: str) -> None:
    assert read(doc(dave=user)) == NeedsClientLibrary(reason)


def test_a_proxy_needs_the_client_library() -> None:
    document = doc(dave={"token": "t"})
    document["clusters"][0]["cluster"]["proxy-url"] = "http://proxy:3128"
    assert read(document) == NeedsClientLibrary("cluster 'a' uses proxy-url")


def test_a_context_without_user_sends_no_credentials() -> None:
    document = doc(dave={})
    document["contexts"][0]["context"].pop("user")
    found = read(document)
    assert isinstance(found, Connection)
    assert (found.token, found.cert_file, found.basic_auth) == (None, None, None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("current-context"), "no context given and no current-context set"),
        (lambda d: d.update({"current-context": "nope"}), "context 'nope' not found in contexts"),
        (lambda d: d["users"].clear(), "user 'dave' not found in users"),
        (lambda d: d["clusters"][0]["cluster"].pop("server"), "cluster 'a': server is not set"),
        (lambda d: d["contexts"][0]["context"].pop("cluster"), "context 'ctx-dave': cluster is"),
        (lambda d: d.update({"clusters": {"a": 1}}), "clusters: not a list"),
        (
            lambda d: d["users"][0]["user"].update({"client-key-data": "abc"}),
            "user 'dave': client-key-data is not base64",
        ),
        (
            lambda d: d["clusters"][1]["cluster"].update(
                {"certificate-authority-data": base64.b64encode(b"\xff").decode()}
            ),
            "cluster 'b': certificate-authority-data is not PEM text",
        ),
    ],
)
def test_malformed_kubeconfigs_name_the_entry_and_field(change: Any, message: str) -> None:
    document = doc(dave={"token": "t"})
    document["contexts"].append({"name": "ctx-b", "context": {"cluster": "b", "user": "dave"}})
    change(document)
    context = "ctx-b" if "cluster 'b'" in message else None
    with pytest.raises(KubeConfigError) as err:
        read(document, context=context)
    assert err.value.source == "/etc/kube/config"
    assert message in err.value.message


def test_a_document_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(KubeConfigError, match="not a mapping"):
        read(["not", "a", "kubeconfig"])


def test_in_cluster_reads_the_service_variables_and_account_directory() -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert in_cluster_connection(env, service_account_dir="/sa") == Connection(
        server="https://10.96.0.1:443", ca_file="/sa/ca.crt", token_file="/sa/token"
    )
    env["KUBERNETES_SERVICE_HOST"] = "fd00::1"
    found = in_cluster_connection(env)
    assert found.server == "https://[fd00::1]:443"
    assert found.token_file == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    with pytest.raises(KubeConfigError) as err:
        in_cluster_connection({"KUBERNETES_SERVICE_HOST": "10.96.0.1"})
    assert err.value.source == "in-cluster config"
    assert "not in a pod" in err.value.message
