"""Kubeconfig files that authenticate with client certificates of the cluster CA."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from dra_e2e.pki import CertPair


def write_kubeconfig(
    path: Path, *, server: str, ca_cert: Path, client: CertPair, user: str
) -> Path:
    """Write a single-context kubeconfig using absolute certificate paths."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "dra-e2e",
                "cluster": {"server": server, "certificate-authority": str(ca_cert)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate": str(client.cert),
                    "client-key": str(client.key),
                },
            }
        ],
        "contexts": [{"name": "dra-e2e", "context": {"cluster": "dra-e2e", "user": user}}],
        "current-context": "dra-e2e",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(config, fh, sort_keys=False)
    return path
