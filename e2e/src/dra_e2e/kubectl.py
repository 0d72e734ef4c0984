"""kubectl against one kubeconfig: the one way the harness, the tests and the demo run kubectl.

The kubeconfig is always passed as ``--kubeconfig``, so an ambient ``$KUBECONFIG`` never
decides which cluster a command reaches; an existing cluster is one named by a ``--kubeconfig``
flag of the tool or by ``$DRA_E2E_KUBECONFIG`` (:func:`asked_kubeconfig`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dra_e2e.build import KUBE, binaries, is_built
from dra_e2e.errors import KubectlError, ToolMissingError

#: Names the existing cluster to use instead of a local one; ``$KUBECONFIG`` never does.
KUBECONFIG_ENV = "DRA_E2E_KUBECONFIG"
#: What kubectl prints when the object asked for does not exist.
_NOT_FOUND = ("NotFound", "not found")


def asked_kubeconfig(flag: str | Path | None) -> Path | None:
    """The kubeconfig of the existing cluster asked for: ``flag``, else ``$DRA_E2E_KUBECONFIG``."""
    value = flag or os.environ.get(KUBECONFIG_ENV)
    return Path(value) if value else None


def default_kubectl() -> Path:
    """The cached kubectl if built, else ``kubectl`` on PATH."""
    if is_built(KUBE):
        return binaries().kubectl
    found = shutil.which("kubectl")
    if found is None:
        raise ToolMissingError("kubectl", "run `e2e-cluster build` or install kubectl")
    return Path(found)


@dataclass(frozen=True)
class Kubectl:
    """A kubectl binary bound to one kubeconfig."""

    binary: Path
    kubeconfig: Path

    def argv(self, *args: str) -> list[str]:
        """The command line of ``kubectl ARGS`` against this kubeconfig."""
        return [str(self.binary), f"--kubeconfig={self.kubeconfig}", *args]

    def run(self, *args: str, input_text: str | None = None, timeout: float = 60) -> str:
        """Run ``kubectl ARGS``; return stdout, raise KubectlError on a non-zero exit."""
        proc = subprocess.run(
            self.argv(*args),
            input=input_text,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            raise KubectlError(list(args), proc.returncode, proc.stderr)
        return proc.stdout

    def json(self, *args: str, timeout: float = 60) -> Any:
        """``kubectl ARGS -o json``, decoded."""
        return json.loads(self.run(*args, "-o", "json", timeout=timeout))

    def exists(self, *args: str, timeout: float = 60) -> bool:
        """Whether ``kubectl get ARGS`` finds the object; other failures raise KubectlError."""
        try:
            self.run("get", *args, timeout=timeout)
        except KubectlError as exc:
            if any(marker in exc.stderr for marker in _NOT_FOUND):
                return False
            raise
        return True
