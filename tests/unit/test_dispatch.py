"""Which task starts next (harness.run.executors.dispatch): a version's later tasks wait for its
first to finish only while another version's task can start instead; never an idle
worker; a bounded look-ahead; order kept otherwise."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from harness.evaluation.tasks import RunConfig, Task, TaskOutcome, TaskRequest
from harness.grading.status import InstanceStatus
from harness.inputs.instances import Instance
from harness.inputs.predictions import Prediction
from harness.results.report import InstanceResult
from harness.run.executors import LocalExecutor, NodeSetup
from harness.run.executors.dispatch import SpreadDispatch, environment_group


def _request(iid: str, version: str, repo: str = "x/y") -> TaskRequest:
    return TaskRequest(Task(Instance(iid, repo, "0" * 40, "", "", ("t::a",), (), version=version),
                            Prediction(iid, "m", "patch")), None, iid)


def _ids(requests) -> list[str]:
    return [r.task.instance.instance_id for r in requests]


def test_a_cold_versions_later_tasks_give_way_to_another_versions_first():
    dispatch = SpreadDispatch([_request("a1", "1"), _request("a2", "1"), _request("a3", "1"),
                               _request("b1", "2"), _request("b2", "2"), _request("c1", "3")])
    first, second = dispatch.take(), dispatch.take()
    assert _ids([first, second]) == ["a1", "b1"]  # not a2: it would wait for a1's environment
    assert _ids([dispatch.take()]) == ["c1"]
    dispatch.finished(first)  # version 1's environment exists: its tasks go in order, in parallel
    assert _ids([dispatch.take(), dispatch.take()]) == ["a2", "a3"]
    assert _ids([dispatch.take()]) == ["b2"]  # only version 2 is left: no worker is kept idle
    assert dispatch.take() is None


def test_the_set_order_is_kept_when_versions_do_not_repeat_or_are_warm():
    requests = [_request(f"i{n}", str(n)) for n in range(5)]
    dispatch = SpreadDispatch(requests)
    assert _ids([dispatch.take() for _ in range(5)]) == _ids(requests)
    warm = SpreadDispatch([_request("a1", "1"), _request("a2", "1"), _request("b1", "2")])
    dispatch_first = warm.take()
    warm.finished(dispatch_first)
    assert _ids([warm.take(), warm.take()]) == ["a2", "b1"]


def test_the_repository_is_part_of_the_group():
    same_version = [_request("a1", "1.0", "o/a"), _request("b1", "1.0", "o/b")]
    assert environment_group(same_version[0]) != environment_group(same_version[1])
    dispatch = SpreadDispatch(same_version)
    assert _ids([dispatch.take(), dispatch.take()]) == ["a1", "b1"]


def test_requests_are_read_at_most_a_window_ahead():
    pulled: list[int] = []

    def source():
        for n in range(1000):
            pulled.append(n)
            yield _request(f"a{n}", "1")

    dispatch = SpreadDispatch(source(), window=8)
    dispatch.take()
    dispatch.take()
    assert len(pulled) <= 8 + 1


class _RecordingEvaluator:
    """Stands in for TaskEvaluator: records the order tasks start in."""

    def __init__(self) -> None:
        self.config = RunConfig(run_id="r", output_dir=Path("/nonexistent"), cache_dir=Path("/nonexistent"))
        self.node = "fake"
        self.started: list[str] = []
        self.lock = threading.Lock()

    def evaluate(self, request: TaskRequest) -> TaskOutcome:
        with self.lock:
            self.started.append(request.task.instance.instance_id)
        time.sleep(0.05)
        iid = request.task.instance.instance_id
        return TaskOutcome(request.task.key, InstanceResult(iid, "x/y", "m", InstanceStatus.FULL, resolved=True))


def test_the_local_executor_starts_two_versions_first_environments_side_by_side():
    evaluator = _RecordingEvaluator()
    setup = NodeSetup(RunConfig(run_id="r", output_dir=Path("/nonexistent"), cache_dir=Path("/nonexistent")), "s")
    setup.bind(evaluator)
    requests = [_request("a1", "1"), _request("a2", "1"), _request("a3", "1"), _request("b1", "2"),
                _request("b2", "2")]
    done: list[str] = []
    LocalExecutor(2).run(setup, iter(requests), lambda request, outcome: done.append(request.task.instance.instance_id))
    # the two workers take one task each at once: which thread records first is the scheduler's choice
    assert sorted(evaluator.started[:2]) == ["a1", "b1"]
    assert sorted(done) == sorted(_ids(requests))
