"""The agent run's writing side: each attempt's files as its outcome arrives, then the
predictions file and ``solve.json``; and the node setup that carries a run to the executors.

Per attempt (``<run>/<id>/`` or ``<run>/<id>/attempt-<n>/``, harness.paths): the
trajectory, the tree diff (the prediction), the scaffold's submission, the driver's log,
``replay.json`` in a replay, and ``agent.json`` last (its presence marks the attempt
done). Everything passes the driver's scrubber on its way to disk (the node scrubbed it
already with its own environment's secrets; this is the driver's).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from harness.agents import budgets as limits
from harness.agents.node import AttemptEvaluator, AttemptOutcome, AttemptRequest, AttemptTask, SolveSettings
from harness.agents.scaffold import AttemptRecord
from harness.agents.scrubbing import Scrubber
from harness.atomic import write_json_atomic, write_text_atomic
from harness.paths import AGENT_ARTEFACTS, InstanceFiles, RunPaths
from harness.run.executors.base import NodeSetup

if TYPE_CHECKING:
    from harness.run.session import RunResult


@dataclass
class SolveSetup(NodeSetup):
    """A run's node setup whose evaluator runs agent attempts (harness.agents.node)."""

    settings: SolveSettings | None = None

    def make_evaluator(self, config, client, preparer) -> AttemptEvaluator:  # type: ignore[override]
        assert self.settings is not None
        return AttemptEvaluator(config, client, preparer, self.settings, scope=self.scope)

    def failure_outcome(self, request: AttemptRequest, reason, exc: BaseException,  # type: ignore[override]
                        lost: list) -> AttemptOutcome:
        from harness.agents.node import record_without_attempt
        from harness.agents.scaffold import AttemptResult
        assert self.settings is not None
        detail = f"{getattr(reason, 'value', reason)}: {type(exc).__name__}: {exc}"[-4000:]
        record = record_without_attempt(request.task, self.settings, limits.INFRASTRUCTURE_ERROR, detail, "")
        return AttemptOutcome(request.task.key, AttemptResult(record))


@dataclass(frozen=True)
class SolveResult:
    """What an agent run wrote: ``solve`` (as in solve.json), this invocation's attempt
    records (kept ones included), the run directory's files, and the grading run when
    ``grade`` was asked (its RunResult)."""

    run_id: str
    solve: dict[str, Any]
    records: list[AttemptRecord]
    paths: RunPaths
    graded: RunResult | None = None
    #: attempts that could not run (their sandbox could not be had): re-run the same call
    incomplete: list[str] = field(default_factory=list)

    @property
    def run_dir(self) -> Path:
        return self.paths.root


@dataclass(frozen=True)
class SolveProgress:
    """One attempt finished: ``done`` of ``total``."""

    instance_id: str
    attempt: int | None
    exit_status: str
    limit: str | None
    done: int
    total: int
    record: AttemptRecord


class AttemptWriter:
    """Writes each outcome (thread-safe: outcomes arrive from the executor's threads)."""

    def __init__(self, paths: RunPaths, scrubber: Scrubber, total: int, inputs: dict[str, str],
                 recorded: dict | None = None, on_progress: Callable[[SolveProgress], None] | None = None) -> None:
        self.paths = paths
        self.scrubber = scrubber
        self.total = total
        self.inputs = inputs
        self.recorded = recorded or {}
        self.on_progress = on_progress
        self.done = 0
        self._lock = threading.Lock()

    def __call__(self, request: AttemptRequest, outcome: AttemptOutcome) -> None:
        task = request.task
        files = self.paths.instance(task.instance.instance_id, task.spec.attempt)
        result = outcome.attempt
        assert result is not None
        record = result.record
        record.inputs_sha256 = self.inputs.get(task.key, "")
        files.root.mkdir(parents=True, exist_ok=True)
        for stale in (files.agent_record, files.trajectory, *(files.root / name for name in AGENT_ARTEFACTS)):
            stale.unlink(missing_ok=True)
        scrub = self.scrubber
        if result.trajectory is not None:
            write_text_atomic(files.trajectory, json.dumps(scrub.data(result.trajectory), indent=2))
        if result.patch is not None:
            write_text_atomic(files.agent_patch, scrub.text(result.patch))
        if result.submission is not None:
            write_text_atomic(files.submission, scrub.text(result.submission))
        if result.log:
            write_text_atomic(files.scaffold_log, scrub.text(result.log))
        recorded = self.recorded.get(task.instance.instance_id)
        if recorded is not None and result.trajectory is not None:
            write_json_atomic(files.replay, scrub.data(replay_comparison(recorded, result)))
        write_json_atomic(files.agent_record, scrub.data(record.to_json()))  # last: marks the attempt done
        with self._lock:
            self.done += 1
            done = self.done
            if self.on_progress is not None:
                self.on_progress(SolveProgress(record.instance_id, record.attempt, record.exit_status, record.limit,
                                               done, self.total, record))


