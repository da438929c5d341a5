"""The record of what a preparation built itself (harness.bookkeeping.builds): nested work counted
once, another thread's work never charged here, a failed build not recorded."""

from __future__ import annotations

import threading
import time

import pytest

from harness.bookkeeping import builds
def test_nested_work_is_counted_once_in_own_seconds():
    with builds.recording() as made:
        with builds.timed("wheelhouse", "outer"):
            time.sleep(0.05)
            with builds.timed("cc", "builder"):
                time.sleep(0.1)
            with builds.timed("sdist", "pkg==1"):
                time.sleep(0.05)
    by_kind = {e["kind"]: e for e in made}
    assert [e["kind"] for e in made] == ["cc", "sdist", "wheelhouse"]  # in order of completion
    outer = by_kind["wheelhouse"]
    assert outer["seconds"] >= 0.2
    assert outer["own_seconds"] == pytest.approx(outer["seconds"] - by_kind["cc"]["seconds"]
                                                 - by_kind["sdist"]["seconds"], abs=0.002)
    assert sum(e["own_seconds"] for e in made) == pytest.approx(outer["seconds"], abs=0.005)
    # start offsets place each piece of work in the preparation's time line
    assert outer["at"] < 0.01 and by_kind["cc"]["at"] >= 0.05
    assert by_kind["sdist"]["at"] >= by_kind["cc"]["at"] + by_kind["cc"]["seconds"] - 0.001


def test_nothing_is_kept_outside_a_recording_and_a_failed_build_is_not_recorded():
    with builds.timed("env", "no-recording"):
        pass
    with builds.recording() as made:
        with pytest.raises(RuntimeError):
            with builds.timed("env", "failed"):
                raise RuntimeError("build failed")
        with builds.timed("inst", "built"):
            pass
    assert [e["name"] for e in made] == ["built"]


def test_work_in_another_thread_is_not_charged_to_this_recording():
    other_started, release = threading.Event(), threading.Event()
    other: list[list[dict]] = []

    def other_task() -> None:
        with builds.recording() as theirs:
            with builds.timed("env", "theirs"):
                other_started.set()
                release.wait(10)
        other.append(theirs)

    thread = threading.Thread(target=other_task)
    with builds.recording() as mine:
        thread.start()
        other_started.wait(10)
        with builds.timed("inst", "mine"):
            pass
        release.set()
        thread.join(10)
    assert [e["name"] for e in mine] == ["mine"]
    assert [e["name"] for e in other[0]] == ["theirs"]
