"""Where things live. Absolute paths only; nothing depends on the working directory.

A run directory::

    <output_dir>/<run_id>/                   default output_dir: ./runs (resolved to absolute at start)
    ├── summary.json                         the run report (SWE-bench keys + invalid_ids, error_reasons)
    ├── manifest.json                        what decided the results: config, images, checksums
    ├── harness.log                          JSON lines, one event each, instance id bound
    ├── .lock                                held (flock) by the one process writing the directory
    ├── .outcomes.jsonl                      this invocation's tasks as recorded (key, node, pins)
    ├── report.html, report.md               the run's pages (harness.views.site)
    ├── audit.json, audit.md, audit-predictions.jsonl   `harness audit`
    ├── validity.json, validity.md           `harness validate` (in the validation directory)
    ├── <model>.<run_id>.json, logs/         SWE-bench's layout (--swebench-output: harness.swebench.layout)
    ├── solve.json                           `harness solve`: scaffold, model, budgets, totals (harness.run.solve)
    ├── predictions.jsonl                    `harness solve`: one SWE-bench prediction per attempt
    └── <instance_id>/                       (<instance_id>/attempt-<n>/ when predictions carry attempts)
        ├── report.json                      verdict, tests_status, integrity, timings, image, commands
        ├── patch.diff                       the model patch exactly as graded
        ├── instance.json                    the instance record as graded (harness report reads it)
        ├── commands.json                    every command run in the sandbox, in order, with exit codes
        ├── test_output.txt                  raw output of the test command (capped)
        ├── results.xml                      the runner's JUnit XML, when it wrote one
        ├── evidence.json, events.jsonl      what the in-sandbox launcher and monitor reported
        ├── build.log                        the environment's build log, when the build failed
        ├── report.html                      the instance's page
        │   `harness solve` (harness.run.solve), before grading and beside it:
        ├── agent.json                       the attempt record (harness.agents.scaffold.AttemptRecord)
        ├── <instance_id>.traj.json          the scaffold's own trajectory, secrets scrubbed (mini-swe-agent's
        │                                    name: a run directory is a --replay directory as it is)
        ├── agent_patch.diff                 the prediction: the sandbox tree's diff (tree truth)
        ├── submission.diff                  the scaffold's own submission, as it gave it
        ├── scaffold.log                     the scaffold driver's stderr, scrubbed
        └── replay.json                      replay only: the replayed attempt against the recording

The cache directory (``$HARNESS_CACHE_DIR``, default ``~/.cache/harness``)::

    <cache>/repos/OWNER__NAME.git            bare clones made when a repository was not given locally
    <cache>/demo-repos/OWNER__NAME           the demo set's repositories, built from instances/demo
    <cache>/exports/<tree_sha>/              one-commit exports of base commits
    <cache>/wheelhouse/<python>-<hash>/      locked wheelhouses (see harness.preparation.wheelhouse)
    <cache>/locks/                           inter-process build locks

The state of one Docker engine's harness images (``$HARNESS_STATE_DIR``, default
``${XDG_STATE_HOME:-~/.local/state}/harness``), shared by every cache directory that uses
that engine (harness.imagecache)::

    <state>/engines/<engine id>/image-use.sqlite   when each image was last used, by which instances
    <state>/engines/<engine id>/leases/            one lease per live harness process (flock held)

The harness's own data (specs, bases, the demo set) is found by harness.resources,
never relative to this file or to the working directory.

Every reader and writer of a run directory names its files through this module:
:class:`RunPaths` (the run's own files), :class:`InstanceFiles` (one instance's, or one
attempt's) and the attempt rule (:func:`attempt_dir_name`, :func:`attempt_number`). No
other module of the package spells those names (tests/unit/test_run_layout.py checks).
The sandbox's output directory is another layout with names of its own
(harness.integrity.steps on the host, harness.incontainer inside).
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

# The files of one instance directory (:class:`InstanceFiles` names each).
REPORT = "report.json"              # written last: its presence marks the instance graded
PATCH = "patch.diff"
INSTANCE_RECORD = "instance.json"
COMMANDS = "commands.json"
TEST_OUTPUT = "test_output.txt"
RESULTS_XML = "results.xml"
EVIDENCE = "evidence.json"
EVENTS = "events.jsonl"
BUILD_LOG = "build.log"
PAGE = "report.html"                # an instance's page, and the run's (harness.views.site)
#: Everything a graded run leaves beside ``report.json``, removed before an instance is graded again.
ARTEFACTS = (TEST_OUTPUT, RESULTS_XML, EVIDENCE, EVENTS, BUILD_LOG, COMMANDS, PATCH, INSTANCE_RECORD)
# What `harness solve` writes in an instance (or attempt) directory, before grading writes the above.
AGENT_RECORD = "agent.json"         # written last: its presence marks the attempt done
#: the trajectory is ``<instance_id>.traj.json``, the name mini-swe-agent gives it (:attr:`InstanceFiles.trajectory`)
TRAJECTORY_SUFFIX = ".traj.json"
AGENT_PATCH = "agent_patch.diff"
SUBMISSION = "submission.diff"
SCAFFOLD_LOG = "scaffold.log"
REPLAY = "replay.json"
#: What an attempt leaves beside ``agent.json`` (and its trajectory), removed before the attempt is run again.
AGENT_ARTEFACTS = (AGENT_PATCH, SUBMISSION, SCAFFOLD_LOG, REPLAY)

# The run's own files, at the top of the run directory (:class:`RunPaths` names each).
SUMMARY = "summary.json"
MANIFEST = "manifest.json"
LOG = "harness.log"
LOCK = ".lock"                      # harness.locks.run_lock
OUTCOMES = ".outcomes.jsonl"        # harness.run.batch
RUN_MARKDOWN = "report.md"          # harness.views.site, beside PAGE
AUDIT_JSON, AUDIT_MARKDOWN, AUDIT_PREDICTIONS = "audit.json", "audit.md", "audit-predictions.jsonl"
VALIDITY_JSON, VALIDITY_MARKDOWN = "validity.json", "validity.md"
SOLVE_RECORD = "solve.json"         # harness.run.solve
PREDICTIONS = "predictions.jsonl"   # harness.run.solve: the attempts as SWE-bench predictions
#: Names the harness writes at the top of a run directory (beside the instance
#: directories): an instance id equal to one of them, in any case (a case-insensitive
#: file system folds them), would make its directory collide with the run's own file.
RUN_FILE_NAMES = frozenset({SUMMARY, MANIFEST, LOG, LOCK, OUTCOMES, PAGE, RUN_MARKDOWN,
                            AUDIT_JSON, AUDIT_MARKDOWN, AUDIT_PREDICTIONS, VALIDITY_JSON, VALIDITY_MARKDOWN,
                            SOLVE_RECORD, PREDICTIONS})

#: The attempt rule: predictions that carry attempts grade each in ``<instance_id>/attempt-<n>/``.
ATTEMPT_PREFIX = "attempt-"
_ATTEMPT_DIR = re.compile(re.escape(ATTEMPT_PREFIX) + r"(\d+)")
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


def attempt_dir_name(attempt: int) -> str:
    """The directory of attempt ``attempt`` inside its instance's directory."""
    return f"{ATTEMPT_PREFIX}{int(attempt)}"


