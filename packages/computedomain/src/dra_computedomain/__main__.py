"""``python -m dra_computedomain`` runs the controller."""

from .controller_cli import main

raise SystemExit(main())
