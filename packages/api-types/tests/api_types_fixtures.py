"""Where the test data of ``dra-api-types`` lies: the one copy, which the suites of other packages
(``kubectl-dra``) read through this module (the root ``pythonpath`` lists this folder) rather than
through the repository's layout."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# NVIDIA's demo specs (k8s-dra-driver-gpu ``demo/specs``), one file per demo.
DEMO_SPECS = FIXTURES / "nvidia-demo-specs"
# The seed article's walkthrough objects.
SEED = FIXTURES / "seed"
