"""Models validate through the rules dra_api_types.validation installs, however imported."""

from __future__ import annotations

import subprocess
import sys


def test_importing_one_model_module_still_validates() -> None:
    code = (
        "from dra_api_types.nvidia_v1beta1 import ComputeDomain\n"
        "from dra_api_types.resource_v1 import DeviceClass\n"
        "from dra_api_types.errors import ValidationError\n"
        "for check in (\n"
        "    lambda: DeviceClass.from_dict({'metadata': {'name': 'Bad_Name'}}, validate=True),\n"
        "    lambda: ComputeDomain.from_dict({'metadata': {'name': 'cd'}}).validate(),\n"
        "):\n"
        "    try:\n"
        "        check()\n"
        "    except ValidationError as exc:\n"
        "        print(exc.path)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.split() == ["metadata.name", "spec.channel"]
