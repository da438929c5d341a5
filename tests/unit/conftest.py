"""Fixtures of the unit tests of ``benchmarks/`` (its helpers are scripts' modules, not a package)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def M():
    """``benchmarks/_measure.py``, imported from its directory."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import _measure
    finally:
        sys.path.remove(str(BENCHMARKS))
    return _measure
