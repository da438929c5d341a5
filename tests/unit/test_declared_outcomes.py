"""Issue 36, class 1: a graded test counts as passing only when it passed, or when its skip
or expected failure is declared by the pristine test source (harness/integrity/declared.py,
harness/integrity/judge.py); an undeclared one is evidence of tampering, on a canary and
on a graded test alike, for every runner.

Pure tests here: what the reading declares for each form a declaration takes (pytest marks,
imported marks, conftest hooks, fixtures, ``TestCase`` attributes and decorators, Django's
feature skips, sympy's decorators and ``disabled``), and how the judge settles an undeclared
outcome. End to end on the demo set and a real instance of each runner:
tests/integration/test_integrity_round4.py. At 6eb3dd5 an XFAIL counted as fixed whatever
declared it, and a canary XFAIL beside a passing original accused nothing.
"""

from __future__ import annotations

import pytest

from harness.grading.status import ErrorReason, InstanceStatus
from harness.inputs.instances import parse_instance

PYTEST_TESTS = b'''\
import pytest
from tests import known_bug, requires_thing

pytestmark_unused = 1
xfail_later = pytest.mark.xfail(reason="only where used")


def helper():
    pytest.skip("helper skips")


def test_plain():
    assert 1 == 1


@pytest.mark.xfail(reason="known")
def test_marked():
    assert 0


@known_bug
def test_imported_mark():
    assert 0


@requires_thing
def test_requires():
    pass


@xfail_later
def test_module_mark_used():
    assert 0


def test_calls_helper():
    helper()


def test_imperative():
    pytest.xfail("inside")


@pytest.mark.parametrize("a", [1, pytest.param(2, marks=pytest.mark.xfail)])
def test_param(a):
    assert a == 1


@pytest.mark.parametrize("value", [1])
def test_param_names_are_no_fixtures(value):
    assert value


def test_uses_fixture(skipping_fixture):
    pass


def test_uses_unknown_fixture(some_plugin_fixture):
    pass


class TestGroup:
    pytestmark = pytest.mark.skipif(True, reason="class")

    def test_in_class(self):
        pass


class TestPlainGroup:
    def setup_method(self):
        self.x = 1

    def test_in_plain_class(self):
        assert self.x


@pytest.mark.remote_data
def test_plugin_mark():
    pass
'''
INIT = b'''\
import pytest
known_bug = pytest.mark.xfail(reason="known bug")
requires_thing = pytest.mark.skipif(True, reason="no thing")
'''
CONFTEST = b'''\
import pytest


@pytest.fixture
def skipping_fixture():
    pytest.importorskip("nothing")
'''


def read_pytest(native_id: str):
    from harness.integrity.declared import Declarations
    pristine = {"tests/__init__.py": INIT, "tests/conftest.py": CONFTEST}
    reading = Declarations({"tests/test_x.py": PYTEST_TESTS}, pristine.get, "pytest",
                           {"tests/__init__.py", "tests/conftest.py", "tests/test_x.py"})
    return reading.of(native_id)


@pytest.mark.parametrize("test,skip,xfail", [
    ("test_plain", False, False),
    ("test_marked", True, True),
    ("test_imported_mark", True, True),         # defined in the tests' __init__.py
    ("test_requires", True, False),
    ("test_module_mark_used", True, True),
    ("test_calls_helper", True, False),         # a module helper the test calls
    ("test_imperative", False, True),
    ("test_param[2]", True, True),
    ("test_param_names_are_no_fixtures[1]", False, False),  # parametrize is inert, its names no fixtures
    ("test_uses_fixture", True, False),         # the conftest fixture skips
    ("test_uses_unknown_fixture", True, False),  # a plugin's fixture may skip
    ("TestGroup::test_in_class", True, False),
    ("TestPlainGroup::test_in_plain_class", False, False),
    ("test_plugin_mark", True, False),
])
def test_pytest_declarations(test, skip, xfail):
    declared = read_pytest(f"tests/test_x.py::{test}")
    assert (declared.skip, declared.xfail, declared.found) == (skip, xfail, True)


def test_an_unknown_test_declares_everything():
    declared = read_pytest("tests/test_x.py::test_not_there")
    assert not declared.found and declared.skip and declared.xfail


