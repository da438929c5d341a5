"""The executor seam without an engine: deadlines, bounded dispatch, Ctrl-C, the run
directory's lock and label scope, streamed manifest and summary, registry checks."""

from __future__ import annotations

import json
import multiprocessing
import pickle
import threading
import time
from pathlib import Path

import pytest

from harness.atomic import write_json_atomic
from harness.errors import RunDirectoryBusy
from harness.evaluation.tasks import RunConfig, Task, TaskOutcome, TaskRequest
from harness.grading.status import ErrorReason, InstanceStatus
from harness.inputs.instances import Instance
from harness.inputs.predictions import Prediction
from harness.locks import run_directory_lock
from harness.results.report import InstanceResult, summarise_run_directory
from harness.run.batch import run_scope
from harness.run.executors import LocalExecutor, NodeSetup, run_with_deadline
from harness.run.executors import base as executors_base


def _task(n: int = 0) -> Task:
    iid = f"x__y-{n}"
    return Task(Instance(iid, "x/y", "0" * 40, "", "", ("t::a",), ()), Prediction(iid, "m", "patch"))


class FakeEvaluator:
    """Stands in for TaskEvaluator (the node side) where a fault must be injected."""

    def __init__(self, block: threading.Event | None = None, delay: float = 0.0) -> None:
        self.config = RunConfig(run_id="r", output_dir=Path("/nonexistent"), cache_dir=Path("/nonexistent"))
        self.node = "fake"
        self.block = block
        self.delay = delay
        self.killed: list[str] = []
        self.stopped = False
        self.running = 0
        self.peak = 0
        self.cleaned = 0
        self.backend = self
        self._lock = threading.Lock()

    def evaluate(self, request: TaskRequest) -> TaskOutcome:
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            if self.block is not None:
                self.block.wait(30)
            time.sleep(self.delay)
            result = InstanceResult(request.task.instance.instance_id, "x/y", "m", InstanceStatus.FULL, resolved=True)
            return TaskOutcome(request.task.key, result, node=self.node)
        finally:
            with self._lock:
                self.running -= 1

    def kill_task(self, token: str) -> int:
        self.killed.append(token)
        if self.block is not None:
            self.block.set()  # removing the container ends the stuck command
        return 1

    def _failed(self, task, reason, exc, started, log, build_log=""):
        from harness.evaluation.tasks import failure_result
        return TaskOutcome(task.key, failure_result(task, reason, exc, "k", self.node), node=self.node)

    def stop(self) -> None:
        self.stopped = True

    def cleanup_run(self) -> int:
        self.cleaned += 1
        return 0


def _setup(evaluator, **config) -> NodeSetup:
    setup = NodeSetup(RunConfig(run_id="r", output_dir=Path("/nonexistent"), cache_dir=Path("/nonexistent"),
                                **config), "scope")
    setup.bind(evaluator)
    return setup


def test_a_task_past_its_deadline_is_killed_and_recorded(monkeypatch):
    monkeypatch.setattr(executors_base, "KILL_GRACE_SECONDS", 1.0)
    evaluator = FakeEvaluator(block=threading.Event(), delay=60)  # stuck even after the kill
    started = time.monotonic()
    outcome = run_with_deadline(evaluator, TaskRequest(_task(), None, "tok-1"), timeout=0.5)
    assert time.monotonic() - started < 1.0 + 2  # never holds the run open
    assert evaluator.killed == ["tok-1"]
    assert outcome.result.status is InstanceStatus.INVALID
    assert outcome.result.error_reason is ErrorReason.DEADLINE_EXCEEDED
    assert outcome.result.error_origin == "harness" and "deadline" in outcome.result.error_detail


def test_a_task_within_its_deadline_is_untouched():
    evaluator = FakeEvaluator()
    outcome = run_with_deadline(evaluator, TaskRequest(_task(), None, "tok"), timeout=5)
    assert outcome.result.status is InstanceStatus.FULL and evaluator.killed == []


def test_the_local_executor_keeps_max_workers_in_flight_and_reads_requests_lazily():
    evaluator = FakeEvaluator(delay=0.05)
    pulled = []

    def requests():
        for n in range(12):
            pulled.append(n)
            yield TaskRequest(_task(n), None, f"t{n}")

    done = []
    LocalExecutor(3).run(_setup(evaluator), requests(), lambda request, outcome: done.append(outcome.key))
    assert sorted(done) == sorted(_task(n).key for n in range(12))
    assert evaluator.peak <= 3


def test_ctrl_c_stops_new_work_removes_containers_and_propagates():
    evaluator = FakeEvaluator(delay=0.05)

    def on_done(request, outcome):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        LocalExecutor(2).run(_setup(evaluator), (TaskRequest(_task(n), None, "t") for n in range(10)), on_done)
    assert evaluator.stopped and evaluator.cleaned == 1


def test_a_node_setup_never_ships_the_drivers_engine_connection():
    evaluator = FakeEvaluator()
    setup = _setup(evaluator)
    assert setup.evaluator() is evaluator
    shipped = pickle.loads(pickle.dumps(setup))
    assert shipped._local is None and shipped.run_key == setup.run_key and shipped.scope == "scope"


