"""The run's resolution ahead (harness/run/executors/local.py, dispatch.cold_heads,
bookkeeping.builds.AheadWork): the requirement sets of versions no worker has reached are
resolved on threads of their own, each version once, before its first task; a version a
worker is already on is left to it; the work done ahead is charged to the task that uses it,
on the timeline where it ran."""

from __future__ import annotations

import threading
import time

import pytest

from harness.bookkeeping import builds
from harness.evaluation.tasks import TaskRequest
from harness.run.executors import LocalExecutor
from harness.run.executors.dispatch import SpreadDispatch
from tests.unit.test_dispatch import _ids, _request
from tests.unit.test_executors import FakeEvaluator, _setup


def test_cold_heads_are_each_versions_first_request_not_yet_reached_in_start_order():
    dispatch = SpreadDispatch([_request("a1", "1"), _request("a2", "1"), _request("b1", "2"),
                               _request("c1", "3"), _request("b2", "2"), _request("d1", "4", repo="z/w")])
    assert _ids(dispatch.cold_heads()) == ["a1", "b1", "c1", "d1"]
    first = dispatch.take()                               # a1 starts: version 1 is a worker's now
    assert _ids(dispatch.cold_heads()) == ["b1", "c1", "d1"]
    dispatch.finished(first)                              # version 1 made: nothing to resolve for it
    dispatch.take()                                       # a2 (warm)
    assert _ids(dispatch.cold_heads()) == ["b1", "c1", "d1"]
    dispatch.take()                                       # b1 starts
    assert _ids(dispatch.cold_heads()) == ["c1", "d1"]


class ResolvingEvaluator(FakeEvaluator):
    """Records resolutions ahead and evaluations, in order."""

    def __init__(self, delay: float = 0.1, fail: str = "") -> None:
        super().__init__(delay=delay)
        self.events: list[tuple[str, str]] = []
        self.fail = fail

    def resolve_ahead(self, request: TaskRequest) -> None:
        iid = request.task.instance.instance_id
        with self._lock:
            self.events.append(("resolve", iid))
        if iid == self.fail:   # a real evaluator's resolve_ahead never raises: this checks the executor too
            raise RuntimeError("boom")

    def evaluate(self, request):
        with self._lock:
            self.events.append(("evaluate", request.task.instance.instance_id))
        return super().evaluate(request)


def _run(evaluator, requests, **kwargs) -> list[str]:
    done: list[str] = []
    LocalExecutor(1, prestart=False, **kwargs).run(_setup(evaluator), iter(requests),
                                                   lambda request, outcome: done.append(request.task.instance.instance_id))
    return done


def test_every_version_a_worker_has_not_reached_is_resolved_once_before_its_first_task():
    evaluator = ResolvingEvaluator()
    requests = [_request("a1", "1"), _request("a2", "1"), _request("b1", "2"), _request("b2", "2"),
                _request("c1", "3")]
    done = _run(evaluator, requests)
    assert sorted(done) == sorted(_ids(requests))
    resolved = [iid for kind, iid in evaluator.events if kind == "resolve"]
    assert sorted(resolved) == ["b1", "c1"]               # a1's version was the worker's from the start
    order = evaluator.events
    for iid in resolved:
        assert order.index(("resolve", iid)) < order.index(("evaluate", iid))


def test_no_resolution_ahead_when_switched_off_or_for_an_evaluator_without_it():
    evaluator = ResolvingEvaluator()
    _run(evaluator, [_request("a1", "1"), _request("b1", "2")], resolve_ahead=0)
    assert [kind for kind, _ in evaluator.events] == ["evaluate", "evaluate"]
    plain = FakeEvaluator()                               # e.g. the agent stage's evaluator
    assert sorted(_run(plain, [_request("a1", "1"), _request("b1", "2")])) == ["a1", "b1"]


def test_a_failed_resolution_ahead_never_stops_the_run():
    evaluator = ResolvingEvaluator(fail="b1")
    done = _run(evaluator, [_request("a1", "1"), _request("b1", "2"), _request("c1", "3")])
    assert sorted(done) == ["a1", "b1", "c1"]


def test_the_run_does_not_wait_for_resolutions_no_task_needs_any_more():
    evaluator = ResolvingEvaluator(delay=0.0)
    gate = threading.Event()
    calls: list[str] = []

    def slow_resolve(request):
        calls.append(request.task.instance.instance_id)
        gate.wait(0.5)

    evaluator.resolve_ahead = slow_resolve
    started = time.monotonic()
    _run(evaluator, [_request(f"v{n}", str(n)) for n in range(12)], resolve_ahead=1)
    # each queued resolution would hold 0.5 s: those not yet begun when the tasks end are cancelled
    assert time.monotonic() - started < 0.5 * 6
    assert len(calls) < 11


