"""A corpus of everyday mistakes: ``kubectl dra validate`` says what the API server would,
at the line to edit, once, and exits 1; ``migrate`` names a misspelt field without
cascading errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubectl_dra.cli import main

MISTAKES = Path(__file__).parent / "fixtures" / "mistakes"
SEED = Path(__file__).parent / "fixtures" / "seed000"

STRICT = "strict decoding error: unknown field"
EXPECTED = {
    "broken.yaml": [
        "broken.yaml:5: file: not valid YAML: expected <block end>, but found "
        "'<block mapping start>' (column 2)",
        "1 problem(s) in 0 object(s)",
    ],
    "claim-beta-shape.yaml": [
        f"claim-beta-shape.yaml:9: ResourceClaim beta-shape: {STRICT} "
        '"spec.devices.requests[0].deviceClassName" (did you mean "exactly.deviceClassName"?)',
        "1 problem(s) in 1 object(s)",
    ],
    "claim-config-typo.yaml": [
        "claim-config-typo.yaml:20: ResourceClaim shared: "
        "spec.devices.config[0].opaque.parameters.sharing.timeSlicingConfg: "
        "unknown field 'timeSlicingConfg' (did you mean 'timeSlicingConfig'?)",
        "1 problem(s) in 1 object(s)",
    ],
    "claim-countt.yaml": [
        f"claim-countt.yaml:11: ResourceClaim two-gpus: {STRICT} "
        '"spec.devices.requests[0].exactly.countt" (did you mean "count"?)',
        "1 problem(s) in 1 object(s)",
    ],
    "claim-deviceclasname.yaml": [
        f"claim-deviceclasname.yaml:10: ResourceClaim typo-class: {STRICT} "
        '"spec.devices.requests[0].exactly.deviceClasName" (did you mean "deviceClassName"?)',
        "1 problem(s) in 1 object(s)",
    ],
    "claim-duplicate.yaml": [
        "claim-duplicate.yaml:12: ResourceClaim twice: strict decoding error: duplicate field "
        '"spec.devices.requests[0].exactly.count"',
        "1 problem(s) in 1 object(s)",
    ],
    "claim-metdata.yaml": [
        f'claim-metdata.yaml:3: ResourceClaim ?: {STRICT} "metdata" (did you mean "metadata"?)',
        "1 problem(s) in 1 object(s)",
    ],
    "claim-requets.yaml": [
        f'claim-requets.yaml:7: ResourceClaim one-gpu: {STRICT} "spec.devices.requets" '
        '(did you mean "requests"?)',
        "1 problem(s) in 1 object(s)",
    ],
    "claim-selector.yaml": [
        f"claim-selector.yaml:11: ResourceClaim big-gpu: {STRICT} "
        '"spec.devices.requests[0].exactly.selector" (did you mean "selectors"?)',
        "1 problem(s) in 1 object(s)",
    ],
    "claim-unpublished-names.yaml": [
        "claim-unpublished-names.yaml:10: warning: ResourceClaim a100: "
        "spec.devices.requests[0].exactly.deviceClassName: no DeviceClass 'gpu.nvidia.con', "
        "and this driver installs none (did you mean 'gpu.nvidia.com'?)",
        "claim-unpublished-names.yaml:13: warning: ResourceClaim a100: "
        "spec.devices.requests[0].exactly.selectors[0].cel.expression: gpu.nvidia.com "
        "publishes no attribute 'productname' (did you mean 'productName'?)",
        "2 warning(s) in 1 object(s)",
    ],
    "class-selecters.yaml": [
        f'class-selecters.yaml:6: DeviceClass big-gpus: {STRICT} "spec.selecters" '
        '(did you mean "selectors"?)',
        "1 problem(s) in 1 object(s)",
    ],
    "deployment-undeclared-claim.yaml": [
        "deployment-undeclared-claim.yaml:20: Deployment inference: "
        'spec.template.spec.containers[0].resources.claims[0]: Not found: "gpus": '
        "must be one of the names in pod.spec.resourceClaims: gpu",
        "1 problem(s) in 1 object(s)",
    ],
    "pod-claim-field-typo.yaml": [
        f"pod-claim-field-typo.yaml:8: Pod worker: {STRICT} "
        '"spec.resourceClaims[0].resourceClaimTemplateNme" '
        '(did you mean "resourceClaimTemplateName"?)',
        f"pod-claim-field-typo.yaml:13: Pod worker: {STRICT} "
        '"spec.containers[0].resources.claim" (did you mean "claims"?)',
        "2 problem(s) in 1 object(s)",
    ],
    "pod-undeclared-claim.yaml": [
        "pod-undeclared-claim.yaml:14: Pod trainer: spec.containers[0].resources.claims[0]: "
        'Not found: "shared-gpuu": must be one of the names in pod.spec.resourceClaims: '
        "shared-gpu",
        "1 problem(s) in 1 object(s)",
    ],
    "template-deep.yaml": [
        f"template-deep.yaml:15: ResourceClaimTemplate fallback: {STRICT} "
        '"spec.spec.devices.requests[0].firstAvailable[0].selectors[0].cel.expresion" '
        '(did you mean "expression"?)',
        "1 problem(s) in 1 object(s)",
    ],
    "wrong-kind.yaml": [
        "wrong-kind.yaml:2: ResourceClaims plural: kind: unknown kind 'ResourceClaims' in "
        'resource.k8s.io/v1 (did you mean "ResourceClaim"?)',
        "1 problem(s) in 1 object(s)",
    ],
}


def _validate(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *files: str
) -> tuple[int, list[str]]:
    monkeypatch.chdir(MISTAKES)
    code = main(["validate", "-f", *files])
    return code, capsys.readouterr().out.splitlines()


def test_the_corpus_has_a_case_per_file() -> None:
    assert sorted(p.name for p in MISTAKES.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_validate_names_each_mistake_once_at_its_line(
    name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, lines = _validate(capsys, monkeypatch, name)
    assert lines == EXPECTED[name]
    assert code == 1


def test_a_broken_file_does_not_stop_the_others_from_being_judged(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, lines = _validate(capsys, monkeypatch, ".")
    findings = [line.removeprefix("./") for line in lines[:-1]]
    assert findings == [line for name in sorted(EXPECTED) for line in EXPECTED[name][:-1]]
    assert lines[-1] == "16 problem(s), 2 warning(s) in 15 object(s)"
    assert code == 1


def test_migrate_names_a_misspelt_config_field_without_cascading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    legacy = tmp_path / "resource-class.yaml"
    text = (SEED / "resource-class.yaml").read_text(encoding="utf-8")
    legacy.write_text(text.replace("  memory:", "  memry:"), encoding="utf-8")
    assert main(["migrate", "-f", str(legacy)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"error: {legacy}#1: NvidiaGPUConfig a100-config: spec.memry: unknown field 'memry' "
        "(did you mean 'memory'?)",
        "1 object(s) cannot be migrated; nothing written",
    ]
