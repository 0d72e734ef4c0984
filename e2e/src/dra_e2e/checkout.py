"""Where this repository's files are: the harness is installed from the checkout (editable), and
drives the chart and the image builds that live beside it."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
