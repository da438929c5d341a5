"""The harness's version and the commit it was built from (``harness --version``, run
manifests).

The version is ``harness.__version__`` (written once, in harness/_version.py; pyproject.toml reads it there). The
commit, first found of:

1. **a checkout**: the package runs from a source tree (an editable install, or the
   checkout on ``sys.path``) — ``git rev-parse HEAD`` of the directory holding
   ``harness/``, when that directory is the top of a git work tree and holds the
   project's ``pyproject.toml`` (a virtual environment that merely lies inside some
   repository never lends that repository's commit). ``-dirty`` is appended when tracked
   files the package is made of differ from HEAD;
2. **recorded at build time**: ``harness/_build_info.json``, written into wheels and
   sdists by setup.py (from the checkout's git, or ``$HARNESS_BUILD_COMMIT`` where the
   build has no git, as in the compose image's build stage);
3. unknown (None).
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness._version import __version__

BUILD_INFO_FILE = "_build_info.json"
#: What the package is made of: uncommitted changes here make a checkout's commit "-dirty".
PACKAGED_PATHS = ("harness", "images", "instances", "pyproject.toml", "setup.py")


@dataclass(frozen=True)
class BuildInfo:
    version: str
    commit: str | None
    origin: str  # "checkout <dir>", "recorded at build (<source>)" or "unknown"

    def describe(self) -> str:
        """``harness 0.1.0 (commit 1a2b…, checkout /src)``: the ``--version`` line."""
        if self.commit is None:
            return f"harness {self.version} (commit unknown)"
        return f"harness {self.version} (commit {self.commit}, {self.origin})"


def _package_dir() -> Path:
    return Path(__file__).resolve().parent


def _git(root: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def checkout_commit(root: Path) -> str | None:
    """HEAD of the harness checkout at ``root`` (``-dirty`` when packaged files changed),
    or None when ``root`` is not the top of a git work tree holding the project."""
    root = Path(root).resolve()
    if not (root / "pyproject.toml").is_file() or not (root / "harness" / "__init__.py").is_file():
        return None
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != root:
        return None
    head = _git(root, "rev-parse", "--verify", "HEAD^{commit}")
    if not head:
        return None
    dirty = _git(root, "status", "--porcelain", "--untracked-files=no", "--", *PACKAGED_PATHS)
    return head + ("-dirty" if dirty else "")


def recorded_commit(package_dir: Path | None = None) -> tuple[str, str] | None:
    """(commit, source) recorded at build time, or None."""
    path = (package_dir or _package_dir()) / BUILD_INFO_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    commit = data.get("commit") if isinstance(data, dict) else None
    if not isinstance(commit, str) or not commit.strip():
        return None
    return commit.strip(), str(data.get("source") or "build")


@functools.lru_cache(maxsize=1)
def build_info() -> BuildInfo:
    """This harness's version and commit (computed once per process)."""
    package_dir = _package_dir()
    commit = checkout_commit(package_dir.parent)
    if commit is not None:
        return BuildInfo(__version__, commit, f"checkout {package_dir.parent}")
    recorded = recorded_commit(package_dir)
    if recorded is not None:
        return BuildInfo(__version__, recorded[0], f"recorded at build ({recorded[1]})")
    return BuildInfo(__version__, None, "unknown")



class VersionAction(argparse.Action):
    """``--version`` for argparse: the line is computed only when asked, so git is not run
    on every command."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="print the version and the commit, then exit"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(build_info().describe())  # stdout, as argparse's own "version" action does
        parser.exit()
