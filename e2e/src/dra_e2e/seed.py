"""The seed article's walkthrough objects: the ResourceClaimTemplate ``single-gpu`` and the pod
``gpu-test-pod``, as the article writes them.

They are kept in the chart (``files/seed/``), so that its NOTES print them; the demo and the e2e
tests read that copy. The API fixtures hold byte-equal copies (a packaging test compares them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dra_e2e.chart import CHART
from dra_e2e.errors import E2EError

SEED_DIR = CHART / "files" / "seed"
TEMPLATE = SEED_DIR / "resourceclaimtemplate-single-gpu.yaml"
POD = SEED_DIR / "pod-gpu-test-pod.yaml"
TEMPLATE_NAME = "single-gpu"
POD_NAME = "gpu-test-pod"


class SeedManifestError(E2EError):
    """A seed manifest is not the single object it should be."""

    def __init__(self, path: Path, detail: str) -> None:
        self.path = path
        super().__init__(f"{path}: {detail}")


def manifests() -> str:
    """The template and the pod, verbatim, as one multi-document YAML (template first)."""
    return TEMPLATE.read_text() + "---\n" + POD.read_text()


def in_namespace(path: Path, namespace: str) -> dict[str, Any]:
    """The object of ``path`` with ``metadata.namespace`` set to ``namespace``."""
    obj = yaml.safe_load(path.read_text())
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        raise SeedManifestError(path, "expected one object with metadata")
    obj["metadata"]["namespace"] = namespace
    return obj


def manifests_in(namespace: str) -> str:
    """The template and the pod moved to ``namespace``, as one multi-document YAML."""
    return yaml.safe_dump_all([in_namespace(TEMPLATE, namespace), in_namespace(POD, namespace)])
