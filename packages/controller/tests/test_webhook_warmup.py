"""The webhook's warm-up: every sample is a review the webhook admits, and reviewing them
builds what the first real reviews would otherwise build (the CEL parser, the config
validators)."""

from __future__ import annotations

import subprocess
import sys

from dra_api_types.nvidia_v1beta1 import OPAQUE_KINDS
from dra_controller.webhook.admission import DEFAULT_GATES, review
from dra_controller.webhook.warmup import SAMPLE_SELECTOR, warm_up, warm_up_reviews


def _kinds(sample: dict[str, object]) -> set[str]:
    request = sample["request"]
    assert isinstance(request, dict)
    configs = request["object"]["spec"]["devices"].get("config") or []
    return {c["opaque"]["parameters"]["kind"] for c in configs}


def test_samples_cover_a_selector_and_every_config_kind_and_are_admitted() -> None:
    samples = warm_up_reviews()
    kinds = set().union(*(_kinds(s) for s in samples))
    assert kinds == set(OPAQUE_KINDS)
    selectors = [
        sel["cel"]["expression"]
        for s in samples
        for r in s["request"]["object"]["spec"]["devices"]["requests"]
        for sel in r["exactly"].get("selectors") or []
    ]
    assert selectors == [SAMPLE_SELECTOR]
    for sample in samples:
        response = review(sample, gates=DEFAULT_GATES)["response"]
        # Admitted without a warning: each sample runs the whole path, and none is noise.
        assert response["allowed"] is True, response
        assert "warnings" not in response
    assert warm_up(DEFAULT_GATES) == len(samples)


def test_warm_up_builds_the_cel_parser_and_the_config_validators() -> None:
    # A fresh interpreter: in this one other tests may have built them already.
    probe = (
        "import dra_cel.syntax as syntax\n"
        "from dra_api_types.nvidia_v1beta1 import OPAQUE_KINDS\n"
        "from dra_controller.webhook.warmup import warm_up\n"
        "def built():\n"
        "    return (syntax._PARSER is not None,\n"
        "            sorted(k for k, c in OPAQUE_KINDS.items() if c.__pydantic_complete__))\n"
        "print(built())\n"
        "warm_up({})\n"
        "print(built())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout.splitlines()
    assert out[0] == "(False, [])"
    assert out[1] == repr((True, sorted(OPAQUE_KINDS)))
