"""Outcome origins and results-file provenance from the in-container reporter
(harness/incontainer/junit_reporter.py), run for real on this interpreter with the
harness's bootstrap and its evidence channel, as the launcher runs it (tests/bootstrap_host.py).

What the host does with the records (``harness.integrity.evidence.code_raised``) is the
same as for the pytest plugin: a skip or an expected failure with a frame in a file the
model changed is the code under test speaking, not the test."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from harness.grading.reporter_parsers import parse_reporter_junit
from harness.grading.status import TestStatus
from harness.integrity.evidence import code_raised, parse_evidence
from harness.runners import INCONTAINER_SOURCE
from tests.bootstrap_host import bootstrapped

LIBRARY = '''\
import unittest


def probe(value):
    if value == "skip":
        raise unittest.SkipTest("the library decided to skip")
    if value == "fail":
        raise AssertionError("the library failed")
    return value


def long_named_skip():
    raise type("Skip" * 5000, (unittest.SkipTest,), {})("a 20,000-character class name")
'''

TESTS = '''\
import unittest

from lib import core, helpers


class Origins(unittest.TestCase):
    def test_library_skip(self):
        core.probe("skip")

    def test_honest_skip(self):
        self.skipTest("the test itself skips")

    @unittest.skip("a decorator skips")
    def test_decorated_skip(self):
        core.probe("skip")

    @unittest.expectedFailure
    def test_honest_xfail(self):
        self.assertEqual(1, 2)

    @unittest.expectedFailure
    def test_library_xfail(self):
        core.probe("fail")

    def test_passes(self):
        self.assertEqual(core.probe(3), 3)

    def test_buried_skip(self):
        helpers.deep(150, lambda: core.probe("skip"))

    def test_long_named_skip(self):
        core.long_named_skip()


class SkippedInSetUp(unittest.TestCase):
    def setUp(self):
        core.probe("skip")

    def test_never_runs(self):
        pass
'''

#: a library module that rewrites the results file once the reporter has written it
REWRITER = '''\
import atexit, glob, os

def _forge():
    for path in glob.glob(os.environ["FORGE_GLOB"]):
        with open(path, "wb") as handle:
            handle.write(b"<testsuite/>")

atexit.register(_forge)
'''


def _run(tmp_path: Path, extra_library: str = "") -> tuple[bytes, bytes, int]:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("")
    (tmp_path / "lib" / "core.py").write_text(LIBRARY + extra_library)
    (tmp_path / "lib" / "helpers.py").write_text("def deep(n, then):\n    return deep(n - 1, then) if n else then()\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_origins.py").write_text(TESTS)
    out = tmp_path / "out"
    out.mkdir()
    results = out / "results.xml"
    with bootstrapped(tmp_path / "channel", tmp_path, results) as channel:
        env = {"PATH": os.environ.get("PATH", "/usr/bin"), "FORGE_GLOB": str(out / "*.xml"), **channel.env}
        proc = subprocess.run([sys.executable, str(INCONTAINER_SOURCE / "junit_reporter.py"), "--framework",
                               "unittest", "--junit", str(results), "--", "python", "-m", "unittest", "-v",
                               "tests/test_origins.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
    return results.read_bytes(), channel.events(), proc.returncode


def test_a_skip_or_xfail_raised_from_library_code_is_attributed_to_it(tmp_path):
    xml, events, _ = _run(tmp_path)
    base = "tests/test_origins.py::Origins::"
    statuses = parse_reporter_junit(xml).statuses
    assert {k: statuses[base + k] for k in ("test_library_skip", "test_honest_skip", "test_decorated_skip")} == \
        {k: TestStatus.SKIPPED for k in ("test_library_skip", "test_honest_skip", "test_decorated_skip")}
    assert statuses[base + "test_library_xfail"] is statuses[base + "test_honest_xfail"] is TestStatus.XFAIL
    ev = parse_evidence(b"{}", events)
    assert ev.boot is not None
    # every record is keyed by the native id the parser reports
    assert set(ev.raised) <= set(statuses), (set(ev.raised), set(statuses))
    # a decorator skip raises nothing: no record, nothing to distrust
    assert base + "test_decorated_skip" not in ev.raised
    skip = ev.raised[base + "test_library_skip"][0]
    assert (skip["exc"], skip["status"], skip["where"]) == ("SkipTest", "skipped", "lib/core.py")
    assert ev.raised[base + "test_honest_skip"][0]["where"] == "tests/test_origins.py"
    assert ev.raised["tests/test_origins.py::SkippedInSetUp::test_never_runs"][0]["where"] == "lib/core.py"
    # the host's judgement, as for pytest: only outcomes with a frame in the model's file
    # a raise under 150 frames of an unchanged helper, and one whose record would be cut at
    # the evidence line's cap by a 20,000-character class name, are found all the same
    assert code_raised(ev, frozenset({"lib/core.py"})) == {
        base + "test_library_skip", base + "test_library_xfail", base + "test_buried_skip",
        base + "test_long_named_skip", "tests/test_origins.py::SkippedInSetUp::test_never_runs"}
    assert code_raised(ev, frozenset({"lib/other.py"})) == frozenset()


def test_the_reporter_states_the_hash_of_the_results_file_it_wrote(tmp_path):
    xml, events, _ = _run(tmp_path)
    ev = parse_evidence(b"{}", events)
    assert ev.results_file["sha256"] == hashlib.sha256(xml).hexdigest()


def test_a_results_file_rewritten_at_exit_no_longer_has_the_stated_hash(tmp_path):
    xml, events, _ = _run(tmp_path, REWRITER)
    assert xml == b"<testsuite/>"     # the attack ran after the reporter had written the file
    ev = parse_evidence(b"{}", events)
    assert ev.results_file["sha256"] != hashlib.sha256(xml).hexdigest()


PYTEST_TESTS = '''\
import unittest

import pytest

from lib import core, helpers


def test_library_skiptest():
    core.probe("skip")


def test_buried_skip():
    helpers.deep(150, lambda: core.probe("skip"))


def test_long_named_skip():
    core.long_named_skip()


def test_honest_skip():
    pytest.skip("the test decides")


class Case(unittest.TestCase):
    def test_library_skiptest(self):
        core.probe("skip")
'''


def test_the_pytest_plugin_sees_a_library_skiptest_before_pytest_reraises_it(tmp_path):
    """pytest's unittest plugin turns a plain test's ``unittest.SkipTest`` into a skip raised
    from pytest's own code; the outcome plugin runs first and still sees the library's."""
    _run(tmp_path)   # the same library and helpers
    (tmp_path / "test_plain.py").write_text(PYTEST_TESTS)
    with bootstrapped(tmp_path / "pytest-channel", tmp_path) as channel:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "_harness_outcomes",
                               "-W", "error", "test_plain.py"], cwd=tmp_path, capture_output=True, text=True,
                              env={"PATH": os.environ.get("PATH", "/usr/bin"), **channel.env}, timeout=120)
    assert "5 skipped" in proc.stdout, proc.stdout + proc.stderr
    ev = parse_evidence(b"{}", channel.events())
    expected = {"test_plain.py::test_library_skiptest", "test_plain.py::test_buried_skip",
                "test_plain.py::test_long_named_skip"}
    if sys.version_info >= (3, 11):   # a TestCase's skip is re-raised inside the original's handler
        expected.add("test_plain.py::Case::test_library_skiptest")
    assert code_raised(ev, frozenset({"lib/core.py"})) == expected
    assert "test_plain.py::test_honest_skip" in ev.raised
