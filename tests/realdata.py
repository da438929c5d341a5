"""Where the published SWE-bench data is for the tests that grade real instances.

``../shared/swebench`` beside the checkout (or ``$HARNESS_SWEBENCH_DATA``) holds the Lite
and Verified records and ``repos/``, shallow bare repositories with every base commit of
nine repositories (README there). CI has it. Elsewhere, without it, these tests skip and
say why; under CI (``$CI`` set) its absence is a failure, never a skip.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT

SHARED = Path(os.environ.get("HARNESS_SWEBENCH_DATA", PROJECT_ROOT.parent / "shared" / "swebench"))
REPOS = Path(os.environ.get("HARNESS_REAL_REPOS", SHARED / "repos"))
LITE = SHARED / "lite-test.jsonl"
VERIFIED = SHARED / "verified-test.jsonl"


def missing() -> str | None:
    """Why the real-instance tests cannot run here, or None."""
    for path in (LITE, REPOS):
        if not path.exists():
            return f"{path} is absent (set HARNESS_SWEBENCH_DATA / HARNESS_REAL_REPOS)"
    return None


def require() -> None:
    """Skip (outside CI) or fail (in CI) when the data is absent."""
    why = missing()
    if why is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must grade real instances, but {why}", pytrace=False)
    pytest.skip(why)


@lru_cache(maxsize=2)
def _records(path: Path) -> dict[str, dict]:
    return {r["instance_id"]: r for r in map(json.loads, path.read_text().splitlines()) if r}


def record(instance_id: str, path: Path = LITE) -> dict:
    return dict(_records(path)[instance_id])


def write_instances(target: Path, ids: list[str], path: Path = LITE) -> Path:
    target.write_text("".join(json.dumps(record(i, path)) + "\n" for i in ids))
    return target


def repo_file(repo: str, commit: str, file: str) -> str:
    """``file`` of ``repo`` at ``commit``, read through the harness's own repository access
    (the shared copies lack ``refs/``, which git alone refuses)."""
    from harness.inputs.repos import RepoResolver
    resolver = RepoResolver(PROJECT_ROOT / ".cache" / "tests", REPOS, allow_clone=False)
    data = resolver.open(repo).read_blob(commit, file)
    if data is None:
        raise FileNotFoundError(f"{repo}@{commit[:12]}:{file}")
    return data.decode()
