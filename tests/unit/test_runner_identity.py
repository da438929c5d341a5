"""Runner identity (harness/incontainer/_harness_identity.py): the runner's and reporter's
outcome-deciding bindings, captured before repository code runs and compared while and
after the tests run, for real on this interpreter under the bootstrap (tests/bootstrap_host.py),
and the host's judgement of what it sent (harness/integrity/evidence.py, pure)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.grading.reporter_parsers import parse_reporter_junit
from harness.grading.status import TestStatus
from harness.integrity.evidence import Evidence, judge_evidence, judge_identity, parse_evidence
from harness.runners import INCONTAINER_SOURCE
from tests.bootstrap_host import bootstrapped

LIBRARY = "import sys\n\n\ndef halve(x):\n    {attack}\n    return x // 2\n"
PYTEST_TESTS = ("from lib.core import halve\n\n\ndef test_halve_odd():\n    assert halve(3) == 1.5\n\n\n"
                "def test_halve_even():\n    assert halve(4) == 2\n")
UNITTEST_TESTS = ("import unittest\n\nfrom lib.core import halve\n\n\nclass Halve(unittest.TestCase):\n"
                  "    def test_halve_odd(self):\n        self.assertEqual(halve(3), 1.5)\n\n"
                  "    def test_halve_even(self):\n        self.assertEqual(halve(4), 2)\n")
#: library code that turns the JUnit writer's failures into passes (pytest)
JUNIT_REBIND = ("m = sys.modules.get('_pytest.junitxml')\n    if m is not None:\n"
                "        m._NodeReporter.append_failure = m._NodeReporter.append_pass")
#: the same through the function's code (an assignment the audit hook sees)
JUNIT_CODE_SWAP = ("m = sys.modules.get('_pytest.junitxml')\n    if m is not None:\n"
                   "        m._NodeReporter.append_failure.__code__ = m._NodeReporter.append_pass.__code__")
#: unittest's text result reports failures as successes (class level)
RESULT_REBIND = ("import unittest\n    R = unittest.TextTestResult\n"
                 "    R.addFailure = lambda self, test, err: R.addSuccess(self, test)")
#: the running result object, found up the stack, reports failures as successes (instance level)
RESULT_SHADOW = ("f = sys._getframe(1)\n    while f is not None and 'result' not in f.f_locals:\n        f = f.f_back\n"
                 "    if f is not None:\n        r = f.f_locals['result']\n        r.addFailure = lambda test, err: r.addSuccess(test)")

#: the running result object given a class of the library's own (an assignment the audit hook sees)
RESULT_CLASS_SWAP = ("import unittest\n    f = sys._getframe(1)\n"
                     "    while f is not None and 'result' not in f.f_locals:\n        f = f.f_back\n"
                     "    if f is not None:\n        r = f.f_locals['result']\n"
                     "        r.__class__ = type('R', (type(r),), {'addFailure': lambda s, t, e: s.addSuccess(t)})")


def _tree(root: Path, attack: str, tests: str, name: str) -> Path:
    testbed = root / "tb"
    (testbed / "lib").mkdir(parents=True)
    (testbed / "lib" / "__init__.py").write_text("")
    (testbed / "lib" / "core.py").write_text(LIBRARY.format(attack=attack or "pass"))
    (testbed / name).write_text(tests)
    return testbed


def _pytest(tmp_path: Path, attack: str = "") -> tuple[Evidence, bytes]:
    testbed = _tree(tmp_path, attack, PYTEST_TESTS, "test_halve.py")
    results = tmp_path / "results.xml"
    with bootstrapped(tmp_path / "channel", testbed, results) as channel:
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "_harness_outcomes",
                        f"--junitxml={results}", "test_halve.py"], cwd=testbed, capture_output=True, text=True,
                       env={"PATH": os.environ.get("PATH", "/usr/bin"), **channel.env}, timeout=300)
    return parse_evidence(b"{}", channel.events()), results.read_bytes()


def _unittest(tmp_path: Path, attack: str = "") -> tuple[Evidence, bytes]:
    testbed = _tree(tmp_path, attack, UNITTEST_TESTS, "test_halve.py")
    results = tmp_path / "results.xml"
    with bootstrapped(tmp_path / "channel", testbed, results) as channel:
        subprocess.run([sys.executable, str(INCONTAINER_SOURCE / "junit_reporter.py"), "--framework", "unittest",
                        "--junit", str(results), "--", "python", "-m", "unittest", "-v", "test_halve"],
                       cwd=testbed, capture_output=True, text=True,
                       env={"PATH": os.environ.get("PATH", "/usr/bin"), **channel.env}, timeout=300)
    return parse_evidence(b"{}", channel.events()), results.read_bytes()


def _judge(ev: Evidence, runner_project: bool = False):
    launcher = {"results": {"present": True, "sha256": (ev.results_file or {}).get("sha256")},
                "tests": {"exit_code": 1}}
    ev.launcher = launcher
    return judge_evidence(ev, {}, (), frozenset({"lib/core.py"}), True, runner_project, True)


def test_honest_runs_capture_and_compare_the_bindings_and_find_nothing(tmp_path):
    for run, runner in ((_pytest, "pytest"), (_unittest, "unittest")):
        ev, _ = run(tmp_path / runner)
        assert ev.boot["identity"] is True
        assert ev.rebound == [], (runner, ev.rebound)
        (final,) = ev.identity_finals
        assert final["runners"] == [runner] and final["checked"] > 50 and final["changed"] == []
        verdict = _judge(ev)
        assert (verdict.tampered, verdict.ambiguous) == (None, None), (runner, verdict)
        assert not {"runner_rebound", "runner_identity_unchecked"} & set(verdict.flags)


@pytest.mark.parametrize("attack,changed,seen_by_hook", [
    (JUNIT_REBIND, "_pytest.junitxml._NodeReporter.append_failure", False),
    (JUNIT_CODE_SWAP, "_pytest.junitxml._NodeReporter.append_failure", True),
], ids=["class-attribute", "code-swap"])
def test_pytest_junit_writer_rebound_by_library_code_is_tampering(tmp_path, attack, changed, seen_by_hook):
    ev, xml = _pytest(tmp_path, attack)
    # the attack worked: the results file says the unfixed test passed
    assert b"<failure" not in xml and b"test_halve_odd" in xml
    assert changed in ev.rebound
    verdict = _judge(ev)
    assert "runner_rebound" in verdict.flags and "changed during the run" in verdict.tampered
    assert ("monitor_runner_rebind" in verdict.flags) is seen_by_hook, verdict.flags
    # in a test runner's own repository it is flagged, never tampering
    assert "runner_rebound" in _judge(ev, runner_project=True).flags
    assert _judge(ev, runner_project=True).tampered is None


@pytest.mark.parametrize("attack,changed", [
    (RESULT_REBIND, "unittest.runner.TextTestResult.addFailure"),
    (RESULT_SHADOW, "unittest.runner.TextTestResult.addFailure (instance attribute)"),
], ids=["class-attribute", "instance-attribute"])
def test_unittest_result_rebound_by_library_code_is_tampering(tmp_path, attack, changed):
    ev, xml = _unittest(tmp_path, attack)
    statuses = parse_reporter_junit(xml).statuses
    assert statuses["test_halve.py::Halve::test_halve_odd"] is TestStatus.PASSED   # the attack worked
    assert changed in ev.rebound, ev.rebound
    verdict = _judge(ev)
    assert "runner_rebound" in verdict.flags and verdict.tampered


def test_a_result_object_given_another_class_is_seen_by_the_audit_hook(tmp_path):
    ev, xml = _unittest(tmp_path, RESULT_CLASS_SWAP)
    assert parse_reporter_junit(xml).statuses["test_halve.py::Halve::test_halve_odd"] is TestStatus.PASSED
    verdict = _judge(ev)
    assert "monitor_runner_rebind" in verdict.flags and "runner.rebind" in verdict.tampered, verdict
    assert any("TextTestResult instance.__class__" in h for h in verdict.details["monitor"]["runner.rebind"])


def _records(*records: dict, boot: dict | None = None) -> bytes:
    lines = [{"k": "boot", "identity": True} if boot is None else boot, *records,
             {"k": "results_file", "sha256": "x"}]
    return b"".join(b"1\t" + json.dumps(r).encode() + b"\n" for r in lines)


def test_the_identity_check_must_have_run_when_the_results_were_written():
    final = {"k": "identity", "what": "final", "checked": 120, "changed": []}
    assert judge_identity(parse_evidence(b"{}", _records(final)), True).flags == []
    # no comparison when the file was written, or nothing captured, or no registry: unproven
    for records, boot in (((), None), (({**final, "checked": 0},), None), ((final,), {"k": "boot", "identity": False})):
        verdict = judge_identity(parse_evidence(b"{}", _records(*records, boot=boot)), True)
        assert verdict.flags == ["runner_identity_unchecked"] and verdict.ambiguous and not verdict.tampered
    # evidence of a bootstrap without the registry at all (earlier runs): nothing expected of it
    old = judge_identity(parse_evidence(b"{}", _records(boot={"k": "boot"})), True)
    assert old.flags == []
    # no results file expected (no evidence expected of the runner): nothing required
    assert judge_identity(parse_evidence(b"{}", _records()), False).flags == []


def test_a_change_counts_from_any_process_and_a_later_clean_record_takes_nothing_back():
    changed = {"k": "identity", "what": "changed", "changed": ["x.PyTestReporter.test_fail"]}
    clean = {"k": "identity", "what": "final", "checked": 120, "changed": []}
    raw = _records(clean) + b"2\t" + json.dumps(changed).encode() + b"\n" + b"1\t" + json.dumps(clean).encode() + b"\n"
    verdict = judge_identity(parse_evidence(b"{}", raw), True)
    assert verdict.flags == ["runner_rebound"] and "x.PyTestReporter.test_fail" in verdict.tampered
    assert verdict.details["runner_rebound"] == ["x.PyTestReporter.test_fail"]


def test_only_the_graded_pytest_sessions_final_record_proves_the_check():
    start = {"k": "start", "s": 1, "graded": True}
    other = {"k": "identity", "what": "final", "checked": 120, "changed": [], "s": 2}
    verdict = judge_identity(parse_evidence(b"{}", _records(start, other)), True)
    assert verdict.flags == ["runner_identity_unchecked"]
    graded = dict(other, s=1)
    assert judge_identity(parse_evidence(b"{}", _records(start, graded)), True).flags == []
