"""``python -m dra_nvlib``: see :mod:`dra_nvlib.cli`."""

from dra_nvlib.cli import main

main()
