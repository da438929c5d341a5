"""One agent attempt on a node (:class:`AttemptEvaluator`), and the data that crosses the
executor seam for it.

The executors of harness.run.executors were made for grading's TaskEvaluator; an attempt
travels through them unchanged because it has the same shape::

    request.task.key, request.task.instance (repo, version: which tasks share an environment),
    request.token (labels the attempt's sandbox: a deadline kill or Ctrl-C removes it)
    evaluator.evaluate(request) -> outcome       never raises for the attempt's own failures
    evaluator.kill_task(token), evaluator.stop(), evaluator.backend (cleanup_run),
    evaluator._failed(task, reason, exc, started, log) -> outcome   (a deadline passed)
    outcome.engine_lost, outcome.node, outcome.node_id, outcome.result (always None here)

On the node: the instance's image is prepared (harness.preparation, as for grading), the
scaffold's pinned environment is installed once per node (harness.agents.pins), a working
sandbox is opened from the image (harness.agents.workspace), the attempt runs
(harness.agents.serving) and the sandbox is removed. The node writes nothing; the driver
writes the run directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from harness.agents import budgets as limits
from harness.agents.scaffold import AttemptRecord, AttemptResult, AttemptSpec
from harness.agents.scrubbing import Scrubber
from harness.errors import ImageBuildError, InfrastructureError
from harness.inputs.instances import Instance
from harness.logs import get_logger

if TYPE_CHECKING:
    from harness.agents.pins import ScaffoldEnvironment, ScaffoldPin
    from harness.evaluation.tasks import RunConfig


@dataclass(frozen=True)
class AttemptTask:
    """One attempt of one instance."""

    instance: Instance
    spec: AttemptSpec

    @property
    def key(self) -> str:
        attempt = self.spec.attempt
        return self.instance.instance_id if attempt is None else f"{self.instance.instance_id}#{attempt}"


@dataclass(frozen=True)
class AttemptRequest:
    task: AttemptTask
    token: str = ""


@dataclass
class AttemptOutcome:
    key: str
    attempt: AttemptResult | None = None
    node: str = ""
    engine_lost: bool = False
    node_id: str = ""
    #: grading's outcomes carry an InstanceResult here; an attempt has none (the executors read it)
    result: None = None


@dataclass(frozen=True)
class SolveSettings:
    """What every attempt of a run shares on a node: the scaffold and its pins (one per
    version: a replay may hold trajectories of several), and the run's cost ledger (an
    object in this process, or a handle to a shared one on a cluster)."""

    scaffold: str
    pins: dict[str, ScaffoldPin]
    ledger: Any = None
    harness_version: str = ""
    harness_commit: str | None = None


def record_without_attempt(task: AttemptTask, settings: SolveSettings, exit_status: str, error: str | None,
                           node: str) -> AttemptRecord:
    """The record of an attempt that never ran its scaffold (no sandbox, or the run's cost
    limit was already reached)."""
    from harness.agents.serving import _now, config_sha256
    spec = task.spec
    pin = settings.pins.get(spec.pin)
    stamp = _now()
    return AttemptRecord(
        instance_id=spec.instance_id, attempt=spec.attempt, mode=spec.mode,
        scaffold={"name": settings.scaffold, "version": pin.version if pin else None,
                  "config_sha256": config_sha256(spec.config)},
        model={"name": str((spec.config.get("model") or {}).get("model_name") or "")}, budgets=spec.budgets.to_json(),
        given=spec.given, exit_status=exit_status,
        limit="run_cost" if exit_status == limits.RUN_COST_EXCEEDED else None,
        prediction=({"sha256": _EMPTY_SHA256, "files": [], "binary_files": [], "symlinks": []}
                    if exit_status == limits.RUN_COST_EXCEEDED else None),
        error=error, node=node, harness_version=settings.harness_version, harness_commit=settings.harness_commit,
        started_at=stamp, finished_at=stamp)


_EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


class AttemptEvaluator:
    """What a node does for one attempt (see the module doc). Thread-safe."""

    def __init__(self, config: RunConfig, client: Any, preparer: Any, settings: SolveSettings, *,
                 scope: str | None = None, node: str | None = None, backend: Any = None) -> None:
        from harness.evaluation.node import docker_backend
        from harness.evaluation.tasks import node_name
        self.config = config
        self.client = client
        self.preparer = preparer
        self.settings = settings
        self.node = node or node_name()
        self.backend = backend or docker_backend(config, client, scope)
        self._environments: dict[str, ScaffoldEnvironment] = {}
        self._lock = threading.Lock()
        self._drivers: dict[str, subprocess.Popen] = {}
        self._stopped = False

    # ------------------------------------------------------------------ one attempt
    def evaluate(self, request: AttemptRequest) -> AttemptOutcome:
        task = request.task
        spec = task.spec
        log = get_logger(instance_id=spec.instance_id, attempt=spec.attempt, run_id=self.config.run_id,
                         node=self.node)
        started = time.monotonic()
        ledger = self.settings.ledger
        if spec.budgets.run_cost_limit is not None and ledger.exhausted():
            log.info("attempt.not_started", reason="run_cost")
            record = record_without_attempt(task, self.settings, limits.RUN_COST_EXCEEDED,
                                            "the run's cost limit was reached before this attempt started", self.node)
            return AttemptOutcome(task.key, AttemptResult(record, patch=""), node=self.node)
        try:
            environment = self.environment(spec.pin)
            prepared = self._prepare(task.instance)
        except Exception as exc:  # noqa: BLE001 — recorded as the attempt's outcome
            return self._failed(task, None, exc, started, log)
        from harness.agents.scaffold import get_scaffold
        from harness.agents.serving import run_attempt
        from harness.agents.workspace import open_workspace
        scaffold = get_scaffold(self.settings.scaffold)
        scrubber = Scrubber.from_environment(os.environ, spec.config)
        log.info("attempt.start", image=prepared.image.tag, mode=spec.mode)
        try:
            workspace = open_workspace(self.backend, prepared, name_hint=spec.instance_id, task=request.token)
        except Exception as exc:  # noqa: BLE001
            return self._failed(task, None, exc, started, log)
        try:
            result = run_attempt(scaffold, environment, workspace, spec, ledger=ledger, scrubber=scrubber,
                                 on_process=lambda proc: self._drivers.__setitem__(request.token, proc))
        except Exception as exc:  # noqa: BLE001 — a bug or the sandbox lost: the attempt's outcome
            return self._failed(task, None, exc, started, log)
        finally:
            self._drivers.pop(request.token, None)
            try:
                workspace.close()
            except InfrastructureError as exc:
                log.warning("attempt.close_failed", error=str(exc)[:300])
        record = result.record
        record.node = self.node
        record.harness_version, record.harness_commit = self.settings.harness_version, self.settings.harness_commit
        log.info("attempt.done", exit_status=record.exit_status, steps=record.steps, cost=record.usage["cost"],
                 seconds=record.wall_seconds)
        return AttemptOutcome(task.key, result, node=self.node)

    def environment(self, pin_spec: str) -> ScaffoldEnvironment:
        """The pin's environment on this node (installed on first use)."""
        from harness.agents.pins import ensure_environment
        with self._lock:
            if pin_spec not in self._environments:
                pin = self.settings.pins[pin_spec]
                self._environments[pin_spec] = ensure_environment(pin, self.config.cache_dir)
            return self._environments[pin_spec]

    def _prepare(self, instance: Instance):
        for attempt in Retrying(stop=stop_after_attempt(self.config.retries),
                                wait=wait_exponential(multiplier=0.5, max=8),
                                retry=retry_if_exception(lambda e: isinstance(e, InfrastructureError)
                                                         and not isinstance(e, ImageBuildError)),
                                reraise=True):
            with attempt:
                return self.preparer.prepare(instance)
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ the executors' shape
    def stop(self) -> None:
        """The run is stopping: no new sandbox, and every driver ends (a model call in flight
        would otherwise hold its thread)."""
        self._stopped = True
        self.backend.stopped = True
        for token in list(self._drivers):
            self.kill_task(token)

    def kill_task(self, token: str) -> int:
        """End one attempt (its deadline passed): its driver, then its sandbox. Never raises."""
        proc = self._drivers.pop(token, None)
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            return self.backend.kill_task(token)
        except InfrastructureError:
            return 0

    def _failed(self, task: AttemptTask, reason: Any, exc: BaseException, started: float, log) -> AttemptOutcome:
        """An attempt that could not run (or was killed at its deadline): no prediction."""
        from harness.engine.client import engine_alive
        detail = f"{type(exc).__name__}: {exc}"[-4000:]
        if reason is not None:
            detail = f"{getattr(reason, 'value', reason)}: {detail}"
        log.error("attempt.error", error=detail[:300])
        record = record_without_attempt(task, self.settings, limits.INFRASTRUCTURE_ERROR,
                                        Scrubber.from_environment(os.environ, task.spec.config).text(detail),
                                        self.node)
        record.wall_seconds = round(time.monotonic() - started, 3)
        lost = isinstance(exc, InfrastructureError) and not engine_alive(self.client)
        return AttemptOutcome(task.key, AttemptResult(record), node=self.node, engine_lost=lost)