def attempt_number(name: str) -> int | None:
    """The attempt a directory named ``name`` holds (``attempt-3`` -> 3), or None when it names none."""
    match = _ATTEMPT_DIR.fullmatch(name)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class InstanceFiles:
    """The files of one instance directory, ``<run>/<id>/`` or ``<run>/<id>/attempt-<n>/``.
    Only names: whether a file exists, and what it holds, is the reader's to check."""

    root: Path

    @property
    def report(self) -> Path:
        return self.root / REPORT

    @property
    def patch(self) -> Path:
        return self.root / PATCH

    @property
    def instance_record(self) -> Path:
        return self.root / INSTANCE_RECORD

    @property
    def commands(self) -> Path:
        return self.root / COMMANDS

    @property
    def test_output(self) -> Path:
        return self.root / TEST_OUTPUT

    @property
    def results_xml(self) -> Path:
        return self.root / RESULTS_XML

    @property
    def evidence(self) -> Path:
        return self.root / EVIDENCE

    @property
    def events(self) -> Path:
        return self.root / EVENTS

    @property
    def build_log(self) -> Path:
        return self.root / BUILD_LOG

    @property
    def page(self) -> Path:
        return self.root / PAGE

    @property
    def agent_record(self) -> Path:
        return self.root / AGENT_RECORD

    @property
    def trajectory(self) -> Path:
        """``<instance_id>.traj.json`` (in an attempt's directory too): the scaffold's own name."""
        instance_id = self.root.parent.name if attempt_number(self.root.name) is not None else self.root.name
        return self.root / f"{instance_id}{TRAJECTORY_SUFFIX}"

    @property
    def agent_patch(self) -> Path:
        return self.root / AGENT_PATCH

    @property
    def submission(self) -> Path:
        return self.root / SUBMISSION

    @property
    def scaffold_log(self) -> Path:
        return self.root / SCAFFOLD_LOG

    @property
    def replay(self) -> Path:
        return self.root / REPLAY

    def attempt(self, attempt: int) -> "InstanceFiles":
        """The files of one attempt of this instance."""
        return InstanceFiles(self.root / attempt_dir_name(attempt))


