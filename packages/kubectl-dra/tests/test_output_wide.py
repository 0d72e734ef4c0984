"""``-o wide`` on every ``kubectl dra`` subcommand whose output is data (issue #24, item 5):
the columns a kubectl user expects, and the same facts as ``-o json`` and ``-o yaml``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from dra_allocator.snapshot import Snapshot
from dra_api_types.driver_classes import driver_device_classes
from kubectl_dra.cli import main
from kubectl_dra.table import Table
from kubectl_dra.wide import allocate_table

FIXTURES = Path(__file__).parent / "fixtures"
CLI = FIXTURES / "cli"
SLICES = FIXTURES / "fake-slices" / "a100-h100-v100.yaml"
DEMO = (
    Path(__file__).parents[2]
    / "api-types"
    / "tests"
    / "fixtures"
    / "nvidia-demo-specs"
    / "quickstart_v1_gpu-test1.yaml"
)
EXT = FIXTURES / "extended"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().out


def _rows(text: str) -> list[dict[str, str]]:
    """A kubectl table read back by its header's column positions (``<none>`` is '')."""
    header, *lines = text.splitlines()
    # Columns are 3 or more spaces apart; "EXTENDED RESOURCE" holds one space.
    names = [n.strip() for n in header.split("   ") if n.strip()]
    starts = []
    at = 0
    for name in names:
        at = header.index(name, at)
        starts.append(at)
        at += len(name)
    out = []
    for line in lines:
        cells = [
            line[s : (starts[i + 1] if i + 1 < len(starts) else None)].strip()
            for i, s in enumerate(starts)
        ]
        out.append({n: "" if c == "<none>" else c for n, c in zip(names, cells, strict=True)})
    return out


def _all_formats(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, tuple[int, str]]:
    return {fmt: _run(capsys, *args, "-o", fmt) for fmt in ("json", "yaml", "wide")}


def test_allocate_wide_has_kubectls_columns_with_the_devices_product_and_memory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = _run(capsys, "allocate", "-f", str(CLI / "cluster.yaml"), str(CLI / "claims.yaml"),
                     "-o", "wide")  # fmt: skip
    assert code == 0
    assert out.splitlines()[0].split() == [
        "NAMESPACE", "CLAIM", "POD", "STATE", "NODE", "REQUEST", "DRIVER", "POOL", "DEVICE",
        "PRODUCT", "MEMORY", "CONFIG", "REASON",
    ]  # fmt: skip
    assert _rows(out) == [
        {
            "NAMESPACE": "team-a", "CLAIM": "single", "POD": "", "STATE": "allocated",
            "NODE": "node-b", "REQUEST": "gpu", "DRIVER": "gpu.nvidia.com", "POOL": "node-b",
            "DEVICE": "gpu-0", "PRODUCT": "NVIDIA H100 80GB HBM3", "MEMORY": "80Gi",
            "CONFIG": "FromClass:GpuConfig", "REASON": "",
        },
        {
            "NAMESPACE": "team-a", "CLAIM": "h100", "POD": "", "STATE": "allocated",
            "NODE": "node-b", "REQUEST": "gpu", "DRIVER": "gpu.nvidia.com", "POOL": "node-b",
            "DEVICE": "gpu-1", "PRODUCT": "NVIDIA H100 80GB HBM3", "MEMORY": "80Gi",
            "CONFIG": "FromClass:GpuConfig", "REASON": "",
        },
    ]  # fmt: skip


