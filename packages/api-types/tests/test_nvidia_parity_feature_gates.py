# ruff: noqa: E501  (table rows are kept one per line)
"""NVIDIA's feature-gate tables, decided by ours.

Facts from NVIDIA's driver at ``main``: ``pkg/featuregates`` (the gates' defaults and
maturity, ``ValidateFeatureGates`` and its ``TestValidateFeatureGates`` table) and
component-base's flag parsing it uses (``Gate=<strconv.ParseBool value>`` items, unknown
gates refused, ``AllAlpha``/``AllBeta``).
"""

from __future__ import annotations

import pytest
from dra_api_types.errors import FeatureGateError
from dra_api_types.nvidia_gates import GATES, Maturity, Origin, parse_feature_gates

# NVIDIA's defaultFeatureGates: name -> (default, maturity).
NVIDIA_DEFAULTS = {
    "TimeSlicingSettings": (False, Maturity.ALPHA),
    "MPSSupport": (False, Maturity.ALPHA),
    "IMEXDaemonsWithDNSNames": (True, Maturity.BETA),
    "PassthroughSupport": (False, Maturity.ALPHA),
    "DynamicMIG": (False, Maturity.ALPHA),
    "NVMLDeviceHealthCheck": (False, Maturity.ALPHA),
    "ComputeDomainCliques": (True, Maturity.BETA),
    "CrashOnNVLinkFabricErrors": (True, Maturity.BETA),
    "DeviceMetadata": (False, Maturity.ALPHA),
    "FabricManagerPartitioning": (False, Maturity.ALPHA),
    "HostManagedIMEXDaemon": (False, Maturity.ALPHA),
    "DRAListTypeAttributes": (False, Maturity.ALPHA),
    "ConsumableShares": (False, Maturity.ALPHA),
}


@pytest.mark.parametrize(("name", "expected"), sorted(NVIDIA_DEFAULTS.items()))
def test_each_nvidia_gate_has_nvidias_default_and_maturity(
    name: str, expected: tuple[bool, Maturity]
) -> None:
    (gate,) = [g for g in GATES if g.name == name]
    assert (gate.default, gate.maturity, gate.origin) == (*expected, Origin.NVIDIA)
    assert parse_feature_gates("")[0][name] is expected[0]


def test_contextual_logging_is_on_as_nvidias_override_sets_it() -> None:
    # newFeatureGates sets component-base's ContextualLogging to true.
    assert parse_feature_gates("")[0]["ContextualLogging"] is True


# TestValidateFeatureGates: gates set -> accepted (None) or the two gates the refusal names.
VALIDATE = [
    pytest.param("", None, id="No features enabled"),
    pytest.param("ComputeDomainCliques=true,IMEXDaemonsWithDNSNames=true", None, id="CDCliques enabled with DNSNames enabled"),
    pytest.param("ComputeDomainCliques=true,IMEXDaemonsWithDNSNames=false", ("ComputeDomainCliques", "IMEXDaemonsWithDNSNames"), id="CDCliques enabled without DNSNames"),
    pytest.param("IMEXDaemonsWithDNSNames=true,ComputeDomainCliques=false", None, id="DNSNames enabled without CDCliques"),
    pytest.param("DynamicMIG=true,PassthroughSupport=true", ("DynamicMIG", "PassthroughSupport"), id="DynamicMIG enabled with PassthroughSupport"),
    pytest.param("DynamicMIG=true,NVMLDeviceHealthCheck=true", ("DynamicMIG", "NVMLDeviceHealthCheck"), id="DynamicMIG enabled with NVMLDeviceHealthCheck"),
    pytest.param("DynamicMIG=true,MPSSupport=true", ("DynamicMIG", "MPSSupport"), id="DynamicMIG enabled with MPSSupport"),
    pytest.param("DynamicMIG=true,PassthroughSupport=false,NVMLDeviceHealthCheck=false,MPSSupport=false", None, id="Only DynamicMIG enabled"),
    pytest.param("PassthroughSupport=true,NVMLDeviceHealthCheck=true", ("PassthroughSupport", "NVMLDeviceHealthCheck"), id="PassthroughSupport enabled with NVMLDeviceHealthCheck"),
    pytest.param("PassthroughSupport=true,DynamicMIG=false,NVMLDeviceHealthCheck=false,DeviceMetadata=false", None, id="Only PassthroughSupport enabled"),
    pytest.param("DeviceMetadata=true,PassthroughSupport=false", ("DeviceMetadata", "PassthroughSupport"), id="DeviceMetadata enabled without PassthroughSupport"),
    pytest.param("DeviceMetadata=true,PassthroughSupport=true", None, id="DeviceMetadata enabled with PassthroughSupport"),
    pytest.param("FabricManagerPartitioning=true,PassthroughSupport=true", None, id="FabricManagerPartitioning enabled with PassthroughSupport"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "refused"), VALIDATE)
def test_nvidias_validate_feature_gates_table(text: str, refused: tuple[str, str] | None) -> None:
    if refused is None:
        gates, _ = parse_feature_gates(text)
        for item in filter(None, text.split(",")):
            name, _, value = item.partition("=")
            assert gates[name] is (value == "true")
        return
    with pytest.raises(FeatureGateError) as raised:
        parse_feature_gates(text)
    assert refused[0] in str(raised.value)
    assert refused[1] in str(raised.value)


@pytest.mark.parametrize(
    ("text", "on"),
    [
        # strconv.ParseBool's spellings, which component-base's flag takes.
        *((f"TimeSlicingSettings={v}", True) for v in ("1", "t", "T", "TRUE", "true", "True")),
        *((f"IMEXDaemonsWithDNSNames={v},ComputeDomainCliques=false", False) for v in ("0", "f", "F", "FALSE", "false", "False")),
        # Items are trimmed and empty ones skipped.
        (" TimeSlicingSettings = true ,, ", True),
        # The last setting of a gate wins.
        ("TimeSlicingSettings=true,TimeSlicingSettings=false", False),
    ],
)  # fmt: skip
def test_values_are_read_as_component_base_reads_them(text: str, on: bool) -> None:
    gates, explicit = parse_feature_gates(text)
    name = "TimeSlicingSettings" if "TimeSlicing" in text else "IMEXDaemonsWithDNSNames"
    assert gates[name] is on
    assert name in explicit


@pytest.mark.parametrize(
    "text",
    [
        "TimeSlicingSettings",  # component-base: missing bool value
        "TimeSlicingSettings=yes",  # not a ParseBool spelling
        "TimeSlicingSettings=tRuE",
        "NonExistentFeature=true",  # unrecognized feature gate
        "Invalid1=true,Invalid2=false",
        "TimeSlicingSettings=true,NonExistentFeature=false",  # mixed: refused entirely
    ],
)
def test_what_component_base_refuses_is_refused(text: str) -> None:
    with pytest.raises(FeatureGateError, match=r"^--feature-gates: "):
        parse_feature_gates(text)


def test_alpha_and_beta_gates_can_be_switched_both_ways() -> None:
    # TestFeatureGateLifecycle: alpha off by default and changeable, beta on and changeable.
    gates, _ = parse_feature_gates("TimeSlicingSettings=true,CrashOnNVLinkFabricErrors=false")
    assert gates["TimeSlicingSettings"] is True
    assert gates["CrashOnNVLinkFabricErrors"] is False
    assert gates["MPSSupport"] is False
    assert gates["ComputeDomainCliques"] is True
