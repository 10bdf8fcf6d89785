"""Puts the checkout's root on ``sys.path``, so a bench script run as a file can use the fake
servers in ``tests/fakes`` (``hygieia bench`` runs each script as ``python bench/NAME.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
