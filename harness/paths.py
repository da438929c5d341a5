"""Where things live. Absolute paths only; nothing depends on the working directory.

A run directory::

    <output_dir>/<run_id>/                   default output_dir: ./runs (resolved to absolute at start)
    ├── summary.json                         the run report (SWE-bench keys + invalid_ids, error_reasons)
    ├── manifest.json                        what decided the results: config, images, checksums
    ├── harness.log                          JSON lines, one event each, instance id bound
    ├── .lock                                held (flock) by the one process writing the directory
    ├── .outcomes.jsonl                      this invocation's tasks as recorded (key, node, pins)
    ├── <model>.<run_id>.json, logs/         SWE-bench's layout (--swebench-output: harness.swebench.layout)
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

The state of one Docker engine's harness images (``$HARNESS_STATE_DIR``, default
``${XDG_STATE_HOME:-~/.local/state}/harness``), shared by every cache directory that uses
that engine (harness.imagecache)::

    <state>/engines/<engine id>/image-use.sqlite   when each image was last used, by which instances
    <state>/engines/<engine id>/leases/            one lease per live harness process (flock held)

The harness's own data (specs, bases, the demo set) is found by harness.resources,
never relative to this file or to the working directory.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import InputError

#: Instance ids and run ids name directories: letters, digits and ``_ . + -``, starting
#: with a letter or digit (so never ``.``, ``..``, hidden or option-like), at most 128.
SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")
MAX_ID_LENGTH = 128
#: Names the harness writes at the top of a run directory (beside the instance
#: directories): an instance id equal to one of them, in any case (a case-insensitive
#: file system folds them), would make its directory collide with the run's own file.
RUN_FILE_NAMES = frozenset({
    "summary.json", "manifest.json", "harness.log", ".lock", ".outcomes.jsonl",   # this module, batch, locks
    "report.html", "report.md",                                                   # harness.views.site
    "audit.json", "audit.md", "audit-predictions.jsonl",                          # harness audit
    "validity.json", "validity.md",                                               # harness validate
})
#: ``harness compare`` writes ``compare-<stem>.{json,md,html}`` into the run directory by default.
_RUN_FILE_PATTERN = re.compile(r"compare-.*\.(?:json|md|html)", re.IGNORECASE)


def id_problem(value: object) -> str | None:
    """Why ``value`` cannot name a directory, or None when it can."""
    if not isinstance(value, str) or not value:
        return "must be a non-empty string"
    if len(value) > MAX_ID_LENGTH:
        return f"is {len(value)} characters long, over the limit of {MAX_ID_LENGTH}"
    if not SAFE_ID.fullmatch(value):
        return ("may contain only letters, digits and . _ + - and must start with a letter or digit "
                f"(got {value[:60]!r})")
    return None


def instance_dir_problem(value: object) -> str | None:
    """Why ``value`` cannot be an instance id (it names a directory inside the run
    directory, beside the run's own files), or None when it can."""
    problem = id_problem(value)
    if problem:
        return problem
    folded = str(value).casefold()
    if folded in RUN_FILE_NAMES or _RUN_FILE_PATTERN.fullmatch(folded):
        return f"names one of the run directory's own files ({value!r}); such an id would overwrite it"
    return None


def safe_run_id(value: str) -> str:
    problem = id_problem(value)
    if problem:
        raise InputError(problem, field="--run-id")
    return value


def cache_root() -> Path:
    configured = os.environ.get("HARNESS_CACHE_DIR")
    return Path(configured).expanduser().resolve() if configured else Path.home() / ".cache" / "harness"


def state_root() -> Path:
    """Where the harness keeps per-engine state (image use, leases): one place whatever
    ``--cache-dir`` a run uses, because the images themselves are the engine's."""
    configured = os.environ.get("HARNESS_STATE_DIR")
    if configured:
        return Path(configured).expanduser().resolve()
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state") / "harness"


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @classmethod
    def create(cls, output_dir: Path, run_id: str) -> "RunPaths":
        base = Path(output_dir).expanduser().resolve()
        root = base / safe_run_id(run_id)
        if root.parent != base:
            raise InputError(f"run directory {root} is not inside {base}", field="--run-id")
        root.mkdir(parents=True, exist_ok=True)
        return cls(root)

    def inside(self, path: Path) -> Path:
        """``path`` if it lies inside the run directory (symlinks resolved), else InputError."""
        resolved = Path(path).resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise InputError(f"refusing to write {path}: outside the run directory {self.root}")
        return Path(path)

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
        problem = instance_dir_problem(instance_id)
        if problem:
            raise InputError(problem, record=str(instance_id)[:60], field="instance_id")
        base = self.root / instance_id
        return self.inside(base if attempt is None else base / f"attempt-{int(attempt)}")
