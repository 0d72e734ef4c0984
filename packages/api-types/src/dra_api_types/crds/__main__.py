"""Regenerate the checked-in CRD manifests: ``python -m dra_api_types.crds [DIR]``."""

from __future__ import annotations

import sys
from pathlib import Path

from . import CRD_DIRECTORY, write_crds


def main(argv: list[str]) -> int:
    """Write the manifests into the given directory (default: this package's crds/)."""
    directory = Path(argv[0]) if argv else CRD_DIRECTORY
    for path in write_crds(directory):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
