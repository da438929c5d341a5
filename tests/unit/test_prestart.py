"""A task's sandbox readied while the current tasks run (harness/evaluation/prestart.py and
the local executor's look-ahead): each readied sandbox goes to its own task only, the
next request is readied only once its version's environment exists, and nothing readied
outlives the run."""

from __future__ import annotations


from harness.evaluation.prestart import Prestarted, PrestartPool
from harness.evaluation.tasks import TaskOutcome, TaskRequest
from harness.inputs.instances import Instance
from harness.inputs.predictions import Prediction
from harness.evaluation.tasks import Task
from harness.run.executors import LocalExecutor
from tests.unit.test_executors import FakeEvaluator, _setup


def test_a_readied_sandbox_goes_to_its_own_task_once():
    pool = PrestartPool()
    pool.begin("a")
    assert pool.offer("a", Prestarted("prepared-a", "box-a")) is True
    assert pool.take("b") is None                     # never another task's
    taken = pool.take("a")
    assert taken is not None and taken.sandbox == "box-a"
    assert pool.take("a") is None                     # once


def test_a_task_that_started_first_leaves_the_late_sandbox_to_be_released():
    pool = PrestartPool()
    pool.begin("a")
    assert pool.take("a") is None                     # the task started while its sandbox was starting
    assert pool.offer("a", Prestarted("p", "box")) is False   # the caller releases it
    assert pool.drain() == []
    pool.begin("b")
    assert pool.offer("b", None) is False             # a failed pre-start leaves nothing


def test_what_no_task_took_is_handed_back_when_the_run_ends():
    pool = PrestartPool()
    for token in ("a", "b"):
        pool.begin(token)
        pool.offer(token, Prestarted(token, f"box-{token}"))
    pool.begin("c")                                    # still starting when the run ends
    assert sorted(r.sandbox for r in pool.drain()) == ["box-a", "box-b"]
    assert pool.offer("c", Prestarted("c", "box-c")) is False


class ReadyingEvaluator(FakeEvaluator):
    """Records when each request was readied and evaluated."""

    def __init__(self) -> None:
        super().__init__(delay=0.2)
        self.events: list[tuple[str, str]] = []
        self.dropped = 0

    def prestart(self, request: TaskRequest) -> None:
        with self._lock:
            self.events.append(("ready", request.token))

    def evaluate(self, request: TaskRequest) -> TaskOutcome:
        with self._lock:
            self.events.append(("evaluate", request.token))
        return super().evaluate(request)

    def drop_prestarted(self) -> None:
        self.dropped += 1


def _request(n: int, version: str) -> TaskRequest:
    iid = f"x__y-{n}"
    task = Task(Instance(iid, "x/y", "0" * 40, "", "", ("t::a",), (), version=version), Prediction(iid, "m", "p"))
    return TaskRequest(task, None, f"t{n}")


def test_the_executor_readies_the_next_request_once_its_version_is_warm_and_before_it_runs():
    evaluator = ReadyingEvaluator()
    requests = [_request(n, "1.0") for n in range(5)]
    LocalExecutor(1).run(_setup(evaluator), iter(requests), lambda request, outcome: None)
    order = evaluator.events
    readied = [token for kind, token in order if kind == "ready"]
    # t0 is running and its version cold when t1 is taken: t1 is not readied; from then on
    # the version is warm and each next request is readied while the one before runs
    assert readied == ["t2", "t3", "t4"]
    for token in readied:
        assert order.index(("ready", token)) < order.index(("evaluate", token))
    assert [t for kind, t in order if kind == "evaluate"] == [f"t{n}" for n in range(5)]
    assert evaluator.dropped == 1                     # what no task took is released at the end


def test_without_look_ahead_nothing_is_readied():
    evaluator = ReadyingEvaluator()
    LocalExecutor(1, prestart=False).run(_setup(evaluator), iter([_request(n, "1.0") for n in range(3)]),
                                         lambda request, outcome: None)
    assert [kind for kind, _ in evaluator.events] == ["evaluate"] * 3 and evaluator.dropped == 0


def test_a_pre_start_whose_task_already_started_starts_nothing():
    """The look-ahead runs one pre-start at a time, so one can come after its task started on
    its own (queued behind a pre-start that built an image). It must not begin: its sandbox
    would be nobody's and wait, running, until the run ends (16 at once in a Verified run at
    8376c12)."""
    pool = PrestartPool()
    assert pool.take("a") is None            # the task started; its pre-start had not begun
    assert pool.begin("a") is False          # so it does not begin
    assert pool.offer("a", Prestarted("p", "box")) is False
    assert pool.drain() == []
    assert pool.begin("b") is True           # another task's is unaffected


def test_a_late_pre_start_on_the_node_prepares_and_starts_nothing():
    """TaskEvaluator.prestart for a task that already started returns before preparing or
    starting anything (at 8376c12 it prepared, started a sandbox and kept it)."""
    from types import SimpleNamespace
    from harness.evaluation.node import TaskEvaluator

    calls = []
    node = TaskEvaluator.__new__(TaskEvaluator)
    node.prestarted, node._engine_lost, node.node = PrestartPool(), False, "n"
    node.config = SimpleNamespace(run_id="r")
    node.preparer = SimpleNamespace(prepare=lambda instance: calls.append("prepare") or SimpleNamespace(
        image=SimpleNamespace(tag="t"), spec=SimpleNamespace(service_hosts={}, needs_net_admin=False, cpus=None)))
    node.backend = SimpleNamespace(stopped=False, start=lambda *a, **k: calls.append("start") or "box")
    request = _request(1, "1.0")
    assert node.prestarted.take(request.token) is None     # the task started first
    node.prestart(request)
    assert calls == [] and node.prestarted.drain() == []
    other = _request(2, "1.0")
    node.prestart(other)                                     # a timely one still readies its task
    assert calls == ["prepare", "start"] and node.prestarted.take(other.token).sandbox == "box"
