"""The data that crosses the executor seam: what to run, with which settings, and what comes back.

The driver (:mod:`harness.run.batch`) turns tasks into :class:`TaskRequest` s; an executor
(:mod:`harness.run.executors`) carries each to a node, whose :class:`~harness.evaluation.node.TaskEvaluator`
returns a :class:`TaskOutcome`. Everything here is plain data (and the pure helpers that make
it), so that the driver, the executors and the node share it without importing one another.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from harness import incontainer
from harness._version import __version__
from harness.engine.sandbox import Limits
from harness.evaluation.setup import EvalConfig, RunOutputs, exception_record
from harness.grading.status import ErrorReason, InstanceStatus
from harness.hashing import content_hash
from harness.inputs.instances import Instance
from harness.inputs.predictions import Prediction
from harness.results.report import InstanceResult

__all__ = ["RunConfig", "Task", "TaskOutcome", "TaskRequest", "failure_result", "iter_tasks", "node_name"]


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
    #: seconds one task (preparation + evaluation) may take before it is killed with its
    #: container and recorded as ``deadline_exceeded`` (never retried)
    task_timeout: float = 7200.0
    #: HOST:PORT of a registry: images are pulled from it instead of built, and pushed after a build
    registry: str | None = None
    #: the run's canary seed: each instance's is derived from it (None: a fresh random seed
    #: per task); a control's seed takes precedence for the instances it ran
    canary_seed: int | None = None
    #: how often one task is re-queued after the node running it was lost
    requeue_budget: int = 3
    #: a harness.engine.prebuilt.PrebuiltSource: environments pulled from SWE-bench's prebuilt
    #: images instead of built (--namespace)
    prebuilt: object | None = None
    #: the run's label on its containers (default: the run id); ``harness validate`` gives
    #: its gold-1..N runs labels of their own, so that no other process's cleanup of a run
    #: called gold-1 removes them
    label: str | None = None

    def grading_key(self) -> str:
        # the trusted in-container files (the result reporter) are installed at run time, so
        # they are an input of the grading, not of any image
        return content_hash({"eval": self.eval.as_dict(), "limits": self.limits.__dict__, "version": __version__,
                             "trusted_files": incontainer.digest()})


@dataclass(frozen=True)
class Task:
    instance: Instance
    prediction: Prediction

    @property
    def key(self) -> str:
        return self.prediction.key

    @property
    def is_reference(self) -> bool:
        """The prediction is the instance's own reference patch (read from the bytes, not
        from the model's name)."""
        return self.prediction.model_patch == self.instance.patch


@dataclass(frozen=True)
class TaskRequest:
    """What the driver sends a node for one task."""

    task: Task
    #: the checksums of a complete earlier result of this task in the run directory (its
    #: ``report.json``), or None: the node reuses it when its own inputs still match
    previous: dict | None = None
    #: labels this task's containers (deadline kill, Ctrl-C, a lost node's cleanup)
    token: str = ""
    #: prepare and return the pins only (``--manifest`` checks), evaluate nothing
    pins_only: bool = False


@dataclass
class TaskOutcome:
    """What a node returns for one task: data only; the driver writes it."""

    key: str
    #: None when an earlier result was reused (``reused``) or only pins were asked for
    result: InstanceResult | None = None
    outputs: RunOutputs | None = None
    build_log: str = ""
    pins: dict | None = None
    reused: bool = False
    node: str = ""
    #: the node's engine stopped answering: the driver may re-queue the task elsewhere
    engine_lost: bool = False
    #: the executor's id of the node (Ray's node id), so that a re-queue can avoid it
    node_id: str = ""


def node_name() -> str:
    """This node's name in reports: $HARNESS_NODE_NAME (set by harness node), else the host name."""
    return os.environ.get("HARNESS_NODE_NAME") or socket.gethostname()


def failure_result(task: Task, reason: ErrorReason, exc: BaseException, grading_key: str,
                   node: str = "") -> InstanceResult:
    """An INVALID result for a task that produced no evidence (preparation failed, the
    engine or the node was lost, the deadline passed)."""
    instance, prediction = task.instance, task.prediction
    return InstanceResult(
        instance_id=instance.instance_id, repo=instance.repo,
        model_name_or_path=prediction.model_name_or_path, status=InstanceStatus.INVALID,
        attempt=prediction.attempt, error_reason=reason, error_detail=str(exc)[-4000:],
        patch_is_None=prediction.model_patch is None, patch_exists=not prediction.is_empty,
        f2p_failure=list(instance.fail_to_pass), p2p_failure=list(instance.pass_to_pass),
        checksums={"instance": instance.checksum(), "patch": prediction.checksum(), "grading": grading_key},
        exception=exception_record(exc), node=node,
        # what the agent spent is known whatever became of the grading: kept, not lost with it
        **prediction.usage(),
    )


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
