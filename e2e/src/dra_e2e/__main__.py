"""``python -m dra_e2e`` is ``e2e-cluster``."""

from dra_e2e.cli import main

main()
