"""Shared fixtures. Engine tests use the real Docker engine (never a mock): when none
answers they fail with the reason, they do not skip."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def engine():
    from harness.engine.client import connect
    from harness.errors import EngineUnavailable
    try:
        client = connect()
    except EngineUnavailable as exc:
        pytest.fail(f"engine tests need a running Docker engine: {exc}", pytrace=False)
    yield client
    client.close()


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    """One cache for the whole session (and across sessions on one machine), so images,
    wheelhouses and exports are built once and shared by every test."""
    path = Path(os.environ.get("HARNESS_TEST_CACHE", Path.home() / ".cache" / "harness-tests"))
    path.mkdir(parents=True, exist_ok=True)
    return path


class HarnessRun:
    """Runs ``harness`` in-process and reads back what it wrote."""

    def __init__(self, output_dir: Path, cache: Path) -> None:
        self.output_dir = output_dir
        self.cache = cache

    def __call__(self, *args: str, run_id: str) -> "RunResult":
        from harness.cli import main
        code = main(["run", *args, "--run-id", run_id, "--output-dir", str(self.output_dir),
                     "--cache-dir", str(self.cache), "--quiet"])
        return RunResult(code, self.output_dir / run_id)


class RunResult:
    def __init__(self, exit_code: int, root: Path) -> None:
        self.exit_code = exit_code
        self.root = root

    @property
    def summary(self) -> dict:
        return json.loads((self.root / "summary.json").read_text())

    def report(self, instance_id: str) -> dict:
        return json.loads((self.root / instance_id / "report.json").read_text())

    def statuses(self) -> dict[str, tuple[str, str | None]]:
        out = {}
        for path in sorted(self.root.glob("*/report.json")):
            data = json.loads(path.read_text())
            out[data["instance_id"]] = (data["status"], data["error_reason"])
        return out


@pytest.fixture
def harness_run(tmp_path, cache_dir, engine) -> HarnessRun:
    return HarnessRun(tmp_path / "runs", cache_dir)


#: when this test session began: a container or volume made before it is no test's of this
#: session (an earlier session killed mid-test leaves its run's containers on the machine's
#: engine, with the same run ids; CI runs on the same machine, and its engine keeps them)
SESSION_STARTED = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=5)


def _created(obj) -> dt.datetime | None:
    text = obj.attrs.get("Created") or obj.attrs.get("CreatedAt") or ""
    # the engine writes nanoseconds and "Z"; fromisoformat of 3.11 takes microseconds at most
    text = re.sub(r"(\.\d{6})\d+", r"\1", text.replace("Z", "+00:00"))
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return None


def leftover_containers(client, *run_ids: str) -> list:
    """Containers and volumes the harness created in this test session that still exist — for
    the given run ids only (other tests, or other test sessions, may be running), or all of
    them. One whose creation time cannot be read counts."""
    from harness.engine.sandbox import LABEL_OWNER, LABEL_RUN
    filters = [f"{LABEL_RUN}={r}" for r in run_ids] or [f"{LABEL_OWNER}=harness"]
    found = []
    for label in filters:
        # ignore_removed: a container the run removes between listing and inspection is gone
        found += client.containers.list(all=True, filters={"label": label}, ignore_removed=True)
        found += client.volumes.list(filters={"label": label})
    return [obj for obj in found if (_created(obj) or SESSION_STARTED) >= SESSION_STARTED]


@pytest.fixture
def local_registry(tmp_path):
    """A real registry (Debian's docker-registry) on 127.0.0.1 with its own storage, for
    one test. Yields ``127.0.0.1:<port>``. (tests.fixtures.services.start_registry)"""
    from tests.fixtures.services import start_registry
    with start_registry(tmp_path / "registry-storage") as address:
        yield address


@pytest.fixture(scope="session")
def session_registry(tmp_path_factory):
    """One registry for the session (same as ``local_registry``, shared by tests that
    seed it once, e.g. with the demo set's base and environment images)."""
    from tests.fixtures.services import start_registry
    with start_registry(tmp_path_factory.mktemp("session-registry") / "storage") as address:
        yield address