@dataclass(frozen=True)
class RunPaths:
    """A run directory's own files and its instances' directories. ``RunPaths(root)`` names
    an existing directory (a reader's view); :meth:`create` makes one for a run."""

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
        return self.root / SUMMARY

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST

    @property
    def log(self) -> Path:
        return self.root / LOG

    @property
    def lock(self) -> Path:
        return self.root / LOCK

    @property
    def outcomes(self) -> Path:
        return self.root / OUTCOMES

    @property
    def page(self) -> Path:
        return self.root / PAGE

    @property
    def markdown(self) -> Path:
        return self.root / RUN_MARKDOWN

    @property
    def audit_json(self) -> Path:
        return self.root / AUDIT_JSON

    @property
    def audit_markdown(self) -> Path:
        return self.root / AUDIT_MARKDOWN

    @property
    def audit_predictions(self) -> Path:
        return self.root / AUDIT_PREDICTIONS

    @property
    def validity_json(self) -> Path:
        return self.root / VALIDITY_JSON

    @property
    def validity_markdown(self) -> Path:
        return self.root / VALIDITY_MARKDOWN

    @property
    def solve_record(self) -> Path:
        return self.root / SOLVE_RECORD

    @property
    def predictions(self) -> Path:
        return self.root / PREDICTIONS

    def instance_dir(self, instance_id: str, attempt: int | None = None) -> Path:
        problem = instance_dir_problem(instance_id)
        if problem:
            raise InputError(problem, record=str(instance_id)[:60], field="instance_id")
        base = self.root / instance_id
        return self.inside(base if attempt is None else base / attempt_dir_name(attempt))

    def report_files(self) -> list[Path]:
        """Every instance's and every attempt's ``report.json`` in the directory, sorted
        (``<id>/report.json``, ``<id>/attempt-<n>/report.json``; nothing deeper)."""
        return sorted([*self.root.glob(f"*/{REPORT}"), *self.root.glob(f"*/{ATTEMPT_PREFIX}*/{REPORT}")])

    def instance(self, instance_id: str, attempt: int | None = None) -> InstanceFiles:
        """The files of one instance (or attempt) the run writes; the id checked as :meth:`instance_dir` does."""
        return InstanceFiles(self.instance_dir(instance_id, attempt))
