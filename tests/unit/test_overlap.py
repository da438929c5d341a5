"""harness.overlap: work run in a thread hands its value or its exception to the caller."""

from __future__ import annotations

import threading

import pytest

from harness.overlap import Background


def test_the_value_and_the_exception_reach_the_caller_as_a_plain_call_would():
    ran_in = []
    job = Background(lambda: ran_in.append(threading.current_thread().name) or 42, "job")
    assert job.result() == 42 and ran_in == ["job"]

    def fails():
        raise KeyError("boom")
    with pytest.raises(KeyError, match="boom"):
        Background(fails).result()


def test_discard_waits_releases_a_value_and_drops_an_error():
    started, release = threading.Event(), threading.Event()
    released = []

    def slow():
        started.set()
        release.wait(5)
        return "sandbox"
    job = Background(slow)
    started.wait(5)
    threading.Timer(0.05, release.set).start()
    job.discard(released.append)                  # waits for the value, then releases it
    assert released == ["sandbox"]

    def fails():
        raise RuntimeError("engine gone")
    Background(fails).discard(released.append)     # nothing to release, nothing raised
    assert released == ["sandbox"]
