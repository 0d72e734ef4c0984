"""Offline rendering of the chart for its tests: the manifest objects, and the NOTES text.

Imported by name (``import chart_render``), like chart_helpers: the test modules put this
directory on ``sys.path``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from chart_helpers import BASE_SETS, CHART, NAMESPACE, run_helm, set_args

#: NVIDIA's values.yaml (chart 0.5.0-dev), verbatim.
NVIDIA_VALUES = Path(__file__).parent / "fixtures" / "nvidia-values-0.5.0-dev.yaml"


def _args(
    sets: Mapping[str, str] | None,
    values: Sequence[Path],
    namespace: str,
    base: bool,
    api_versions: Sequence[str] = (),
) -> list[str]:
    merged = {**(BASE_SETS if base else {}), **(sets or {})}
    files = [arg for path in values for arg in ("-f", str(path))]
    apis = [arg for api in api_versions for arg in ("--api-versions", api)]
    return ["--namespace", namespace, *files, *apis, *set_args(merged)]


def render_objects(
    helm: Path,
    sets: Mapping[str, str] | None = None,
    *,
    values: Sequence[Path] = (),
    namespace: str = NAMESPACE,
    base: bool = True,
    api_versions: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """``helm template`` of the chart: the manifest objects in order (raises HelmFailed);
    ``api_versions`` are the APIs the cluster is said to serve (``--api-versions``)."""
    out = run_helm(
        helm, "template", "dra", str(CHART), *_args(sets, values, namespace, base, api_versions)
    )
    return [doc for doc in yaml.safe_load_all(out) if doc]


#: What NOTES.txt asks the cluster for; offline ``helm template`` answers it with nothing.
NODE_LOOKUP = '(lookup "v1" "Node" "" "")'


def render_notes(
    helm: Path,
    sets: Mapping[str, str] | None = None,
    *,
    values: Sequence[Path] = (),
    namespace: str = NAMESPACE,
    base: bool = True,
    api_versions: Sequence[str] = (),
    nodes: Sequence[Mapping[str, Any]] | None = None,
) -> str:
    """The NOTES text ``helm install`` would print, rendered offline.

    ``helm template`` skips NOTES.txt and a client-side dry-run install still asks a cluster for
    its version, so a copy of the chart turns NOTES.txt into a named template and renders it
    into a one-key YAML document. ``nodes`` (Node objects) stand in for the cluster's nodes that
    NOTES.txt looks up, which offline rendering never sees.
    """
    with tempfile.TemporaryDirectory(prefix="chart-notes-") as tmp:
        chart = Path(tmp) / CHART.name
        shutil.copytree(CHART, chart)
        templates = chart / "templates"
        notes = (templates / "NOTES.txt").read_text()
        if nodes is not None:
            assert NODE_LOOKUP in notes
            (chart / "chart-test-nodes.json").write_text(json.dumps({"items": list(nodes)}))
            notes = notes.replace(NODE_LOOKUP, '(.Files.Get "chart-test-nodes.json" | fromJson)')
        (templates / "NOTES.txt").unlink()
        define = '{{- define "chart-test.notes" -}}\n' + notes + "\n{{- end }}\n"
        (templates / "_chart_test_notes.tpl").write_text(define)
        (templates / "chart-test-notes.yaml").write_text(
            'notes: {{ include "chart-test.notes" . | toJson }}\n'
        )
        out = run_helm(
            helm,
            "template",
            "dra",
            str(chart),
            "--show-only",
            "templates/chart-test-notes.yaml",
            *_args(sets, values, namespace, base, api_versions),
        )
    return str(yaml.safe_load(out)["notes"])