# ---------------------------------------------------------------------------- the run directory

def _hold_lock(root: str, ready, release) -> None:
    with run_directory_lock(Path(root)):
        ready.set()
        release.wait(30)


def test_a_second_invocation_on_the_same_run_directory_is_refused(tmp_path):
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(str(tmp_path), ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        with pytest.raises(RunDirectoryBusy) as refused:
            with run_directory_lock(tmp_path):
                pass
        assert f"pid {holder.pid}" in str(refused.value) and str(tmp_path) in str(refused.value)
    finally:
        release.set()
        holder.join(30)
    with run_directory_lock(tmp_path):  # released with its process
        pass


def test_the_label_scope_is_the_run_directory_not_the_run_id(tmp_path):
    a, b = tmp_path / "one" / "demo", tmp_path / "two" / "demo"
    assert run_scope(a) != run_scope(b)
    assert run_scope(a) == run_scope(tmp_path / "one" / ".." / "one" / "demo")


def _report(root: Path, iid: str, status: str, reason: str | None = None, attempt: int | None = None) -> None:
    result = InstanceResult(iid, "x/y", "m", InstanceStatus(status), resolved=status == "FULL", attempt=attempt,
                            error_reason=ErrorReason(reason) if reason else None, patch_exists=True)
    directory = root / iid if attempt is None else root / iid / f"attempt-{attempt}"
    write_json_atomic(directory / "report.json", result.to_report())


def test_the_summary_is_built_from_every_report_in_the_directory(tmp_path):
    _report(tmp_path, "a", "FULL")
    _report(tmp_path, "b", "NO")
    _report(tmp_path, "c", "INVALID", "engine_lost")
    _report(tmp_path, "d", "FULL", attempt=1)
    (tmp_path / "e").mkdir()  # no report.json: incomplete, not graded
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "report.json").write_text("{not json")
    summary = summarise_run_directory("r", "m", tmp_path, ["a", "b", "c", "d", "e"], [("a", None), ("c", None)], {})
    assert summary["resolved_ids"] == ["a", "d"] and summary["unresolved_ids"] == ["b"]
    assert summary["error_ids"] == ["c"] and summary["error_reasons"] == {"c": "engine_lost"}
    assert summary["graded_in_directory"] == 4 and summary["total_instances"] == 5
    assert summary["this_invocation"]["submitted_ids"] == ["a", "c"]


def test_the_manifest_is_streamed_into_the_same_document(tmp_path):
    from harness.results.manifest import build_manifest, write_manifest
    pins = {f"id-{n}": {"image_id": f"sha256:{n}", "patch": "p"} for n in range(50)}
    count = write_manifest(tmp_path / "manifest.json", "r", {"timeout": 1}, "gk", iter(pins.items()), {"i": 1})
    written = json.loads((tmp_path / "manifest.json").read_text())
    expected = build_manifest("r", {"timeout": 1}, "gk", pins, {"i": 1})
    written.pop("created_at"), expected.pop("created_at")
    assert count == 50 and written == expected


# ---------------------------------------------------------------------------- registry checks

class _Image:
    def __init__(self, labels, layers, digests):
        self.labels = labels
        self.attrs = {"RootFS": {"Layers": layers}, "RepoDigests": digests}


class _Images:
    def __init__(self, parent):
        self.parent = parent

    def get(self, ref):
        return self.parent


class _Client:
    def __init__(self, parent):
        self.images = _Images(parent)


def test_a_pulled_layer_must_describe_the_inputs_and_sit_on_its_parent():
    from harness.engine.registry import Registry, VerificationFailed
    from harness.hashing import content_hash
    inputs = {"format": 6, "base": "sha256:p", "lock": "l"}
    good_hash = content_hash(inputs)
    parent = _Image({}, ["l1", "l2"], [])
    registry = Registry(_Client(parent), "127.0.0.1:5000")
    ref = "127.0.0.1:5000/harness-env@sha256:d"
    labels = {"org.harness.inputs-hash": good_hash, "org.harness.inputs": json.dumps(inputs)}
    registry._verify(_Image(labels, ["l1", "l2", "l3"], [ref]), f"harness-env:py3.11-{good_hash}", good_hash,
                     "sha256:p", ref)
    bad = [
        (_Image(labels, ["l1", "l2", "l3"], []), good_hash),                                   # not by that digest
        (_Image({**labels, "org.harness.inputs-hash": "0" * 16}, ["l1", "l2", "l3"], [ref]), good_hash),
        (_Image({**labels, "org.harness.inputs": json.dumps({**inputs, "lock": "x"})}, ["l1", "l2", "l3"], [ref]),
         good_hash),                                                                          # labels lie
        (_Image(labels, ["lX", "l2", "l3"], [ref]), good_hash),                                # another parent
    ]
    for image, inputs_hash in bad:
        with pytest.raises(VerificationFailed):
            registry._verify(image, f"harness-env:py3.11-{good_hash}", inputs_hash, "sha256:p", ref)
