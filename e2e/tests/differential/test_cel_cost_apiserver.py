"""``kubectl dra validate`` against the real API server's verdict on CEL selectors.

Each selector goes into a DeviceClass (and a few into a ResourceClaim's request) created with
``--dry-run=server``: the API server validates it as a new object, compiling the selector and
comparing its estimated cost with ``CELSelectorExpressionMaxCost``, and stores nothing. The
API server's answer is the oracle: accepted, refused as too expensive (``Forbidden: too
complex, exceeds cost limit``) or refused as not compiling. ``kubectl dra validate`` must give
the same verdict on the same object, with the same field path and message.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from dra_allocator.inputs import Document
from dra_e2e.errors import KubectlError
from dra_e2e.handle import ClusterHandle
from kubectl_dra.validation import TOO_COMPLEX, validate_documents

pytestmark = pytest.mark.e2e

_NESTED = (
    "device.attributes.all(d, device.attributes[d].all(k, "
    "device.attributes.all(d2, device.attributes[d2].all(k2, true))))"
)

# (selector, what the API server is expected to say: "ok", "too complex", "compile").
# The expectation only documents the case; the API server's actual answer is compared.
SELECTORS: list[tuple[str, str]] = [
    ('device.driver == "gpu.nvidia.com"', "ok"),
    ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", "ok"),
    ("device.attributes.all(d, device.attributes[d].all(k, device.attributes[d][k] == 1))", "ok"),
    (_NESTED, "too complex"),
    # 7N + 12: N = 142855 is 999,997, just under the limit; N = 142856 is 1,000,004.
    ("lists.range(142855).exists(i, i == 5)", "ok"),
    ("lists.range(142856).exists(i, i == 5)", "too complex"),
    # Strings of a literal list have no declared size: indexOf is priced as unbounded.
    ('["a", "b"].indexOf("a") >= 0', "too complex"),
    ('["a", "b"].exists(s, s == "a")', "ok"),
    ("device.attributes['gpu.nvidia.com'].productName.matches('^NVIDIA (A|H)100')", "ok"),
    # A regex built at run time has no size bound: unbounded.
    (
        "device.attributes.exists(d, device.attributes[d].exists(k, string(k).matches('x' + d)))",
        "too complex",
    ),
    (
        "device.attributes.all(d, device.attributes[d].all(k, "
        "device.attributes.all(d2, device.attributes[d2].all(k2, "
        "device.attributes[d2][k2] == device.attributes[d][k]))))",
        "too complex",
    ),
    ("lists.range(300).all(i, lists.range(300).all(j, i != j || i == j))", "ok"),  # 904,812
    ("lists.range(320).all(i, lists.range(320).all(j, i != j || i == j))", "too complex"),
    # join of a sorted split: the element strings have no declared size.
    ('device.driver.split(".").sort().join("/").size() > 0', "too complex"),
    ("!!device.driver == 'gpu.nvidia.com'", "ok"),
    ("device.allowMultipleAllocations", "ok"),
    ("device.driver == ", "compile"),
    ("device.attributes['gpu.nvidia.com'].index + 'x' == 1", "compile"),
]


def _class(i: int, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": f"cel-cost-{i}"},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def _claim(i: int, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"cel-cost-{i}", "namespace": "default"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.example.com",
                            "selectors": [{"cel": {"expression": expression}}],
                        },
                    }
                ]
            }
        },
    }


def _api_server_says(cluster: ClusterHandle, obj: dict[str, Any]) -> str:
    """``""`` when the API server accepts the object, else its error text."""
    try:
        cluster.kubectl(
            "create", "--dry-run=server", "-o", "name", "-f", "-", input_text=json.dumps(obj)
        )
    except KubectlError as exc:
        return exc.stderr.strip()
    return ""


def _verdict(message: str) -> str:
    if not message:
        return "ok"
    if TOO_COMPLEX in message:
        return "too complex"
    if "compil" in message or "no matching overload" in message:
        return "compile"
    return f"other: {message}"


def test_validate_gives_the_api_servers_verdict_on_selectors(e2e_cluster: ClusterHandle) -> None:
    objects = [_class(i, expr) for i, (expr, _) in enumerate(SELECTORS)]
    # A claim's selectors are checked the same way, under their own field path.
    objects += [_claim(i, SELECTORS[i][0]) for i in (0, 3, 6)]
    mismatches: list[str] = []
    verdicts: list[str] = []
    for obj in objects:
        theirs = _api_server_says(e2e_cluster, obj)
        verdicts.append(_verdict(theirs))
        result = validate_documents([Document("apiserver", 0, obj)])
        # Warnings (a DeviceClass the input lacks) are ours alone: the API server judges errors.
        errors = [f for f in result.findings if not f.warning]
        ours = "; ".join(f"{f.path}: {f.message}" for f in errors)
        name = f"{obj['kind']} {obj['metadata']['name']}"
        if _verdict(theirs) != _verdict(ours):
            mismatches.append(
                f"{name}: API server: {theirs or 'accepted'}; validate: {ours or 'valid'}"
            )
        elif _verdict(theirs) == "too complex":
            # Same field path and message; ours adds the estimate in parentheses.
            assert f"{errors[0].path}: {TOO_COMPLEX}" in theirs, (name, theirs, ours)
    assert not mismatches, "\n".join(mismatches)
    # The API server said what each case documents (the cases cover every verdict).
    assert verdicts[: len(SELECTORS)] == [want for _, want in SELECTORS]
