"""The linter and the type checker, configured in pyproject.toml ([tool.ruff], [tool.mypy]),
run as part of the suite so that `bash scripts/test.sh` (and CI) fails on what they find.

Both run from the virtual environment running the tests (scripts/setup.sh installs them with
the test extras), in the checkout's root, where their configuration and caches (.cache/) are.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    executable = BIN / tool
    assert executable.is_file(), f"{executable} is missing: install the test extras (bash scripts/setup.sh)"
    return subprocess.run([str(executable), *args], cwd=ROOT, capture_output=True, text=True, timeout=1800)


def test_ruff_finds_nothing():
    proc = _run("ruff", "check", "--no-fix", "--output-format", "concise")
    assert proc.returncode == 0, f"ruff check (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"


def test_mypy_finds_nothing_in_the_harness_package():
    proc = _run("mypy")
    assert proc.returncode == 0, f"mypy (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"
    assert "Success" in proc.stdout, proc.stdout