@pytest.mark.parametrize(
    "files",
    [
        [CLI / "cluster.yaml", CLI / "claims.yaml"],
        [CLI / "cluster.yaml", CLI / "held.yaml"],
        [CLI / "cluster.yaml", CLI / "too-big.yaml"],
        [SLICES, DEMO],
        [EXT],
    ],
    ids=["claims", "held", "too-big", "template-pods", "extended-resources"],
)
def test_allocate_json_yaml_and_wide_say_the_same(
    capsys: pytest.CaptureFixture[str], files: list[Path]
) -> None:
    outputs = _all_formats(capsys, "allocate", "-f", *map(str, files))
    codes = {code for code, _ in outputs.values()}
    assert len(codes) == 1, outputs
    report = json.loads(outputs["json"][1])
    assert yaml.safe_load(outputs["yaml"][1]) == report
    rows = _rows(outputs["wide"][1])
    wanted = []
    for key, entry in report["claims"].items():
        ns, name = key.split("/")
        if entry["allocated"]:
            wanted += [
                (ns, name, "allocated", entry["node"], r["request"], r["driver"], r["pool"],
                 r["device"], "")
                for r in entry["allocation"]["devices"]["results"]
            ]  # fmt: skip
        else:
            more = f" (+{len(entry['reasons']) - 1} more)" if len(entry["reasons"]) > 1 else ""
            wanted.append((ns, name, "unallocated", "", "", "", "", "", entry["reasons"][0] + more))
    for key, entry in report.get("pods", {}).items():
        ns, name = key.split("/")
        if not entry["allocated"]:
            more = f" (+{len(entry['reasons']) - 1} more)" if len(entry["reasons"]) > 1 else ""
            wanted.append((ns, "", "unallocated", "", "", "", "", "", entry["reasons"][0] + more))
    got = [
        tuple(r[c] for c in ("NAMESPACE", "CLAIM", "STATE", "NODE", "REQUEST", "DRIVER", "POOL",
                             "DEVICE", "REASON"))
        for r in rows
    ]  # fmt: skip
    assert got == wanted


