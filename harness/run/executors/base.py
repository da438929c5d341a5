"""The executor seam.

An executor runs :class:`~harness.evaluation.tasks.TaskRequest` s and hands each
:class:`~harness.evaluation.tasks.TaskOutcome` (data) back to the driver::

    class Executor(Protocol):
        def run(self, setup: NodeSetup, requests: Iterable[TaskRequest],
                on_done: Callable[[TaskRequest, TaskOutcome], None]) -> None: ...
        def cleanup(self, setup: NodeSetup) -> int: ...

* ``run`` consumes ``requests`` lazily and keeps at most ``--max-workers`` of them in
  flight (the same meaning whatever the executor); ``on_done`` is called once per
  request, from any thread, in any order. A task's own failures are outcomes, never
  exceptions. KeyboardInterrupt stops every task of the run and propagates.
* ``cleanup`` removes the run's containers (the run directory's label scope) on every
  engine the executor uses: before the run (an earlier invocation's leftovers), after
  it, and on Ctrl-C.

:class:`NodeSetup` is everything a node needs to evaluate tasks of one run, and nothing
that only exists in the driver's process: the run configuration, the spec registry's
data, where repositories come from. It is picklable; on a node, :meth:`NodeSetup.evaluator`
opens (once per process) a :class:`~harness.evaluation.node.TaskEvaluator` against that node's
engine (``DOCKER_HOST``) and cache (``HARNESS_CACHE_DIR``, else the driver's path).
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Protocol

from harness.errors import InfrastructureError
from harness.grading.status import ErrorReason
from harness.logs import get_logger

if TYPE_CHECKING:
    from harness.evaluation.node import TaskEvaluator
    from harness.evaluation.tasks import RunConfig, TaskOutcome, TaskRequest

EXECUTORS = ("local", "ray")
#: After a deadline kill, how long the evaluation gets to notice its container is gone.
KILL_GRACE_SECONDS = 30.0


class Executor(Protocol):
    def run(self, setup: "NodeSetup", requests: Iterable["TaskRequest"],
            on_done: Callable[["TaskRequest", "TaskOutcome"], None]) -> None: ...

    def cleanup(self, setup: "NodeSetup") -> int: ...


@dataclass
class NodeSetup:
    """What a node needs to evaluate tasks of one run (picklable; see the module doc)."""

    config: "RunConfig"
    scope: str
    specs: object = None            # harness.inputs.specs.SpecRegistry
    repos: object = None            # harness.inputs.repos.RepoResolver (paths resolved on the node)
    harness_version: str = ""
    harness_commit: str | None = None
    #: identifies this setup across processes (a node opens one evaluator per run)
    run_key: str = field(default_factory=lambda: secrets.token_hex(8))
    _local: "TaskEvaluator | None" = field(default=None, repr=False, compare=False)

    @classmethod
    def describe(cls, config: "RunConfig", scope: str, *, specs=None, repos=None) -> "NodeSetup":
        from harness._version import __version__
        from harness.buildinfo import build_info
        return cls(config, scope, specs, repos, __version__, build_info().commit)

    def bind(self, evaluator: "TaskEvaluator") -> None:
        """Use this in-process evaluator here (the driver's own engine)."""
        self._local = evaluator

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_local"] = None  # holds an engine connection: never leaves this process
        return state

    def evaluator(self) -> "TaskEvaluator":
        if self._local is not None:
            return self._local
        with _OPEN_LOCK:
            key = self.run_key
            if key not in _OPENED:
                for earlier in _OPENED.values():  # one run at a time per worker process: the last
                    earlier.preparer.images.tracker.release()  # run's images are no longer leased
                _OPENED.clear()
                _OPENED[key] = self.open()
            return _OPENED[key]

    def open(self, client=None) -> "TaskEvaluator":
        """A TaskEvaluator against this node's engine and cache."""
        import os
        from harness.engine.client import connect
        from harness.inputs.repos import RepoResolver
        from harness.preparation.preparer import Preparer
        client = client or connect()
        cache_dir = Path(os.environ.get("HARNESS_CACHE_DIR") or self.config.cache_dir).expanduser()
        repos: RepoResolver = self.repos
        # this machine's cache: the demo set's repositories are built into it when asked for
        resolver = RepoResolver(cache_dir, repos.repos_dir, repos.overrides, allow_clone=repos.allow_clone)
        config = self.config
        if cache_dir != Path(config.cache_dir):
            from dataclasses import replace
            config = replace(config, cache_dir=cache_dir)
        preparer = Preparer(client, self.specs, resolver, cache_dir)
        if config.registry:
            preparer.images.use_registry(config.registry)
        if config.prebuilt is not None:
            preparer.use_prebuilt(config.prebuilt)
        return self.make_evaluator(config, client, preparer)

    def make_evaluator(self, config: "RunConfig", client, preparer) -> "TaskEvaluator":
        """What evaluates this run's requests on a node: grading's TaskEvaluator (an agent
        run's setup gives its attempt evaluator, of the same shape)."""
        from harness.evaluation.node import TaskEvaluator
        return TaskEvaluator(config, client, preparer, scope=self.scope)

    def failure_outcome(self, request: "TaskRequest", reason: ErrorReason, exc: BaseException, lost: list):
        """The outcome of a request whose node could not return one (lost, cancelled, a set-up
        error on the node): grading's INVALID result with the reason."""
        from harness.evaluation.tasks import TaskOutcome, failure_result
        result = failure_result(request.task, reason, exc, self.config.grading_key())
        result.attempts = list(lost)
        return TaskOutcome(request.task.key, result)


_OPENED: dict[str, "TaskEvaluator"] = {}
_OPEN_LOCK = threading.Lock()


def run_with_deadline(evaluator: "TaskEvaluator", request: "TaskRequest", timeout: float) -> "TaskOutcome":
    """Evaluate ``request`` on this node within ``timeout`` seconds.

    Past the deadline the task's containers are removed (which ends any command still
    running in them) and a ``deadline_exceeded`` outcome is returned, whether or not the
    evaluation thread has finished: a stuck task never holds the run open. Its late
    result, if any, is discarded. Returns ``(outcome)``; ``outcome.node`` names the node.
    """
    box: dict = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["outcome"] = evaluator.evaluate(request)
        except BaseException as exc:  # noqa: BLE001 — reported as the task's outcome below
            box["error"] = exc
        finally:
            done.set()

    started = time.monotonic()
    thread = threading.Thread(target=target, name=f"task-{request.task.key}", daemon=True)
    thread.start()
    if not done.wait(timeout):
        log = get_logger(instance_id=request.task.instance.instance_id, run_id=evaluator.config.run_id,
                         node=evaluator.node)
        killed = evaluator.kill_task(request.token)
        log.error("instance.deadline", seconds=timeout, containers_removed=killed)
        done.wait(KILL_GRACE_SECONDS)
        outcome = evaluator._failed(request.task, ErrorReason.DEADLINE_EXCEEDED, InfrastructureError(
            f"the task ran past its deadline of {timeout:.0f} s (--task-timeout) on node {evaluator.node}; "
            f"killed with its container"), started, log)
        outcome.engine_lost = False
        return outcome
    if "error" in box:
        exc = box["error"]
        if isinstance(exc, KeyboardInterrupt):
            raise exc
        log = get_logger(instance_id=request.task.instance.instance_id, run_id=evaluator.config.run_id)
        return evaluator._failed(request.task, ErrorReason.HARNESS_ERROR, exc, started, log)
    return box["outcome"]