def replay_comparison(recorded, result) -> dict:
    """replay.json: the replayed attempt against its recording (harness.agents.replay)."""
    from harness.agents.replay import compare_replay
    from harness.errors import InputError
    messages = (result.trajectory or {}).get("messages") or []
    try:
        comparison = compare_replay(recorded, messages, result.submission or "", result.patch,
                                    replayed_exit_status=result.record.exit_status)
    except InputError as exc:  # the replay's messages could not be read as a trajectory
        return {"instance_id": recorded.instance_id, "same_submission": False, "first_divergent_step": None,
                "observation_agreement": 0.0, "error": str(exc)}
    data = comparison.to_json()
    data["replayed_exit_status"] = result.record.exit_status
    return data


def load_record(files: InstanceFiles) -> AttemptRecord | None:
    try:
        return AttemptRecord.from_json(json.loads(files.agent_record.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def complete_earlier(files: InstanceFiles, inputs: str) -> AttemptRecord | None:
    """An earlier attempt's record that a re-run keeps: written whole, decided by the same
    inputs, and not an infrastructure failure (those are run again)."""
    record = load_record(files)
    if record is None or record.inputs_sha256 != inputs or record.exit_status == limits.INFRASTRUCTURE_ERROR:
        return None
    if record.prediction is not None and not files.agent_patch.is_file():
        return None
    return record


def prediction_lines(paths: RunPaths, tasks: Iterable[AttemptTask], model_name: Callable[[AttemptRecord], str]
                     ) -> tuple[list[dict], list[str]]:
    """SWE-bench predictions, one per attempt with a prediction, in the plan's order; and
    the keys of the attempts without one (named in solve.json)."""
    lines, without = [], []
    for task in tasks:
        files = paths.instance(task.instance.instance_id, task.spec.attempt)
        record = load_record(files)
        if record is None or record.prediction is None:
            without.append(task.key)
            continue
        patch = files.agent_patch.read_text(encoding="utf-8") if files.agent_patch.is_file() else ""
        line: dict[str, Any] = {"instance_id": record.instance_id, "model_name_or_path": model_name(record),
                                "model_patch": patch}
        if record.attempt is not None:
            line["attempt"] = record.attempt
        line.update(cost=float(record.usage.get("cost") or 0.0), calls=int(record.usage.get("calls") or 0),
                    steps=record.steps, agent_seconds=record.wall_seconds, exit_status=record.exit_status)
        lines.append(line)
    return lines, without


def write_predictions(path: Path, lines: list[dict], scrubber: Scrubber) -> None:
    write_text_atomic(path, "".join(json.dumps(scrubber.data(line)) + "\n" for line in lines))


def totals(records: list[AttemptRecord]) -> dict:
    """The run's figures over its attempts (solve.json)."""
    usage = {k: sum((r.usage.get(k) or 0) for r in records) for k in ("cost", "calls", "tokens_in", "tokens_out")}
    usage["cost"] = round(float(usage["cost"]), 8)
    return {**usage, "attempts": len(records), "steps": sum(r.steps for r in records),
            "agent_seconds": round(sum(r.wall_seconds for r in records), 3),
            "exit_statuses": dict(sorted(Counter(r.exit_status for r in records).items())),
            "limits": dict(sorted(Counter(r.limit for r in records if r.limit).items()))}
