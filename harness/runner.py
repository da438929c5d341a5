"""The batch: what to run, in which order, and where the results go.

:class:`BatchRunner` turns (instances, predictions) into tasks, checks every task's
repository up front (missing commits, objects and submodules are graded
``repository_unavailable`` before anything is built), prepares each task's images
(:mod:`harness.preparation`; shared layers are built once, under locks), evaluates it with bounded retries for
infrastructure errors only, and writes every result atomically. *Where* a task runs is
the :class:`Executor`'s business (threads on this machine here; a Ray executor spreading
tasks over machines would implement the same protocol) and grading never depends on it.
"""

from __future__ import annotations

import concurrent.futures
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Protocol, TypeVar

import docker
from tenacity import (RetryCallState, Retrying, retry_if_exception, retry_if_exception_type, stop_after_attempt,
                      wait_exponential)

from harness import __version__
from harness.engine.sandbox import DockerBackend, Limits
from harness.errors import ContainerDied, ImageBuildError, InfrastructureError, InputError, ServiceUnavailable
from harness.evaluation import EvalConfig, Evaluation, Evaluator, exception_record
from harness.grading.status import ErrorReason, InstanceStatus
from harness.hashing import content_hash
from harness.instances import Instance
from harness.manifest import task_pins
from harness.logs import get_logger
from harness.paths import RunPaths
from harness.predictions import Prediction
from harness.preparation import Prepared, Preparer
from harness.repos import GitDir, RepositoryUnavailable, blob_mode, read_blob
from harness.report import InstanceResult, write_json_atomic, write_text_atomic
from harness.specs import EnvSpec

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    """Runs ``work`` over tasks and calls ``on_done`` as each finishes (any order)."""

    def run(self, tasks: list[T], work: Callable[[T], R], on_done: Callable[[T, R], None]) -> None: ...


class LocalExecutor:
    """A thread pool on this machine; each task is isolated in its own container."""

    def __init__(self, max_workers: int = 1) -> None:
        self.max_workers = max(1, max_workers)

    def run(self, tasks, work, on_done) -> None:
        with concurrent.futures.ThreadPoolExecutor(self.max_workers, thread_name_prefix="harness") as pool:
            futures = {pool.submit(work, task): task for task in tasks}
            for future in concurrent.futures.as_completed(futures):
                on_done(futures[future], future.result())


@dataclass(frozen=True)
class RunConfig:
    run_id: str
    output_dir: Path
    cache_dir: Path
    eval: EvalConfig = field(default_factory=EvalConfig)
    max_workers: int = 1
    retries: int = 3
    limits: Limits = field(default_factory=Limits)
    force: bool = False
    #: a reference-patch run of the same instances: collected test ids are compared with it
    control_dir: Path | None = None
    #: the run's label on its containers (default: the run id); ``harness validate`` gives
    #: its gold-1..N runs labels of their own, so that no other process's cleanup of a run
    #: called gold-1 removes them
    label: str | None = None

    def grading_key(self) -> str:
        return content_hash({"eval": self.eval.as_dict(), "limits": self.limits.__dict__, "version": __version__})


@dataclass(frozen=True)
class Task:
    instance: Instance
    prediction: Prediction


#: Files a result may leave beside report.json; all are removed before a new one is written.
STALE_ARTEFACTS = ("test_output.txt", "results.xml", "build.log", "commands.json", "patch.diff", "instance.json")

_PROTECTED_CACHE: dict[Path, frozenset[str]] = {}


def protected_modules(wheel_dir: Path) -> frozenset[str]:
    """Top-level module names a repository must not shadow: the standard library's and
    those of every wheel in the environment (the test runner and its plugins included)."""
    import sys
    import zipfile
    if wheel_dir not in _PROTECTED_CACHE:
        names = set(sys.stdlib_module_names) | {"pytest", "_pytest", "py", "pluggy"}
        for wheel in Path(wheel_dir).glob("*.whl"):
            try:
                with zipfile.ZipFile(wheel) as archive:
                    for entry in archive.namelist():
                        top = entry.split("/", 1)[0]
                        if top.endswith((".dist-info", ".data")):
                            continue
                        names.add(top[:-3] if top.endswith(".py") else top.split(".", 1)[0])
            except (OSError, zipfile.BadZipFile):
                continue
        _PROTECTED_CACHE[wheel_dir] = frozenset(n for n in names if n and not n.startswith("__"))
    return _PROTECTED_CACHE[wheel_dir]


