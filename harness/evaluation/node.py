"""One task on a node (:class:`TaskEvaluator`): its images prepared, an earlier result reused or
the instance evaluated, and the outcome returned as data.

This is the node's half of a run; the driver's (:class:`~harness.run.batch.BatchRunner`) decides
what runs in which order and where the results go. The two meet at the executor seam
(:mod:`harness.run.executors`)::

    driver (BatchRunner)                         a node (TaskEvaluator), any number of them
    ─────────────────────                        ───────────────────────────────────────────
    tasks → TaskRequest (task, the checksums  ─▶ prepare the images on this node's engine,
            of an earlier result, a token)       reuse or evaluate (bounded retries for
                                                 infrastructure errors only, never a verdict)
    write the run directory, atomically,     ◀─ TaskOutcome: report, raw outputs, pins (data)
    as each outcome arrives; pins streamed

*Where* a task runs is the executor's business (threads on this machine, or a Ray
cluster) and grading never depends on it: the node runs exactly the same
:class:`TaskEvaluator` against its own engine, and only the driver writes. The driver
keeps no per-task state in memory (outcomes go to disk as they arrive; the manifest and
the summary are built from the run directory), so its memory does not grow with the run.

The data both halves exchange is :mod:`harness.evaluation.tasks`.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import docker
from tenacity import (RetryCallState, Retrying, retry_if_exception, retry_if_exception_type, stop_after_attempt,
                      wait_exponential)

from harness.bookkeeping import builds
from harness.results.control import control_facts
from harness.engine.sandbox import DockerBackend
from harness.engine.client import engine_alive
from harness.errors import (ContainerDied, EngineLost, ImageBuildError, InfrastructureError, InputError,
                            ServiceUnavailable)
from harness.evaluation.evaluator import Evaluator
from harness.evaluation.setup import EvalConfig, Evaluation
from harness.grading.status import ErrorReason, InstanceStatus
from harness.inputs.instances import Instance
from harness.evaluation import proving
from harness.evaluation.prestart import Prestarted, PrestartPool
from harness.integrity import steps
from harness.integrity.canaries import CanaryPlan
from harness.results.manifest import task_pins
from harness.logs import get_logger
from harness.paths import BUILD_LOG
from harness.inputs.predictions import Prediction
from harness.preparation.preparer import Prepared, Preparer
from harness.inputs.repos import GitDir, RepositoryUnavailable, TreeEntry
from harness.inputs.specs import EnvSpec
from harness.evaluation.tasks import RunConfig, Task, TaskOutcome, TaskRequest, failure_result, node_name

__all__ = ["TaskEvaluator"]

def docker_backend(config: RunConfig, client: docker.DockerClient, scope: str | None) -> DockerBackend:
    """The backend a node starts a run's sandboxes with, on its own engine. ``scope``: the
    run directory's scope (:func:`harness.run.batch.run_scope`), which leftover cleanup removes."""
    import os
    # Containers carry the node label only under a node agent (harness node), which
    # removes them when its node is lost; a plain local run has no such agent.
    return DockerBackend(client, config.label or config.run_id, limits=config.limits, run_dir=scope,
                         node=os.environ.get("HARNESS_NODE_NAME", ""))


