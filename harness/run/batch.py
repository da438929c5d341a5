"""The driver of a run: requests out, outcomes in, the run directory written as they arrive.

:class:`BatchRunner` hands an :class:`~harness.run.executors.Executor` one
:class:`~harness.evaluation.tasks.TaskRequest` per task (lazily: the task source may be a
generator), and records each :class:`~harness.evaluation.tasks.TaskOutcome` the moment it
arrives: the instance's artefacts atomically (``report.json`` last, marking completion)
and one line in ``.outcomes.jsonl`` (key, pins). Nothing per task stays in memory; the
manifest and the summary are built from the run directory afterwards, so the driver's
memory is flat whatever the number of tasks.

Whatever the executor, the driver alone writes the run directory, and it holds the
directory's lock (:func:`harness.locks.run_directory_lock`, taken by the CLI) so that no
second invocation writes it at the same time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

import docker

from harness.atomic import write_json_atomic, write_text_atomic
from harness.errors import EngineLost
from harness.evaluation.node import TaskEvaluator
from harness.evaluation.tasks import RunConfig, Task, TaskOutcome, TaskRequest
from harness.grading.status import ErrorReason
from harness.grading.verdict import final_verdict
from harness.logs import get_logger
from harness.paths import ARTEFACTS, InstanceFiles, RunPaths
from harness.preparation.preparer import Preparer
from harness.results.control import record_control
from harness.results.report import InstanceResult, load_report



def run_scope(root: Path) -> str:
    """The label scope of a run directory: its host and absolute path, hashed. Leftover
    cleanup removes containers of this scope only, never those of a run with the same
    id in another directory (or on another machine sharing the engine)."""
    text = f"{socket.gethostname()}:{Path(root).resolve()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class RunTally:
    """Counts of one invocation (constant size)."""

    done: int = 0
    reused: int = 0
    evaluated: int = 0
    #: outcomes recorded as ``engine_lost`` (an engine stopped answering)
    engine_lost: int = 0
    #: set by an executor when no engine is left to run the remaining tasks
    aborted: str = ""
    nodes: dict[str, int] = field(default_factory=dict)


class RunResults:
    """This invocation's results, read back from the run directory on iteration (in
    completion order), never held in memory."""

    def __init__(self, paths: RunPaths, outcomes: Path) -> None:
        self.paths = paths
        self.outcomes = outcomes

    def keys(self) -> Iterator[tuple[str, int | None]]:
        if not self.outcomes.exists():
            return
        with open(self.outcomes, encoding="utf-8") as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line cut by a kill: its report is read from the directory anyway
                yield entry["instance_id"], entry.get("attempt")

    def __iter__(self) -> Iterator[InstanceResult]:
        for instance_id, attempt in self.keys():
            result = load_report(self.paths.instance(instance_id, attempt).report)
            if result is not None:
                yield result

    def __len__(self) -> int:
        return sum(1 for _ in self.keys())


class BatchRunner:
    """Runs tasks through an executor and writes the run directory (the driver)."""

    def __init__(self, config: RunConfig, client: docker.DockerClient | None, preparer: Preparer | None,
                 executor=None, progress: Callable[[InstanceResult], None] | None = None, *,
                 specs=None, repos=None, backend=None) -> None:
        """``backend``: what the in-process evaluator starts sandboxes with (default: the
        engine of ``client``, :func:`harness.evaluation.node.docker_backend`)."""
        from harness.run.executors import LocalExecutor, NodeSetup
        self.config = config
        self.paths = RunPaths.create(config.output_dir, config.run_id)
        self.scope = run_scope(self.paths.root)
        self.executor = executor or LocalExecutor(config.max_workers)
        self.progress = progress
        self.tally = RunTally()
        self._lock = threading.Lock()
        self._spool = None
        #: what a node needs to evaluate tasks of this run (shipped to remote nodes)
        self.setup = NodeSetup.describe(config, self.scope, specs=specs or getattr(preparer, "specs", None),
                                        repos=repos or getattr(preparer, "repos", None))
        if client is not None and preparer is not None:
            self.setup.bind(TaskEvaluator(config, client, preparer, scope=self.scope, backend=backend))

    # the in-process evaluator, for callers that evaluate one task directly (benchmarks)
    @property
    def evaluator(self) -> TaskEvaluator:
        return self.setup.evaluator()

    def evaluate(self, task: Task) -> InstanceResult:
        """Evaluate one task in this process and record it (no executor)."""
        outcome = self.evaluator.evaluate(self.request(task))
        with self._outcome_spool():
            return self.record(task, outcome)

    # ------------------------------------------------------------------ requests
    def request(self, task: Task, pins_only: bool = False) -> TaskRequest:
        """The request for one task: a fresh token, and the checksums of a complete
        earlier result of the task in the run directory (read from disk, per task)."""
        previous = None
        if not self.config.force and not pins_only:
            path = self.paths.instance(task.instance.instance_id, task.prediction.attempt).report
            earlier = load_report(path) if path.exists() else None
            if earlier is not None and earlier.error_origin != "harness":
                previous = {**earlier.checksums, "image_inputs": earlier.image.get("inputs_hash")}
        return TaskRequest(task, previous, secrets.token_hex(8), pins_only)

    # ------------------------------------------------------------------ outcomes
    def record(self, task: Task, outcome: TaskOutcome) -> InstanceResult:
        """Write one outcome to the run directory (atomically; report.json last) and to
        the outcome spool; returns the result (the earlier one when reused)."""
        files = self.paths.instance(task.instance.instance_id, task.prediction.attempt)
        log = get_logger(instance_id=task.instance.instance_id, attempt=task.prediction.attempt,
                         run_id=self.config.run_id, node=outcome.node)
        if outcome.reused:
            result = load_report(files.report)
            if result is None:  # removed meanwhile: nothing to reuse after all
                raise RuntimeError(f"{files.report} disappeared during the run")
            log.info("instance.reused", status=result.status.value)
        else:
            result = outcome.result
            control = (record_control(result, task.instance, self.config.control_dir)
                       if self.config.control_dir is not None else None)
            final_verdict(result, reference=task.is_reference, control=control)
            self._write(files, task, result, outcome)
        with self._lock:
            self._spool.write(json.dumps({"key": task.key, "instance_id": task.instance.instance_id,
                                          "attempt": task.prediction.attempt, "node": outcome.node,
                                          "reused": outcome.reused, "pins": outcome.pins}) + "\n")
            self._spool.flush()
            self.tally.done += 1
            self.tally.reused += int(outcome.reused)
            self.tally.evaluated += int(not outcome.reused)
            self.tally.engine_lost += int(outcome.engine_lost)
            if outcome.node:
                self.tally.nodes[outcome.node] = self.tally.nodes.get(outcome.node, 0) + 1
        if self.progress:
            self.progress(result)
        return result

    def _write(self, files: InstanceFiles, task: Task, result: InstanceResult, outcome: TaskOutcome) -> None:
        files.root.mkdir(parents=True, exist_ok=True)
        # An earlier attempt's artefacts never stay beside the new report (report.json
        # goes first, so a directory without it is incomplete whatever else it holds).
        for stale in (files.report, *(files.root / name for name in ARTEFACTS)):
            stale.unlink(missing_ok=True)
        if outcome.build_log:
            write_text_atomic(files.build_log, outcome.build_log)
        write_text_atomic(files.patch, task.prediction.model_patch or "")
        write_json_atomic(files.instance_record, task.instance.to_record())
        write_json_atomic(files.commands, [c.__dict__ for c in result.commands])
        if outcome.outputs is not None:
            write_text_atomic(files.test_output, outcome.outputs.test_output)
            for path, data in ((files.results_xml, outcome.outputs.junit_xml),
                               (files.evidence, outcome.outputs.evidence),
                               (files.events, outcome.outputs.events)):
                if data is not None:
                    write_text_atomic(path, data)
        write_json_atomic(files.report, result.to_report())  # last: marks completion

    @contextlib.contextmanager
    def _outcome_spool(self) -> Iterator[None]:
        """Keep ``.outcomes.jsonl`` open for appending while outcomes may arrive."""
        if self._spool is not None:
            yield
            return
        self._spool = open(self.paths.outcomes, "a", encoding="utf-8")
        try:
            yield
        finally:
            self._spool.close()
            self._spool = None

    # ------------------------------------------------------------------ the batch
    def run(self, tasks: Iterable[Task]) -> RunResults:
        """Evaluate every task; one task's failure never stops the others. ``tasks`` is
        consumed lazily. Returns this invocation's results (read back from disk).

        Raises KeyboardInterrupt after the executor stopped this run's containers (the
        directory stays resumable); an engine lost mid-run is not an exception: the
        affected tasks are recorded as ``engine_lost`` and counted in :attr:`tally`.
        """
        (self.paths.outcomes).unlink(missing_ok=True)  # a new invocation's record
        log = get_logger(run_id=self.config.run_id)
        # Containers left by an earlier, killed invocation of this run directory go first.
        leftovers = self.executor.cleanup(self.setup)
        if leftovers:
            log.warning("run.cleaned_leftovers", containers=leftovers)

        def on_done(request: TaskRequest, outcome: TaskOutcome) -> None:
            self.record(request.task, outcome)

        with self._outcome_spool():
            tasks = self._check_repositories(tasks)
            try:
                self.executor.run(self.setup, (self.request(t) for t in tasks), on_done)
            finally:
                self.tally.aborted = getattr(self.executor, "aborted", "") or self.tally.aborted
                try:
                    self.executor.cleanup(self.setup)
                except EngineLost as exc:
                    log.error("run.cleanup_failed", error=str(exc))
                    self.tally.engine_lost = max(1, self.tally.engine_lost)
        return RunResults(self.paths, self.paths.outcomes)

    def _check_repositories(self, tasks: Iterable[Task]) -> Iterable[Task]:
        """With a local engine, every task's repository is checked up front, for the whole
        set: a missing commit, object or submodule is graded ``repository_unavailable``
        before any image is built. The runnable tasks are returned. (Without one, a
        cluster's nodes find the same faults when they prepare each task.)"""
        evaluator = self.setup._local
        if evaluator is None:
            return tasks
        tasks = list(tasks)
        unavailable = evaluator.preparer.check_repositories(
            list({t.instance.instance_id: t.instance for t in tasks}.values()))
        runnable = []
        for task in tasks:
            exc = unavailable.get(task.instance.instance_id)
            if exc is None:
                runnable.append(task)
                continue
            log = get_logger(instance_id=task.instance.instance_id, run_id=self.config.run_id)
            outcome = evaluator._failed(task, ErrorReason.REPOSITORY_UNAVAILABLE, exc, time.monotonic(), log)
            self.record(task, outcome)
        return runnable

    def preflight(self, tasks: Iterable[Task]) -> dict[str, dict]:
        """Prepare every task (building what is missing) through the executor and return
        its pins, evaluating nothing: a run is checked against a pinned manifest first."""
        pins: dict[str, dict] = {}

        def on_done(request: TaskRequest, outcome: TaskOutcome) -> None:
            if outcome.pins is not None:
                with self._lock:
                    pins[request.task.key] = outcome.pins

        self.executor.run(self.setup, (self.request(t, pins_only=True) for t in tasks), on_done)
        return pins

    def pins(self) -> Iterator[tuple[str, dict]]:
        """(task key, pins) of this invocation, streamed from the outcome spool."""
        path = self.paths.outcomes
        if not path.exists():
            return
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("pins") is not None:
                    yield entry["key"], entry["pins"]
