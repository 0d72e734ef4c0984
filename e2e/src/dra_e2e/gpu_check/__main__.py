"""``python -m dra_e2e.gpu_check``."""

import sys

from .cli import main

sys.exit(main())