class TaskEvaluator:
    """What a node does for one task, against its own engine: prepare, reuse or evaluate,
    and return a :class:`TaskOutcome`. Writes nothing to the run directory. Thread-safe:
    an executor may call :meth:`evaluate` from several threads."""

    def __init__(self, config: RunConfig, client: docker.DockerClient, preparer: Preparer, *,
                 scope: str | None = None, node: str | None = None, backend: DockerBackend | None = None) -> None:
        """``backend`` starts the sandboxes (default: :func:`docker_backend` for this run)."""
        self.config = config
        self.client = client
        self.preparer = preparer
        self.node = node or node_name()
        self.backend = backend or docker_backend(config, client, scope)
        self._engine_lost = False
        #: sandboxes started for tasks before they start (:meth:`prestart`)
        self.prestarted = PrestartPool()

    # ------------------------------------------------------------------ ahead of a task
    def prestart(self, request: TaskRequest) -> None:
        """Prepare the images of a task the executor starts next and start its sandbox, while
        other tasks run (harness.evaluation.prestart). Never raises: what fails here the task
        does again, and reports, itself."""
        if request.pins_only or self.backend.stopped or self._engine_lost:
            return
        if not self.prestarted.begin(request.token):
            return   # its task started (or the run is ending) before this pre-start's turn came
        ready = None
        try:
            prepared = self.preparer.prepare(request.task.instance)
            ready = Prestarted(prepared, self._start(prepared, request))
        except Exception as exc:  # noqa: BLE001 — the task prepares and starts again, and reports
            get_logger(instance_id=request.task.instance.instance_id, run_id=self.config.run_id,
                       node=self.node).info("instance.prestart_failed", error=str(exc)[:300])
        if ready is not None and not self.prestarted.offer(request.token, ready):
            ready.sandbox.release()
            # its task started meanwhile and finds these images made: the work is the task's
            self.preparer.ahead.keep(request.task.instance.instance_id, ready.prepared.opened,
                                     ready.prepared.builds, "prestart")
        elif ready is None:
            self.prestarted.offer(request.token, None)

    def resolve_ahead(self, request: TaskRequest) -> None:
        """Resolve and download a task's requirement set before its turn (the executor's
        resolution ahead: host-side work, mostly waiting on the network, done while other
        tasks build and run; :meth:`Preparer.resolve`). Never raises: what fails here the
        task does again, and reports, itself."""
        if request.pins_only or self.backend.stopped or self._engine_lost:
            return
        try:
            self.preparer.resolve(request.task.instance)
        except Exception as exc:  # noqa: BLE001 — the task prepares again, and reports
            get_logger(instance_id=request.task.instance.instance_id, run_id=self.config.run_id,
                       node=self.node).info("instance.resolve_ahead_failed", error=str(exc)[:300])

    def _builds(self, instance_id: str, prepared: Prepared, ready: Prestarted | None, started: float
                ) -> list[dict]:
        """What the task built (harness.bookkeeping.builds) on its own clock: its preparation's
        work (a pre-start's, when it took one, marked so), and the work done for it ahead (the
        resolution ahead; a pre-start that found the task started)."""
        own = (builds.on_clock(prepared.builds, prepared.opened, started, "prestart" if ready is not None else None)
               if prepared.opened else list(prepared.builds))
        return [*own, *self.preparer.ahead.take(instance_id, started)]

    def drop_prestarted(self) -> None:
        """Release every pre-started sandbox no task took (the run is ending)."""
        for ready in self.prestarted.drain():
            ready.sandbox.release()

    def _start(self, prepared: Prepared, request: TaskRequest):
        """A fresh sandbox for the task (its working copy filled from the first process on)."""
        return self.backend.start(prepared.image.tag, request.task.instance.instance_id,
                                  hosts=prepared.spec.service_hosts, net_admin=prepared.spec.needs_net_admin,
                                  task=request.token, cpus=prepared.spec.cpus, early=steps.early_reset())

    # ------------------------------------------------------------------ one task
    def evaluate(self, request: TaskRequest) -> TaskOutcome:
        """Prepare, then reuse or evaluate one task. Never raises for the task's own
        failures: they are results. ``engine_lost`` says the engine stopped answering."""
        task = request.task
        instance, prediction = task.instance, task.prediction
        log = get_logger(instance_id=instance.instance_id, attempt=prediction.attempt,
                         run_id=self.config.run_id, node=self.node)
        log.info("instance.start", model=prediction.model_name_or_path)
        started = time.monotonic()
        if self._engine_lost:  # fail fast while the engine is gone; resume when it is back
            if not engine_alive(self.client):
                return self._failed(task, ErrorReason.ENGINE_LOST, EngineLost(
                    f"the Docker engine of node {self.node} does not answer"), started, log)
            self._engine_lost = False
        ready = self.prestarted.take(request.token)
        try:
            return self._evaluate(request, ready, started, log)
        finally:
            if ready is not None and ready.sandbox is not None:   # not taken by an evaluation
                ready.sandbox.release()

    def _evaluate(self, request: TaskRequest, ready: Prestarted | None, started: float, log) -> TaskOutcome:
        task = request.task
        instance, prediction = task.instance, task.prediction
        try:
            prepared = ready.prepared if ready is not None else self._prepare_with_retries(instance, log)
        except (InputError, RepositoryUnavailable) as exc:
            reason = (ErrorReason.REPOSITORY_UNAVAILABLE if isinstance(exc, RepositoryUnavailable)
                      else ErrorReason.MALFORMED_INSTANCE)
            return self._failed(task, reason, exc, started, log)
        except ImageBuildError as exc:
            outcome = self._failed(task, ErrorReason.ENVIRONMENT_BUILD_FAILED, exc, started, log, exc.log or "")
            outcome.result.image = {"build_log": exc.log_path, "build_log_file": BUILD_LOG}
            return outcome
        except Exception as exc:  # a bug or an unexpected engine state: recorded, batch goes on
            return self._failed(task, ErrorReason.HARNESS_ERROR, exc, started, log)
        prep_seconds = time.monotonic() - started
        pins = task_pins(self.cache_key(task, prepared), prepared)
        if request.pins_only:
            return TaskOutcome(task.key, pins=pins, node=self.node)
        if not self.config.force and self._reusable(request.previous, task, prepared):
            return TaskOutcome(task.key, pins=pins, reused=True, node=self.node)

        attempts: list[dict] = []

        def record(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            attempts.append({"attempt": state.attempt_number, "error": type(exc).__name__ if exc else None,
                             "message": str(exc)[:500] if exc else None, "node": self.node})
            log.warning("instance.retry", attempt=state.attempt_number, error=str(exc)[:200])

        pristine_repo = _PristineReader(prepared.export_path or prepared.repo_path,
                                        "HEAD" if prepared.export_path else instance.base_commit)
        facts = control_facts(instance, self.config.control_dir) if self.config.control_dir is not None else None
        control_skipped = frozenset(facts["skipped"]) if facts else frozenset()
        canary_plan = self._canary_plan(instance, prepared.spec, facts)

        prestarted_used = []

        def start():
            """The pre-started sandbox for the task's first evaluation, a fresh one for any other."""
            if ready is not None and ready.sandbox is not None:
                sandbox, ready.sandbox = ready.sandbox, None
                if sandbox.alive():
                    prestarted_used.append(sandbox.id)
                    return sandbox
                sandbox.release()
            return self._start(prepared, request)

        def evaluate(candidate: Prediction, plan: CanaryPlan) -> tuple[Evaluator, Evaluation]:
            for attempt in Retrying(stop=stop_after_attempt(self.config.retries),
                                    wait=wait_exponential(multiplier=0.5, max=8),
                                    retry=retry_if_exception_type(InfrastructureError),
                                    before_sleep=record, reraise=True):
                with attempt:
                    evaluator = Evaluator(instance, candidate, prepared.spec, pristine_repo.read,
                                          self._eval_config(prepared.spec), prepared.protected_modules,
                                          pristine_repo.paths, control_skipped, plan,
                                          reference_undeclared=(facts or {}).get("undeclared"))
                    evaluation = evaluator.run(start)
            return evaluator, evaluation

        try:
            evaluator, evaluation = evaluate(prediction, canary_plan)
            if evaluation.result.error_reason is ErrorReason.CANARY_UNPROVEN and not evaluator.is_reference:
                proving.prove_canaries(evaluator, evaluate, instance, canary_plan, log)
            if self.config.eval.perturbed_run and evaluation.result.status is InstanceStatus.FULL:
                proving.perturbed_run(evaluator, evaluate, instance, prediction, canary_plan,
                                      (facts or {}).get("canaries") or {}, log)
        except InfrastructureError as exc:
            attempts.append({"attempt": len(attempts) + 1, "error": type(exc).__name__, "message": str(exc)[:500],
                             "node": self.node})
            if isinstance(exc, ServiceUnavailable):
                reason = ErrorReason.SERVICE_UNAVAILABLE
            elif isinstance(exc, ContainerDied):
                reason = ErrorReason.CONTAINER_DIED
            else:
                reason = ErrorReason.HARNESS_ERROR
            outcome = self._failed(task, reason, exc, started, log)
            outcome.result.attempts = attempts
            outcome.pins = pins
            return outcome
        except Exception as exc:
            outcome = self._failed(task, ErrorReason.HARNESS_ERROR, exc, started, log)
            outcome.pins = pins
            return outcome
        finally:
            pristine_repo.close()
        result = evaluation.result
        result.attempts = attempts
        result.timings["prepare_images"] = round(prep_seconds, 4)
        result.timings["wall"] = round(time.monotonic() - started, 4)
        if prestarted_used:   # its images prepared and its sandbox started before the task (prestart.py)
            result.resources["sandbox_prestarted"] = True
        result.image = {"tag": prepared.image.tag, "id": prepared.image.image_id,
                        "inputs_hash": prepared.image.inputs_hash, "env_tag": prepared.env_image.tag,
                        "env_id": prepared.env_image.image_id, "tree_sha": prepared.tree_sha,
                        "built": prepared.image.built, "build_seconds": round(prepared.image.build_seconds, 3),
                        "pulled": prepared.image.pulled, "env_pulled": prepared.env_image.pulled,
                        "interpreter": prepared.interpreter, "build_logs": prepared.build_logs,
                        "prepare_seconds": prepared.timings, "builds": self._builds(instance.instance_id, prepared, ready, started),
                        "submodules": prepared.submodules,
                        "provenance": prepared.provenance}
        result.checksums.update({k: v for k, v in self.cache_key(task, prepared).items() if k != "image_inputs"})
        result.node = self.node
        log.info("instance.done", status=result.status.value, resolved=result.resolved,
                 error_reason=result.error_reason.value if result.error_reason else None,
                 seconds=result.timings.get("wall"))
        return TaskOutcome(task.key, result, evaluation.outputs, pins=pins, node=self.node)

    def stop(self) -> None:
        """The run is stopping: start no container, retry nothing."""
        self.backend.stopped = True

    def kill_task(self, token: str) -> int:
        """Remove the containers of one task (its deadline passed). Never raises."""
        try:
            return self.backend.kill_task(token)
        except InfrastructureError:
            return 0

    def _canary_plan(self, instance: Instance, spec: EnvSpec, facts: dict | None) -> CanaryPlan:
        return proving.canary_plan(self.config.eval.canaries, self.config.canary_seed, self.config.control_dir,
                                   instance, spec, facts)

    def _eval_config(self, spec: EnvSpec) -> EvalConfig:
        """The run's grading configuration, as the spec adjusts it (a test runner's own
        repository legitimately references runner internals)."""
        if spec.runner_internals_allowed and self.config.eval.forbid_runner_internals:
            from dataclasses import replace
            return replace(self.config.eval, forbid_runner_internals=False)
        return self.config.eval

    def cache_key(self, task: Task, prepared: Prepared) -> dict[str, str]:
        """What decides a result: patch, instance record, image content, grading config."""
        return {"instance": task.instance.checksum(), "patch": task.prediction.checksum(),
                "spec": prepared.spec.checksum(), "grading": self.config.grading_key(),
                "image_inputs": prepared.image.inputs_hash}

    def _reusable(self, previous: dict | None, task: Task, prepared: Prepared) -> bool:
        """Whether the earlier result (its checksums, read by the driver) was decided by
        exactly these inputs (resume)."""
        if previous is None:
            return False
        key = self.cache_key(task, prepared)
        return all(previous.get(k) == v for k, v in key.items())

    def _prepare_with_retries(self, instance: Instance, log) -> Prepared:
        for attempt in Retrying(stop=stop_after_attempt(self.config.retries),
                                wait=wait_exponential(multiplier=0.5, max=8),
                                retry=retry_if_exception(_retryable_preparation),
                                reraise=True):
            with attempt:
                return self.preparer.prepare(instance)
        raise AssertionError("unreachable")

    def _failed(self, task: Task, reason: ErrorReason, exc: BaseException, started: float, log,
                build_log: str = "") -> TaskOutcome:
        result = failure_result(task, reason, exc, self.config.grading_key(), self.node)
        if build_log:
            result.integrity_details["build_log_tail"] = build_log[-4000:]
        result.timings["wall"] = round(time.monotonic() - started, 4)
        engine_lost = reason is ErrorReason.ENGINE_LOST
        if reason is ErrorReason.HARNESS_ERROR and not engine_alive(self.client):
            # The engine itself is gone (killed, restarted): say so, and fail the
            # following tasks fast until it answers again.
            self._engine_lost = engine_lost = True
            result.error_reason = ErrorReason.ENGINE_LOST
            result.error_detail = f"the Docker engine of node {self.node} stopped answering: {exc}"[-4000:]
        log.error("instance.error", error_reason=result.error_reason.value, error=str(exc)[:300])
        return TaskOutcome(task.key, result, None, build_log=build_log, node=self.node, engine_lost=engine_lost)


def _retryable_preparation(exc: BaseException) -> bool:
    """Engine hiccups are retried; a build that failed on its own inputs is not."""
    return isinstance(exc, InfrastructureError) and not isinstance(exc, ImageBuildError)


class _PristineReader:
    """Reads base-commit files from the one-commit export (``HEAD``; submodule content
    included), or from the source repository at the base commit.

    One listing of the whole tree (``git ls-tree -r``, which the restore plan needs anyway)
    gives every path's object and mode, and each file is read once (``git cat-file``)
    however many steps ask for it: the test patch, the canaries and the scans read the
    same files (three git processes per file and per step before)."""

    def __init__(self, repo_path: Path, commit: str) -> None:
        self._repo = GitDir(repo_path)
        self._commit = commit
        self._lock = threading.Lock()
        self._entries: dict[str, TreeEntry] | None = None
        self._files: dict[str, tuple[bytes, int] | None] = {}
        self._paths: frozenset[str] | None = None

    def _listing(self) -> dict[str, TreeEntry]:
        if self._entries is None:
            self._entries = {e.path: e for e in self._repo.ls_tree(self._commit)}
        return self._entries

    def read(self, path: str) -> tuple[bytes, int] | None:
        """The bytes and mode of a file (a blob: regular file or symlink) of the pristine
        tree, or None when it has none at ``path``."""
        with self._lock:
            if path not in self._files:
                entry = self._listing().get(path)
                self._files[path] = None if entry is None or entry.type != "blob" else (
                    bytes(self._repo.run("cat-file", "blob", entry.oid, binary=True)), int(entry.mode, 8))
            return self._files[path]

    def paths(self) -> frozenset[str]:
        """Every file path of the pristine tree."""
        with self._lock:
            if self._paths is None:
                self._paths = frozenset(p for p, e in self._listing().items() if e.type == "blob")
            return self._paths

    def close(self) -> None:
        self._files.clear()
