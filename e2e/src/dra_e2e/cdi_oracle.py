"""The CDI library as a test oracle for the CDI specs our plugins write (``gobuild/cdi*``).

Container runtimes (containerd, CRI-O) load CDI specs with ``tags.cncf.io/container-device-
interface``: a spec the library refuses is skipped whole, and a container that names one of
its devices fails with "unresolvable CDI devices". Two small programs built from the Go module
proxy into the binary cache, like the cluster components, check a set of spec files:

- ``cdi-validate`` (``gobuild/cdi``, the library at ``CDI_VERSION``): reads each file with the
  library (strict decoding and its semantic validation), loads them all into one spec cache
  and injects every device of the cache, and every name given, alone into an empty OCI spec;
- ``cdi-schema-validate`` (``gobuild/cdi-schema``): each file against the CDI specification's
  JSON schema (the library's embedded one, at ``CDI_SCHEMA_VERSION``).

:func:`validate_specs` runs both and raises :class:`CdiSpecRefusedError` with the library's
messages.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dra_e2e.build import GOBUILD_DIR, GoComponent, Progress, build_component
from dra_e2e.errors import E2EError
from dra_e2e.versions import CDI_SCHEMA_VERSION, CDI_VERSION

__all__ = [
    "CDI_SCHEMA_VALIDATE",
    "CDI_VALIDATE",
    "CdiOracle",
    "CdiSpecRefusedError",
    "build_cdi_oracle",
    "validate_specs",
]

CDI_VALIDATE = GoComponent(
    name="cdi-validate",
    version=CDI_VERSION,
    packages=(".",),
    outputs=("cdi-validate",),
    source_dir=GOBUILD_DIR / "cdi",
)
CDI_SCHEMA_VALIDATE = GoComponent(
    name="cdi-schema-validate",
    version=CDI_SCHEMA_VERSION,
    packages=(".",),
    outputs=("cdi-schema-validate",),
    source_dir=GOBUILD_DIR / "cdi-schema",
)


class CdiSpecRefusedError(E2EError):
    """The CDI library refused a spec, or could not inject a device; the message holds its
    own words."""


@dataclass(frozen=True)
class CdiOracle:
    """The built programs."""

    validate: Path
    schema: Path


def build_cdi_oracle(*, progress: Progress, root: Path | None = None) -> CdiOracle:
    """Both programs from the cache, built first when missing (under a minute cold)."""
    validate = build_component(CDI_VALIDATE, progress=progress, root=root)
    schema = build_component(CDI_SCHEMA_VALIDATE, progress=progress, root=root)
    return CdiOracle(validate=validate / "cdi-validate", schema=schema / "cdi-schema-validate")


def validate_specs(
    oracle: CdiOracle,
    specs: Sequence[Path],
    *,
    inject: Sequence[str] = (),
    timeout_s: float = 60,
) -> list[str]:
    """Check ``specs`` as a runtime loads them; return the cache's qualified device names.

    ``inject``: the CDI device IDs a plugin handed to the kubelet, each of which must
    resolve in the cache and inject.

    Raises:
        CdiSpecRefusedError: no spec given, the schema or the library refused one, or a device
            did not inject (the library's messages, one a line).
    """
    if not specs:
        raise CdiSpecRefusedError("no CDI spec to validate")
    files = [str(p) for p in specs]
    schema = subprocess.run(
        [str(oracle.schema), *files], capture_output=True, text=True, timeout=timeout_s, check=False
    )
    if schema.returncode != 0:
        raise CdiSpecRefusedError(f"CDI JSON schema refused:\n{schema.stderr.strip()}")
    args = [arg for name in inject for arg in ("--inject", name)]
    cache = subprocess.run(
        [str(oracle.validate), *args, *files],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if cache.returncode != 0:
        raise CdiSpecRefusedError(f"CDI library refused:\n{cache.stderr.strip()}")
    devices: list[str] = json.loads(cache.stdout)["devices"]
    return devices