def test_allocate_wide_names_the_pod_of_template_and_extended_resource_claims(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out = _run(capsys, "allocate", "-f", str(SLICES), str(DEMO), "-o", "wide")
    pods = {r["CLAIM"]: r["POD"] for r in _rows(out)}
    report = json.loads(_run(capsys, "allocate", "-f", str(SLICES), str(DEMO), "-o", "json")[1])
    assert pods == {
        status["resourceClaimName"]: key.split("/")[1]
        for key, entry in report["pods"].items()
        for status in entry["resourceClaimStatuses"]
    }
    assert {r["PRODUCT"] for r in _rows(out)} == {"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"}
    _, out = _run(capsys, "allocate", "-f", str(EXT), "-o", "wide")
    assert {(r["CLAIM"], r["POD"]) for r in _rows(out)} == {
        ("one-gpu-extended-resources", "one-gpu"),
        ("two-gpus-extended-resources", "two-gpus"),
        ("", "nine-gpus"),
    }


def test_allocate_wide_shows_a_device_plugin_pod_by_node_and_resource(
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = [str(p) for p in (EXT / "slices-8xh100.yaml", EXT / "slice-gh200-mig.yaml",
                              EXT / "classes.yaml", EXT / "pods.yaml",
                              EXT / "device-plugin-node.yaml")]  # fmt: skip
    code, out = _run(capsys, "allocate", "-f", *files, "--node", "node-plugin", "-o", "wide")
    assert code == 0
    row = next(r for r in _rows(out) if r["POD"] == "one-gpu")
    assert (row["CLAIM"], row["STATE"], row["NODE"], row["REQUEST"]) == (
        "",
        "allocated",
        "node-plugin",
        "nvidia.com/gpu",
    )


def test_allocate_wide_config_column_is_per_request_with_its_source() -> None:
    config = [
        {"source": "FromClass", "opaque": {"driver": "d", "parameters": {"kind": "GpuConfig"}}},
        {
            "source": "FromClaim",
            "requests": ["mig"],
            "opaque": {"driver": "d", "parameters": {"kind": "MigDeviceConfig"}},
        },
    ]
    results = [
        {"request": "gpu", "driver": "d", "pool": "p", "device": "gpu-0"},
        {"request": "mig/small", "driver": "d", "pool": "p", "device": "gpu-1-mig-0"},
    ]
    report = {
        "claims": {
            "ns/c": {
                "allocated": True,
                "node": "n",
                "allocation": {"devices": {"results": results, "config": config}},
            }
        }
    }
    rows = _rows(allocate_table(report, Snapshot()).render())
    assert [(r["REQUEST"], r["CONFIG"], r["PRODUCT"]) for r in rows] == [
        ("gpu", "FromClass:GpuConfig", ""),
        ("mig/small", "FromClass:GpuConfig,FromClaim:MigDeviceConfig", ""),
    ]


def test_validate_wide_is_the_findings_as_a_table_and_the_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = str(CLI / "invalid.yaml")
    text_code, text = _run(capsys, "validate", "-f", path)
    outputs = _all_formats(capsys, "validate", "-f", path)
    assert {code for code, _ in outputs.values()} == {text_code} == {1}
    report = json.loads(outputs["json"][1])
    assert yaml.safe_load(outputs["yaml"][1]) == report
    wide = outputs["wide"][1]
    assert wide.splitlines()[-1] == report["summary"] == text.splitlines()[-1]
    table = "\n".join(wide.splitlines()[:-1])
    assert table.splitlines()[0].split() == [
        "LOCATION", "SEVERITY", "KIND", "NAME", "FIELD", "MESSAGE",
    ]  # fmt: skip
    assert [
        (r["LOCATION"], r["SEVERITY"], f"{r['KIND']} {r['NAME']}", r["FIELD"], r["MESSAGE"])
        for r in _rows(table)
    ] == [
        (f["where"], f["severity"], f["object"], f["field"], " ".join(f["message"].split()))
        for f in report["findings"]
    ]


def test_validate_wide_of_valid_input_is_the_summary_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = _run(capsys, "validate", "-f", str(CLI / "claims.yaml"), "-o", "wide")
    assert (code, out) == (0, "2 object(s) valid\n")


def test_classes_wide_lists_each_class_with_extended_resource_and_selector(
    capsys: pytest.CaptureFixture[str],
) -> None:
    outputs = _all_formats(capsys, "classes")
    items = json.loads(outputs["json"][1])["items"]
    assert list(yaml.safe_load_all(outputs["yaml"][1])) == items == driver_device_classes()
    rows = _rows(outputs["wide"][1])
    assert [(r["NAME"], r["EXTENDED RESOURCE"]) for r in rows] == [
        (c["metadata"]["name"], c["spec"].get("extendedResourceName", "")) for c in items
    ]
    assert rows[0]["SELECTORS"] == items[0]["spec"]["selectors"][0]["cel"]["expression"]


def test_migrate_wide_lists_what_it_would_write(capsys: pytest.CaptureFixture[str]) -> None:
    seed = FIXTURES / "seed000"
    outputs = _all_formats(capsys, "migrate", "-f", str(seed))
    assert {code for code, _ in outputs.values()} == {0}
    items = json.loads(outputs["json"][1])["items"]
    assert list(yaml.safe_load_all(outputs["yaml"][1])) == items
    assert [
        (r["KIND"], r["NAMESPACE"], r["NAME"], r["APIVERSION"]) for r in _rows(outputs["wide"][1])
    ] == [
        (
            o["kind"],
            o.get("metadata", {}).get("namespace", ""),
            o.get("metadata", {}).get("name", ""),  # the seed's first pod has no metadata
            o["apiVersion"],
        )
        for o in items
    ]


@pytest.mark.parametrize("command", ["allocate", "validate", "migrate", "classes"])
def test_every_data_command_offers_wide_in_its_help(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    help_text = capsys.readouterr().out
    (choices,) = {line.split()[1] for line in help_text.splitlines() if line.startswith("  -o {")}
    assert set(choices.strip("{},").split(",")) >= {"json", "yaml", "wide"}
    assert f"kubectl dra {command} " in help_text.split("examples:")[1]
    assert "-o wide" in help_text.split("examples:")[1]
    with pytest.raises(SystemExit) as info:
        main([command, "-o", "table"])
    assert info.value.code == 2
    assert "'wide'" in capsys.readouterr().err


def test_table_pads_columns_and_prints_none_for_empty_cells() -> None:
    table = Table(("NAME", "NODE", "MESSAGE"))
    table.add("a-long-name", "", "two\nlines")
    table.add("b", "node-1", "")
    assert table.render() == (
        "NAME          NODE     MESSAGE\n"
        "a-long-name   <none>   two lines\n"
        "b             node-1   <none>\n"
    )
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        table.add("x", "y")
