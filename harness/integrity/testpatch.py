"""The test patch, applied on the host over the pristine files it touches.

The result (every file the test patch leaves, with its mode, and the files it deletes)
goes into the sandbox as root-owned files; the test patch itself never does, so the
code under test cannot read which tests are graded from it. ``git apply`` runs in a
throw-away directory holding only the pristine versions of the touched files.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness.errors import TestPatchApplyFailed
from harness.patches import PatchFiles, unsafe_path_reason

PristineSource = Callable[[str], "tuple[bytes, int] | None"]


@dataclass
class TestPatchResult:
    """Files after the test patch (path -> (bytes, mode)) and the paths it deleted."""

    __test__ = False

    files: dict[str, tuple[bytes, int]]
    deleted: list[str]


def apply_test_patch(test_patch: str, touched: PatchFiles, pristine: PristineSource) -> TestPatchResult:
    """Raises TestPatchApplyFailed (origin instance) when it does not apply."""
    for path in touched.all:
        reason = unsafe_path_reason(path)
        if reason:
            raise TestPatchApplyFailed(f"the test patch names an unusable path: {reason}")
    with tempfile.TemporaryDirectory(prefix="harness-testpatch-") as tmp:
        root = Path(tmp) / "tree"
        root.mkdir()
        for path in touched.all:
            found = pristine(path)
            if found is None:
                continue
            data, mode = found
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            os.chmod(target, 0o755 if mode & 0o111 else 0o644)
        patch_file = Path(tmp) / "test.diff"
        patch_file.write_bytes(test_patch.encode("utf-8", "surrogateescape"))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1", "HOME": tmp,
               "GIT_CEILING_DIRECTORIES": tmp, "LC_ALL": "C"}
        proc = subprocess.run(["git", "apply", "--verbose", "--whitespace=nowarn", str(patch_file)], cwd=root,
                              env=env, capture_output=True, text=True, errors="replace")
        if proc.returncode != 0:
            raise TestPatchApplyFailed(f"test patch does not apply: {(proc.stdout + proc.stderr)[-1500:]}")
        files, deleted = {}, []
        for path in touched.all:
            target = root / path
            if target.is_file() and not target.is_symlink():
                files[path] = (target.read_bytes(), 0o755 if os.stat(target).st_mode & 0o111 else 0o644)
            elif not target.exists():
                deleted.append(path)
        return TestPatchResult(files, sorted(deleted))
