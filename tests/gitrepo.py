"""Small git repositories made by tests: one ``git`` call, and the diff a file's new text makes."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(repo: Path, *args: str) -> str:
    """``git -C repo ARGS`` with a fixed identity; its stdout (a failure raises)."""
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout


def diff_with(repo: Path, path: str, text: str) -> str:
    """The diff that writing ``text`` to the tracked file ``path`` makes; the file is put back."""
    original = (repo / path).read_text()
    (repo / path).write_text(text)
    try:
        return git(repo, "diff", "--", path)
    finally:
        (repo / path).write_text(original)
