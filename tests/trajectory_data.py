"""Where the shared agent trajectories are for the tests that read them.

``../shared/trajectories/mini-swe-agent-1.15.0__gemini-3-pro-preview`` beside the checkout (or
``$HARNESS_TRAJECTORY_DATA``) holds 62 mini-swe-agent 1.15.0 trajectories of SWE-bench Verified instances,
that run's reports, claims and predictions (README there). Without it these tests skip and say why; under
CI (``$CI`` set) its absence is a failure, never a skip (the same rule as tests/realdata.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT

TRAJECTORIES = Path(os.environ.get(
    "HARNESS_TRAJECTORY_DATA",
    PROJECT_ROOT.parent / "shared" / "trajectories" / "mini-swe-agent-1.15.0__gemini-3-pro-preview"))
TRAJS = TRAJECTORIES / "trajs"
PREDICTIONS = TRAJECTORIES / "predictions.jsonl"


def require() -> None:
    """Skip (outside CI) or fail (in CI) when the trajectories are absent."""
    if TRAJS.is_dir():
        return
    why = f"{TRAJS} is absent (set HARNESS_TRAJECTORY_DATA)"
    if os.environ.get("CI"):
        pytest.fail(f"CI must read the shared trajectories, but {why}", pytrace=False)
    pytest.skip(why)