UNITTEST_BASE = b'''\
import unittest


class Base(unittest.TestCase):
    def test_inherited(self):
        self.assertEqual(1, 1)

    @unittest.expectedFailure
    def test_inherited_expected(self):
        self.assertEqual(1, 2)
'''
UNITTEST_TESTS = b'''\
import unittest
from django.test import TestCase, skipUnlessDBFeature
from .base import Base


class Tests(Base):
    def test_plain(self):
        self.assertEqual(1, 1)

    @skipUnlessDBFeature("supports_x")
    def test_feature(self):
        pass

    def test_skips_itself(self):
        self.skipTest("not here")


class SetUpSkips(TestCase):
    @classmethod
    def setUpClass(cls):
        raise unittest.SkipTest("no database feature")

    def test_any(self):
        pass


@unittest.skipIf(True, "never")
class SkippedClass(TestCase):
    def test_any(self):
        pass
'''


@pytest.mark.parametrize("test,skip,xfail", [
    ("Tests::test_plain", False, False),
    ("Tests::test_inherited", False, False),
    ("Tests::test_inherited_expected", True, True),
    ("Tests::test_feature", True, False),
    ("Tests::test_skips_itself", True, False),
    ("SetUpSkips::test_any", True, False),
    ("SkippedClass::test_any", True, False),
])
def test_unittest_and_django_declarations(test, skip, xfail):
    from harness.integrity.declared import Declarations
    files = {"tests/app/tests.py": UNITTEST_TESTS}
    pristine = {"tests/app/base.py": UNITTEST_BASE, "tests/app/__init__.py": b""}
    reading = Declarations(files, pristine.get, "django", set(files) | set(pristine) | {"django/test/__init__.py"})
    declared = reading.of(f"tests/app/tests.py::{test}")
    assert (declared.skip, declared.xfail, declared.found) == (skip, xfail, True)


SYMPY_TESTS = b'''\
from sympy.testing.pytest import XFAIL, SKIP, slow, skip


def test_plain():
    assert 1


@XFAIL
def test_known():
    assert 0


@slow
def test_slow():
    pass


def test_skips():
    skip("no numpy")
'''


@pytest.mark.parametrize("test,skip,xfail", [("test_plain", False, False), ("test_known", True, True),
                                             ("test_slow", True, False), ("test_skips", True, False)])
def test_sympy_declarations(test, skip, xfail):
    from harness.integrity.declared import Declarations
    reading = Declarations({"sympy/core/tests/test_x.py": SYMPY_TESTS}, lambda p: None, "sympy")
    declared = reading.of(f"sympy/core/tests/test_x.py::{test}")
    assert (declared.skip, declared.xfail) == (skip, xfail)


def test_a_disabled_sympy_module_declares_a_skip_for_every_test():
    from harness.integrity.declared import Declarations
    source = b"import numpy\nif not numpy:\n    disabled = True\n\n\ndef test_a():\n    pass\n"
    assert Declarations({"sympy/t/tests/test_n.py": source}, lambda p: None, "sympy").of(
        "sympy/t/tests/test_n.py::test_a").skip


# --------------------------------------------------------------------------- the judge

RECORD = {"instance_id": "x__y-1", "repo": "x/y", "base_commit": "a" * 40, "patch": "p", "version": "1",
          "test_patch": "diff --git a/tests/test_x.py b/tests/test_x.py\n--- a/tests/test_x.py\n+++ b/tests/test_x.py\n"
                        "@@ -1 +1,2 @@\n x\n+y\n",
          "FAIL_TO_PASS": ["tests/test_x.py::test_plain", "tests/test_x.py::test_marked"],
          "PASS_TO_PASS": ["tests/test_x.py::test_calls_helper"]}


def _xml(**statuses) -> bytes:
    cases = []
    for name, status in statuses.items():
        body = {"passed": "", "failed": '<failure message="x"/>', "skipped": '<skipped message="s"/>',
                "xfail": '<skipped type="pytest.xfail" message="x"/>'}[status]
        cases.append(f'<testcase classname="tests.test_x" name="{name}" file="tests/test_x.py">{body}</testcase>')
    return f'<testsuite>{"".join(cases)}</testsuite>'.encode()