def test_work_done_ahead_is_charged_once_to_its_task_on_its_own_timeline():
    ahead = builds.AheadWork()
    with ahead.recording("x__y-1"):
        with builds.timed("wheelhouse", "3.9-abc"):
            time.sleep(0.05)
    assert len(ahead) == 1
    opened = time.monotonic()                             # the task's preparation starts later
    taken = ahead.take("x__y-1", opened)
    assert [(e["kind"], e["name"], e["ahead"]) for e in taken] == [("wheelhouse", "3.9-abc", "resolve")]
    assert taken[0]["at"] <= -0.05 and taken[0]["seconds"] >= 0.05
    assert ahead.take("x__y-1", opened) == []            # once
    assert ahead.take("x__y-2", opened) == []


def test_work_made_before_a_failure_ahead_is_kept_and_nothing_is_kept_for_no_work():
    ahead = builds.AheadWork()
    with pytest.raises(RuntimeError):
        with ahead.recording("x__y-1"):
            with builds.timed("py", "py3.9"):
                pass
            raise RuntimeError("the wheelhouse failed")
    with ahead.recording("x__y-2"):
        pass                                              # everything found made
    assert len(ahead) == 1
    assert [e["kind"] for e in ahead.take("x__y-1", time.monotonic())] == ["py"]


def test_a_pre_starts_work_its_task_did_not_take_reaches_the_task_later_and_on_its_clock():
    ahead = builds.AheadWork()
    prestart_opened = time.monotonic()
    made = [{"kind": "inst", "name": "i", "at": 0.5, "seconds": 3.0, "own_seconds": 3.0}]
    task_started = prestart_opened + 2.0                  # the task started while the pre-start built
    ahead.keep("x__y-1", prestart_opened, made, "prestart")
    ahead.keep("x__y-1", prestart_opened, [], "prestart")  # nothing made: nothing kept
    taken = ahead.take("x__y-1", task_started)
    assert taken == [{"kind": "inst", "name": "i", "at": -1.5, "seconds": 3.0, "own_seconds": 3.0,
                      "ahead": "prestart"}]


def test_entries_move_to_the_tasks_clock_keeping_an_earlier_mark():
    entries = [{"kind": "wheelhouse", "at": -4.0, "ahead": "resolve"}, {"kind": "inst", "at": 1.0}]
    moved = builds.on_clock(entries, since=10.0, opened=12.0, ahead="prestart")
    assert moved == [{"kind": "wheelhouse", "at": -6.0, "ahead": "resolve"},
                     {"kind": "inst", "at": -1.0, "ahead": "prestart"}]
    assert builds.on_clock(entries[1:], since=10.0, opened=10.0) == [{"kind": "inst", "at": 1.0}]


def test_a_trees_metadata_is_read_once_when_a_task_and_its_prestart_reach_it_together(tmp_path, monkeypatch):
    """Verified's cold run at ea6d248 read 11 trees' metadata twice (the task and its pre-start at
    once, 6–16 s each): the second caller now waits for the first and takes its result."""
    from types import SimpleNamespace

    from harness.preparation import preparer as preparer_module

    calls: list[str] = []

    class SlowBuilder:
        def __init__(self, images, interpreter) -> None:
            pass

        def tree_metadata(self, tree, wheel_dir, lock_text, backend, backend_path, prepare, env):
            calls.append(str(tree))
            time.sleep(0.3)
            return SimpleNamespace(name="pkg", version="1.0", requires_dist=("attrs>=1",), extras=(), log="read")

    monkeypatch.setattr(preparer_module, "Builder", SlowBuilder)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "setup.py").write_text("from setuptools import setup\nsetup(name='pkg', install_requires=['attrs>=1'])\n")
    prep = preparer_module.Preparer.__new__(preparer_module.Preparer)
    prep.cache_dir = tmp_path / "cache"
    prep.images = None
    prep._lock = lambda *args, **kwargs: SimpleNamespace(wheel_dir=tmp_path, lock_text="setuptools==1 --hash=sha256:0")
    spec = SimpleNamespace(setup_files=(), pre_install=(), env=(), env_dict={})
    interpreter = SimpleNamespace(version="3.9.2")
    results: list[dict] = []
    entries: list[dict] = []

    def caller() -> None:
        with builds.recording() as made:   # each caller's own record, as each task has one
            results.append(prep._tree_metadata(spec, interpreter, tree, [], [], "setuptools.build_meta:__legacy__",
                                               ""))
        entries.extend(made)

    threads = [threading.Thread(target=caller) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [str(tree)]
    assert results[0] == results[1] == {"name": "pkg", "version": "1.0", "requires_dist": ["attrs>=1"],
                                        "extras": [], "backend": "setuptools.build_meta:__legacy__"}
    assert [entry["kind"] for entry in entries] == ["tree-metadata"]
