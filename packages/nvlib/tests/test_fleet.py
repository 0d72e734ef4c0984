"""Fleet spec parsing: the string and YAML forms, and errors naming the bad item."""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_nvlib import FleetSpecError, load_fleet_spec, parse_fleet_string


def test_single_model_with_count() -> None:
    spec = parse_fleet_string("8xH100-80GB")
    assert spec.gpu_count == 8
    assert [e.model.product_name for e in spec.models()] == ["NVIDIA H100 80GB HBM3"] * 8


def test_mixed_models_keep_order() -> None:
    spec = parse_fleet_string("4xA100-40GB,4xL4")
    names = [e.model.key for e in spec.models()]
    assert names == ["A100-40GB"] * 4 + ["L4"] * 4


def test_options_mig_and_clique() -> None:
    spec = parse_fleet_string("2xA100-40GB:mig,4xGB200:clique=7:cluster=rack-a")
    assert spec.entries[0].mig_enabled
    assert spec.entries[1].clique_id == 7
    assert spec.entries[1].cluster == "rack-a"


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("8xH999", "unknown GPU model 'H999'"),
        ("", "empty item"),
        ("2xL4,", "empty item"),
        ("2xL4:mig", "has no MIG"),
        ("0xL4", "count must be at least 1"),
        ("2xL4:turbo", "unknown option 'turbo'"),
        ("65xL4", "exceeds the limit"),
    ],
)
def test_bad_specs_name_the_item(spec: str, needle: str) -> None:
    with pytest.raises(FleetSpecError, match=needle):
        parse_fleet_string(spec)


def test_yaml_profile_file(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text("gpus:\n  - model: GB200\n    count: 4\n    clique: 3\n  - model: T4\n")
    spec = load_fleet_spec(str(path))
    assert spec.gpu_count == 5
    assert spec.entries[0].clique_id == 3
    assert spec.source == str(path.resolve())


def test_yaml_unknown_field_is_named(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text("gpus:\n  - model: L4\n    cnt: 2\n")
    with pytest.raises(FleetSpecError, match=r"gpus\[0\]: unknown field\(s\) \['cnt'\]"):
        load_fleet_spec(str(path))


def test_yaml_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FleetSpecError, match="cannot read"):
        load_fleet_spec(str(tmp_path / "absent.yaml"))


def test_equivalent_spellings_have_one_canonical_source() -> None:
    a = parse_fleet_string("8xH100-80GB")
    b = parse_fleet_string("8 x h100")
    assert a.source == b.source == "8xH100-80GB"
    c = parse_fleet_string("4xGB200:clique=2:cluster=rack-a,2xA100-40GB:mig")
    assert c.source == "4xGB200:clique=2:cluster=rack-a,2xA100-40GB:mig"
