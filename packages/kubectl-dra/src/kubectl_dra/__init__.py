"""``kubectl dra``: allocate offline, explain, validate and migrate DRA manifests.

Example::

    from kubectl_dra import main

    exit_code = main(["validate", "-f", "manifests/"])   # as ``kubectl dra validate -f manifests/``
"""

from .cli import main

__all__ = ["main"]
