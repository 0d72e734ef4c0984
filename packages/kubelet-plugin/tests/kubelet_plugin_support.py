"""Test support for the kubelet plugin's tests (imported by conftest and tests).

The driver-agnostic helpers (:class:`ReferenceProtos`, :func:`make_claim`,
:class:`PluginDirs`, :func:`plugin_api_server`, ...) live in the core's
``kubelet_core_support`` and are re-exported here; this module adds the GPU plugin's:

- :func:`gpu_config` and :func:`write_claim`: configs for this driver, claims on disk;
- :class:`PluginProcess`: the real ``dra-kubelet-plugin`` program in a subprocess, with temp
  directories, the fake GPU backend and the directory claim source (the test double of the
  API server's claim endpoint).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc
from kubelet_core_support import (
    DRIVER,
    NODE_EVENTS,
    REFERENCE_DIR,
    RESOURCE_SLICES,
    PluginDirs,
    ReferenceProtos,
    claim_path,
    make_claim,
    plugin_api_server,
)

__all__ = [
    "DRIVER",
    "NODE_EVENTS",
    "REFERENCE_DIR",
    "RESOURCE_SLICES",
    "PluginDirs",
    "PluginProcess",
    "ReferenceProtos",
    "claim_path",
    "gpu_config",
    "make_claim",
    "plugin_api_server",
    "write_claim",
]


def gpu_config(
    parameters: dict[str, Any], *, source: str = "FromClaim", requests: Sequence[str] = ()
) -> dict[str, Any]:
    """An allocation config entry carrying ``parameters`` for this driver."""
    entry: dict[str, Any] = {
        "source": source,
        "opaque": {"driver": DRIVER, "parameters": parameters},
    }
    if requests:
        entry["requests"] = list(requests)
    return entry


def write_claim(claims_dir: Path, claim: dict[str, Any]) -> None:
    """Store a claim where the directory claim source (API-server double) finds it."""
    meta = claim["metadata"]
    path = claims_dir / meta["namespace"] / f"{meta['name']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(claim))
    tmp.replace(path)


class PluginProcess:
    """``python -m dra_kubelet_plugin`` with the fake backend and temp directories."""

    def __init__(
        self,
        dirs: PluginDirs,
        *,
        fake_gpus: str = "8xH100-80GB",
        extra: Sequence[str] = (),
        claims_directory: bool = True,
    ) -> None:
        self.dirs = dirs
        self.fake_gpus = fake_gpus
        self.extra = list(extra)
        self.claims_directory = claims_directory
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = dirs.root / "plugin.log"

    def args(self) -> list[str]:
        """The command line."""
        return [
            sys.executable,
            "-m",
            "dra_kubelet_plugin",
            "--node-name",
            "n1",
            "--device-backend",
            "fake",
            "--fake-gpus",
            self.fake_gpus,
            "--kubelet-registrar-directory-path",
            str(self.dirs.registrar),
            "--kubelet-plugins-directory-path",
            str(self.dirs.plugins),
            "--cdi-root",
            str(self.dirs.cdi),
            *(["--claims-directory", str(self.dirs.claims)] if self.claims_directory else []),
            "--boot-id-file",
            str(self.dirs.boot_id),
            *self.extra,
        ]

    def start(self, *, pod_uid: str = "", timeout_s: float = 30.0) -> None:
        """Start and wait until the registration socket answers."""
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NODE_NAME")}
        # On SIGABRT (see stop) Python writes every thread's stack to the log.
        env["PYTHONFAULTHANDLER"] = "1"
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.args(), stdout=log, stderr=log, env=env)
        sock = self.dirs.registration_socket(pod_uid)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"plugin exited with {self.proc.returncode}:\n{self.logs()}")
            if sock.exists():
                with grpc.insecure_channel(f"unix://{sock}") as ch:
                    try:
                        grpc.channel_ready_future(ch).result(timeout=1)
                        return
                    except grpc.FutureTimeoutError:
                        pass
            time.sleep(0.05)
        raise RuntimeError(f"plugin did not start within {timeout_s}s:\n{self.logs()}")

    def logs(self) -> str:
        """Everything the plugin logged so far."""
        return self.log_path.read_text() if self.log_path.exists() else ""

    def stop(self, timeout_s: float = 15.0) -> int:
        """SIGTERM and wait; returns the exit status.

        Raises:
            AssertionError: it did not exit within ``timeout_s``; then it is aborted (its
                threads' stacks go to its log) and killed, so that it does not outlive the
                test, and the message holds its log, to say where it hung.
        """
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            self.kill()
            raise AssertionError(
                f"plugin did not exit within {timeout_s:g} s of SIGTERM; its log:\n{self.logs()}"
            ) from None

    def kill(self) -> None:
        """SIGKILL (crash)."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait(timeout=15)

    @contextlib.contextmanager
    def channel(self, pod_uid: str = "") -> Iterator[grpc.Channel]:
        """A channel to the DRA socket."""
        with grpc.insecure_channel(f"unix://{self.dirs.dra_socket(pod_uid)}") as ch:
            yield ch