def _judge(xml: bytes, planted: bytes = b"", **context):
    from harness.integrity.declared import Declarations
    from harness.integrity.judge import RunContext, judge_run
    pristine = {"tests/__init__.py": INIT, "tests/conftest.py": CONFTEST}
    reading = Declarations({"tests/test_x.py": PYTEST_TESTS + planted}, pristine.get, "pytest",
                           {"tests/__init__.py", "tests/conftest.py", "tests/test_x.py"})
    ctx = RunContext(test_files=("tests/test_x.py",), declarations=reading, **context)
    return judge_run(parse_instance(dict(RECORD)), "pytest", "", xml, 0, ctx)


def test_an_undeclared_expected_failure_of_a_graded_test_is_tampering():
    judged = _judge(_xml(test_plain="xfail", test_marked="xfail", test_calls_helper="passed"),
                    reference_undeclared={})
    assert judged.reason is ErrorReason.TAMPERED and "outcome_undeclared" in judged.flags
    assert judged.details["outcome_undeclared"] == {"tests/test_x.py::test_plain": "xfail"}
    assert "tests/test_x.py::test_plain" not in judged.verdict.f2p_success


def test_a_declared_expected_failure_counts_as_before():
    judged = _judge(_xml(test_plain="passed", test_marked="xfail", test_calls_helper="skipped"),
                    reference_undeclared={})
    assert judged.reason is None and judged.verdict.status is InstanceStatus.FULL
    assert judged.details["declared"] == {"tests/test_x.py::test_marked": "sx",
                                          "tests/test_x.py::test_calls_helper": "s"}


def test_without_a_reference_run_an_undeclared_outcome_is_unproven_and_the_harness_asks_for_one():
    judged = _judge(_xml(test_plain="xfail", test_marked="xfail", test_calls_helper="passed"))
    assert judged.reason is ErrorReason.CANARY_UNPROVEN and ErrorReason.CANARY_UNPROVEN.origin == "harness"
    assert "outcome_undeclared_unproven" in judged.flags


def test_the_same_undeclared_outcome_in_the_reference_run_is_the_environments():
    judged = _judge(_xml(test_plain="xfail", test_marked="xfail", test_calls_helper="passed"),
                    reference_undeclared={"tests/test_x.py::test_plain": "xfail"})
    assert judged.reason is None and judged.verdict.status is InstanceStatus.FULL
    assert "outcome_undeclared_like_reference" in judged.flags


def test_in_a_reference_run_an_undeclared_outcome_is_recorded_never_held_against_it():
    judged = _judge(_xml(test_plain="xfail", test_marked="xfail", test_calls_helper="passed"), reference=True)
    assert judged.reason is None and "outcome_undeclared" in judged.flags
    assert judged.details["outcome_undeclared"] == {"tests/test_x.py::test_plain": "xfail"}


def test_an_undeclared_xpass_is_tampering():
    """An xpass is written "passed" in the results file: the runner's own record (pytest's
    report with ``wasxfail``, sympy's ``XPass``) tells it apart."""
    import json
    from harness.integrity.evidence import parse_evidence
    events = "\n".join(json.dumps(r) for r in (
        {"k": "start", "s": 1, "graded": True},
        {"k": "report", "s": 1, "id": "tests/test_x.py::test_plain", "when": "call", "outcome": "passed", "xfail": True},
    )).encode()
    judged = _judge(_xml(test_plain="passed", test_marked="passed", test_calls_helper="passed"),
                    reference_undeclared={}, evidence=parse_evidence(b"{}", events))
    assert judged.reason is ErrorReason.TAMPERED
    assert judged.details["outcome_undeclared"] == {"tests/test_x.py::test_plain": "xpass"}


def test_a_canary_xfail_beside_a_passing_original_accuses_when_undeclared():
    from harness.integrity.canaries import Canary
    canary = Canary(path="tests/test_x.py", original="test_plain", name="test_plane", cls=None,
                    mutation="1 -> 2", test_id="tests/test_x.py::test_plane",
                    original_id="tests/test_x.py::test_plain")
    xml = _xml(test_plain="passed", test_marked="xfail", test_calls_helper="passed", test_plane="xfail")
    planted = b"\n\ndef test_plane():\n    assert 1 == 2\n"   # as the canary is planted: its original's source
    judged = _judge(xml, planted, reference_undeclared={}, canaries=(canary,),
                    canary_proof={"tests/test_x.py::test_plane": "proven"})
    assert judged.reason is ErrorReason.TAMPERED and "canary_undeclared_xfail" in judged.flags
