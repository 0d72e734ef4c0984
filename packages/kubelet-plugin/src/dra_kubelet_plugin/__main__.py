"""``python -m dra_kubelet_plugin``: same as the ``dra-kubelet-plugin`` command."""

import sys

from dra_kubelet_plugin.cli import main

sys.exit(main())
