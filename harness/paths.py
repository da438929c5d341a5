"""Where things live. Absolute paths only; nothing depends on the working directory.

A run directory::

    <output_dir>/<run_id>/                   default output_dir: ./runs (resolved to absolute at start)
    ├── summary.json                         the run report (SWE-bench keys + invalid_ids, error_reasons)
    ├── manifest.json                        what decided the results: config, images, checksums
    ├── harness.log                          JSON lines, one event each, instance id bound
    ├── .lock                                held (flock) by the one process writing the directory
    ├── .outcomes.jsonl                      this invocation's tasks as recorded (key, node, pins)
    └── <instance_id>/                       (<instance_id>/attempt-<n>/ when predictions carry attempts)
        ├── report.json                      verdict, tests_status, integrity, timings, image, commands
        ├── patch.diff                       the model patch exactly as graded
        ├── commands.json                    every command run in the sandbox, in order, with exit codes
        ├── test_output.txt                  raw output of the test command (capped)
        └── results.xml                      the runner's JUnit XML, when it wrote one

The cache directory (``$HARNESS_CACHE_DIR``, default ``~/.cache/harness``)::

    <cache>/repos/OWNER__NAME.git            bare clones made when a repository was not given locally
    <cache>/demo-repos/OWNER__NAME           the demo set's repositories, built from instances/demo
    <cache>/exports/<tree_sha>/              one-commit exports of base commits
    <cache>/wheelhouse/<python>-<hash>/      locked wheelhouses (see harness.wheelhouse)
    <cache>/locks/                           inter-process build locks

The harness's own data (specs, bases, the demo set) is found by harness.resources,
never relative to this file or to the working directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def cache_root() -> Path:
    configured = os.environ.get("HARNESS_CACHE_DIR")
    return Path(configured).expanduser().resolve() if configured else Path.home() / ".cache" / "harness"


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @classmethod
    def create(cls, output_dir: Path, run_id: str) -> "RunPaths":
        root = Path(output_dir).expanduser().resolve() / run_id
        root.mkdir(parents=True, exist_ok=True)
        return cls(root)

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def log(self) -> Path:
        return self.root / "harness.log"

    def instance_dir(self, instance_id: str, attempt: int | None = None) -> Path:
        base = self.root / instance_id
        return base if attempt is None else base / f"attempt-{attempt}"