class BatchRunner:
    def __init__(self, config: RunConfig, client: docker.DockerClient, preparer: Preparer,
                 executor: Executor | None = None,
                 progress: Callable[[InstanceResult], None] | None = None) -> None:
        self.config = config
        self.client = client
        self.preparer = preparer
        self.paths = RunPaths.create(config.output_dir, config.run_id)
        self.backend = DockerBackend(client, config.label or config.run_id, limits=config.limits,
                                     run_dir=content_hash(str(self.paths.root)))
        self.executor = executor or LocalExecutor(config.max_workers)
        self.progress = progress
        self._lock = threading.Lock()
        #: per task key ("id" or "id/attempt-n"): the pins that decided its result (manifest.json)
        self.pins: dict[str, dict] = {}

    # ------------------------------------------------------------------ one task
    def evaluate(self, task: Task) -> InstanceResult:
        instance, prediction = task.instance, task.prediction
        log = get_logger(instance_id=instance.instance_id, attempt=prediction.attempt,
                         run_id=self.config.run_id)
        log.info("instance.start", model=prediction.model_name_or_path)
        started = time.monotonic()
        try:
            prepared = self._prepare_with_retries(instance, log)
        except (InputError, RepositoryUnavailable) as exc:
            reason = (ErrorReason.REPOSITORY_UNAVAILABLE if isinstance(exc, RepositoryUnavailable)
                      else ErrorReason.MALFORMED_INSTANCE)
            return self._failed(task, reason, exc, started, log)
        except ImageBuildError as exc:
            return self._failed(task, ErrorReason.ENVIRONMENT_BUILD_FAILED, exc, started, log, exc.log or "",
                                log_path=getattr(exc, "log_path", None))
        except Exception as exc:  # a bug or an unexpected engine state: recorded, batch goes on
            return self._failed(task, ErrorReason.HARNESS_ERROR, exc, started, log)
        prep_seconds = time.monotonic() - started
        with self._lock:
            self.pins[task.prediction.key] = task_pins(self.cache_key(task, prepared), prepared)
        if not self.config.force:
            previous = self._reusable(task, prepared)
            if previous is not None:
                log.info("instance.reused", status=previous.status.value)
                return previous

        attempts: list[dict] = []

        def record(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            attempts.append({"attempt": state.attempt_number, "error": type(exc).__name__ if exc else None,
                             "message": str(exc)[:500] if exc else None})
            log.warning("instance.retry", attempt=state.attempt_number, error=str(exc)[:200])

        pristine_repo = _PristineReader(prepared.export_path or prepared.repo_path,
                                        "HEAD" if prepared.export_path else instance.base_commit)
        try:
            evaluation: Evaluation | None = None
            for attempt in Retrying(stop=stop_after_attempt(self.config.retries),
                                    wait=wait_exponential(multiplier=0.5, max=8),
                                    retry=retry_if_exception_type(InfrastructureError),
                                    before_sleep=record, reraise=True):
                with attempt:
                    evaluator = Evaluator(instance, prediction, prepared.spec, pristine_repo.read,
                                          self._eval_config(prepared.spec), prepared.protected_modules)
                    evaluation = evaluator.run(lambda: self.backend.start(
                        prepared.image.tag, instance.instance_id, hosts=prepared.spec.service_hosts,
                        net_admin=prepared.spec.needs_net_admin))
        except InfrastructureError as exc:
            attempts.append({"attempt": len(attempts) + 1, "error": type(exc).__name__, "message": str(exc)[:500]})
            if isinstance(exc, ServiceUnavailable):
                reason = ErrorReason.SERVICE_UNAVAILABLE
            elif isinstance(exc, ContainerDied):
                reason = ErrorReason.CONTAINER_DIED
            else:
                reason = ErrorReason.HARNESS_ERROR
            result = self._failed(task, reason, exc, started, log, write=False)
            result.attempts = attempts
            self._write(task, result, None)
            return result
        except Exception as exc:
            return self._failed(task, ErrorReason.HARNESS_ERROR, exc, started, log)
        finally:
            pristine_repo.close()
        result = evaluation.result
        result.attempts = attempts
        result.timings["prepare_images"] = round(prep_seconds, 4)
        result.timings["wall"] = round(time.monotonic() - started, 4)
        result.image = {"tag": prepared.image.tag, "id": prepared.image.image_id,
                        "inputs_hash": prepared.image.inputs_hash, "env_tag": prepared.env_image.tag,
                        "env_id": prepared.env_image.image_id, "tree_sha": prepared.tree_sha,
                        "built": prepared.image.built, "build_seconds": round(prepared.image.build_seconds, 3),
                        "interpreter": prepared.interpreter, "build_logs": prepared.build_logs,
                        "prepare_seconds": prepared.timings, "submodules": prepared.submodules}
        result.checksums.update({k: v for k, v in self.cache_key(task, prepared).items() if k != "image_inputs"})
        if self.config.control_dir is not None:
            compare_with_control(result, instance, self.config.control_dir)
        self._write(task, result, evaluation)
        log.info("instance.done", status=result.status.value, resolved=result.resolved,
                 error_reason=result.error_reason.value if result.error_reason else None,
                 seconds=result.timings.get("wall"))
        return result

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

    def _reusable(self, task: Task, prepared: Prepared) -> InstanceResult | None:
        """A complete earlier result for the same inputs, or None (resume)."""
        path = self.paths.instance_dir(task.instance.instance_id, task.prediction.attempt) / "report.json"
        previous = load_report(path) if path.exists() else None
        if previous is None or previous.error_origin == "harness":
            return None
        key = self.cache_key(task, prepared)
        recorded = {**previous.checksums, "image_inputs": previous.image.get("inputs_hash")}
        if any(recorded.get(k) != v for k, v in key.items()):
            return None
        return previous

    def preflight(self, tasks: list[Task]) -> dict[str, dict]:
        """Prepare every task (building what is missing) and return its pins, without
        evaluating anything: used to check a run against a pinned manifest first."""
        pins = {}
        for task in tasks:
            prepared = self._prepare_with_retries(task.instance, get_logger(instance_id=task.instance.instance_id))
            pins[task.prediction.key] = task_pins(self.cache_key(task, prepared), prepared)
        return pins

    def _prepare_with_retries(self, instance: Instance, log) -> Prepared:
        for attempt in Retrying(stop=stop_after_attempt(self.config.retries),
                                wait=wait_exponential(multiplier=0.5, max=8),
                                retry=retry_if_exception(_retryable_preparation),
                                reraise=True):
            with attempt:
                return self.preparer.prepare(instance)
        raise AssertionError("unreachable")

    def _failed(self, task: Task, reason: ErrorReason, exc: BaseException, started: float, log,
                build_log: str = "", write: bool = True, log_path: str | None = None) -> InstanceResult:
        instance, prediction = task.instance, task.prediction
        result = InstanceResult(
            instance_id=instance.instance_id, repo=instance.repo,
            model_name_or_path=prediction.model_name_or_path, status=InstanceStatus.INVALID,
            attempt=prediction.attempt, error_reason=reason, error_detail=str(exc)[-4000:],
            patch_is_None=prediction.model_patch is None, patch_exists=not prediction.is_empty,
            f2p_failure=list(instance.fail_to_pass), p2p_failure=list(instance.pass_to_pass),
            checksums={"instance": instance.checksum(), "patch": prediction.checksum(),
                       "grading": self.config.grading_key()},
            exception=exception_record(exc),
        )
        if build_log:
            result.integrity_details["build_log_tail"] = build_log[-4000:]
            result.image = {"build_log": log_path, "build_log_file": "build.log"}
        result.timings["wall"] = round(time.monotonic() - started, 4)
        log.error("instance.error", error_reason=reason.value, error=str(exc)[:300])
        if write:
            self._write(task, result, None, build_log=build_log)
        return result

    def _write(self, task: Task, result: InstanceResult, evaluation: Evaluation | None,
               build_log: str = "") -> None:
        directory = self.paths.instance_dir(task.instance.instance_id, task.prediction.attempt)
        directory.mkdir(parents=True, exist_ok=True)
        # An earlier attempt's artefacts never stay beside the new report (report.json
        # goes first, so a directory without it is incomplete whatever else it holds).
        for stale in ("report.json", *STALE_ARTEFACTS):
            (directory / stale).unlink(missing_ok=True)
        if build_log:
            write_text_atomic(directory / "build.log", build_log)
        write_text_atomic(directory / "patch.diff", task.prediction.model_patch or "")
        write_json_atomic(directory / "instance.json", task.instance.to_record())
        write_json_atomic(directory / "commands.json", [c.__dict__ for c in result.commands])
        if evaluation is not None:
            write_text_atomic(directory / "test_output.txt", evaluation.outputs.test_output)
            if evaluation.outputs.junit_xml is not None:
                write_text_atomic(directory / "results.xml", evaluation.outputs.junit_xml)
        write_json_atomic(directory / "report.json", result.to_report())  # last: marks completion

    # ------------------------------------------------------------------ the batch
    def run(self, tasks: list[Task]) -> list[InstanceResult]:
        """Evaluate every task; one task's failure never stops the others."""
        results: list[InstanceResult] = []

        def on_done(task: Task, result: InstanceResult) -> None:
            # Everything is in report.json already; keep only what the summary and the
            # table need, so a batch's memory does not grow with its command logs.
            result.commands, result.collected, result.parse_notes = [], [], []
            with self._lock:
                results.append(result)
            if self.progress:
                self.progress(result)

        # Containers left by an earlier, killed invocation of this run are removed first.
        leftovers = self.backend.cleanup_run()
        if leftovers:
            get_logger(run_id=self.config.run_id).warning("run.cleaned_leftovers", containers=leftovers)
        # Repositories first, for the whole set: a missing commit, object or submodule is
        # graded before any image is built.
        unavailable = self.preparer.check_repositories(list({t.instance.instance_id: t.instance
                                                              for t in tasks}.values()))
        runnable = []
        for task in tasks:
            exc = unavailable.get(task.instance.instance_id)
            if exc is None:
                runnable.append(task)
                continue
            log = get_logger(instance_id=task.instance.instance_id, run_id=self.config.run_id)
            on_done(task, self._failed(task, ErrorReason.REPOSITORY_UNAVAILABLE, exc, time.monotonic(), log))
        try:
            self.executor.run(runnable, self.evaluate, on_done)
        finally:
            self.backend.cleanup_run()
        order = {(t.instance.instance_id, t.prediction.attempt): i for i, t in enumerate(tasks)}
        results.sort(key=lambda r: order.get((r.instance_id, r.attempt), 0))
        return results


def compare_with_control(result: InstanceResult, instance: Instance, control_dir: Path) -> None:
    """Flag a run that collected fewer of the graded tests than the reference-patch
    control run of the same instance did (tests deleted, renamed or hidden)."""
    control = load_report(Path(control_dir) / instance.instance_id / "report.json")
    if control is None or not control.collected or result.status is InstanceStatus.INVALID:
        return
    graded = {*instance.fail_to_pass, *instance.pass_to_pass}
    lost = sorted((graded & set(control.collected)) - set(result.collected))
    result.integrity_details["control_collected"] = len(set(control.collected) & graded)
    if lost:
        result.integrity_flags.append("collected_fewer_than_control")
        result.integrity_details["not_collected_but_in_control"] = lost[:50]


def _retryable_preparation(exc: BaseException) -> bool:
    """Engine hiccups are retried; a build that failed on its own inputs is not."""
    return isinstance(exc, InfrastructureError) and not isinstance(exc, ImageBuildError)


class _PristineReader:
    """Reads base-commit files from the one-commit export (``HEAD``; submodule content
    included), or from the source repository at the base commit."""

    def __init__(self, repo_path: Path, commit: str) -> None:
        self._repo = GitDir(repo_path)
        self._commit = commit
        self._lock = threading.Lock()

    def read(self, path: str):
        with self._lock:
            data = read_blob(self._repo, self._commit, path)
            if data is None:
                return None
            return data, blob_mode(self._repo, self._commit, path) or 0o100644

    def close(self) -> None:
        pass


def load_report(path: Path) -> InstanceResult | None:
    try:
        return InstanceResult.from_report(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def iter_tasks(instances: Iterable[Instance], predictions: Iterable[Prediction]) -> tuple[list[Task], list[str]]:
    """Pair predictions with instances (in instance order). Returns tasks and the ids of
    predictions whose instance is not in the set."""
    by_id: dict[str, list[Prediction]] = {}
    for p in predictions:
        by_id.setdefault(p.instance_id, []).append(p)
    tasks = []
    known = set()
    for inst in instances:
        known.add(inst.instance_id)
        for pred in sorted(by_id.get(inst.instance_id, []), key=lambda p: p.attempt or 0):
            tasks.append(Task(inst, pred))
    orphans = sorted(set(by_id) - known)
    return tasks, orphans
