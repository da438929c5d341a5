"""Parsers of the in-container reporter's JUnit XML, cross-checked with printed text
(harness/grading/reporter_parsers.py), and the reporter itself run for real on the host.

The sympy artefacts are lines of a real run (the reference patch of sympy__sympy-11897,
``bin/test -C --verbose`` in this harness's container, canaries included); the unittest
ones come from running harness/incontainer/junit_reporter.py here on a small module.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from harness.grading.parsers import RunArtefacts, get_parser
from harness.grading.reporter_parsers import (junit_collection_errors, parse_reporter_junit, parse_sympy_text,
                                              parse_unittest_text)
from harness.grading.status import TestStatus
from harness.runners import INCONTAINER_SOURCE

SYMPY_OUTPUT = """\
============================= test process starts ==============================
executable:         /opt/harness/venv/bin/python  (3.9.2-final-0) [CPython]
architecture:       64-bit
cache:              no
ground types:       python 
random seed:        21047092
hash randomization: off

sympy/printing/tests/test_latex.py[109] 
test_printmethod ok
test_latex_basic ok
test_latex_symbols_failing f
test_latex_functions E
test_ordering_38bb2ab9 ok
test_behaviour_d1f0d86d F                                                 [FAIL]


________________________________________________________________________________
___________ sympy/printing/tests/test_latex.py:test_latex_functions ____________
"""

F = "sympy/printing/tests/test_latex.py"
SYMPY_XML = f"""<testsuite name="harness" tests="6">\
<testcase classname="sympy.printing.tests.test_latex" name="test_printmethod" file="{F}" time="0.001" />\
<testcase classname="sympy.printing.tests.test_latex" name="test_latex_basic" file="{F}" time="0.035" />\
<testcase classname="sympy.printing.tests.test_latex" name="test_latex_symbols_failing" file="{F}" time="0.001">\
<skipped type="pytest.xfail" message="" /></testcase>\
<testcase classname="sympy.printing.tests.test_latex" name="test_latex_functions" file="{F}" time="0.147">\
<error message="RecursionError: maximum recursion depth exceeded while calling a Python object" /></testcase>\
<testcase classname="sympy.printing.tests.test_latex" name="test_ordering_38bb2ab9" file="{F}" time="0.000" />\
<testcase classname="sympy.printing.tests.test_latex" name="test_behaviour_d1f0d86d" file="{F}" time="0.000">\
<failure message="AssertionError: " /></testcase></testsuite>""".encode()


def test_sympy_junit_is_authoritative_and_agrees_with_the_text():
    parsed = get_parser("sympy")(RunArtefacts(output=SYMPY_OUTPUT, junit_xml=SYMPY_XML))
    assert parsed.source == "junit" and parsed.conflicts == []
    assert parsed.statuses == {f"{F}::test_printmethod": TestStatus.PASSED, f"{F}::test_latex_basic": TestStatus.PASSED,
                               f"{F}::test_latex_symbols_failing": TestStatus.XFAIL,
                               f"{F}::test_latex_functions": TestStatus.ERROR,
                               f"{F}::test_ordering_38bb2ab9": TestStatus.PASSED,
                               f"{F}::test_behaviour_d1f0d86d": TestStatus.FAILED}
    # the text, read on its own (the last test of a file carries the file's [FAIL])
    text = parse_sympy_text(SYMPY_OUTPUT)
    assert text.statuses[f"{F}::test_behaviour_d1f0d86d"] is TestStatus.FAILED
    assert text.statuses[f"{F}::test_latex_symbols_failing"] is TestStatus.XFAIL


def test_sympy_printed_claims_the_xml_contradicts_are_conflicts():
    forged = SYMPY_OUTPUT.replace("test_latex_functions E", "test_latex_functions ok") + "test_never_ran ok\n"
    parsed = get_parser("sympy")(RunArtefacts(output=forged, junit_xml=SYMPY_XML))
    assert parsed.statuses[f"{F}::test_latex_functions"] is TestStatus.ERROR   # the XML stands
    assert set(parsed.conflicts) == {f"{F}::test_latex_functions", f"{F}::test_never_ran"}


def test_no_results_file_means_no_results():
    parsed = get_parser("sympy")(RunArtefacts(output=SYMPY_OUTPUT, junit_xml=None))
    assert parsed.source == "none" and parsed.statuses == {}
    broken = get_parser("django")(RunArtefacts(output="", junit_xml=b"<testsuite><testcase"))
    assert broken.source == "none" and "unparsable" in broken.notes[0]


MODULE = '''\
import unittest


class Arithmetic(unittest.TestCase):
    def test_adds(self):
        self.assertEqual(1 + 1, 2)

    def test_documented(self):
        """One plus one is two."""
        self.assertEqual(1 + 1, 2)

    def test_breaks(self):
        self.assertEqual(1 + 1, 3)

    def test_raises(self):
        raise RuntimeError("boom")

    @unittest.skip("not today")
    def test_skipped(self):
        pass

    @unittest.expectedFailure
    def test_known_bug(self):
        self.assertEqual(1, 2)

    def test_subtests(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertLess(i, 2)
'''


def _run_reporter(tmp_path: Path, *command: str) -> tuple[subprocess.CompletedProcess, bytes]:
    results = tmp_path / "results.xml"
    proc = subprocess.run([sys.executable, str(INCONTAINER_SOURCE / "junit_reporter.py"), "--framework", "unittest",
                           "--junit", str(results), "--", *command], cwd=tmp_path, capture_output=True, text=True)
    return proc, results.read_bytes() if results.exists() else b""


def test_unittest_reporter_records_every_outcome_with_labels(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_arith.py").write_text(MODULE)
    proc, xml = _run_reporter(tmp_path, "python", "-m", "unittest", "-v", "tests/test_arith.py")
    assert proc.returncode == 1                      # the command's own exit status is kept
    parsed = get_parser("unittest")(RunArtefacts(output=proc.stderr, junit_xml=xml))
    base = "tests/test_arith.py::Arithmetic::"
    assert parsed.statuses == {base + "test_adds": TestStatus.PASSED, base + "test_documented": TestStatus.PASSED,
                               base + "test_breaks": TestStatus.FAILED, base + "test_raises": TestStatus.ERROR,
                               base + "test_skipped": TestStatus.SKIPPED, base + "test_known_bug": TestStatus.XFAIL,
                               base + "test_subtests": TestStatus.FAILED}
    assert parsed.conflicts == []
    assert parsed.labels[base + "test_documented"].splitlines()[-1] == "One plus one is two."
    assert parsed.labels[base + "test_adds"].startswith("test_adds (tests.test_arith.Arithmetic")
    # the printed text keys outcomes by the label's last line, as SWE-bench's Django parser does
    text = parse_unittest_text(proc.stderr)
    assert text["One plus one is two."] is TestStatus.PASSED
    assert any(label.startswith("test_breaks (") and status is TestStatus.FAILED for label, status in text.items())


def test_unittest_reporter_marks_modules_that_do_not_import(tmp_path):
    (tmp_path / "test_broken.py").write_text("import no_such_module_here\n")
    proc, xml = _run_reporter(tmp_path, "python", "-m", "unittest", "-v", "test_broken")
    parsed = get_parser("unittest")(RunArtefacts(output=proc.stderr, junit_xml=xml))
    assert parsed.collection_errors == ["test_broken"]
    assert junit_collection_errors(xml) == ["test_broken"]
    assert parsed.statuses == {}


def test_unittest_reporter_runs_a_script_with_its_directory_first_on_the_path(tmp_path):
    """Django's tests/runtests.py imports its test apps from its own directory."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "helper_app.py").write_text("VALUE = 3\n")
    (tests / "runtests.py").write_text(textwrap.dedent("""\
        import sys, unittest
        import helper_app
        class T(unittest.TestCase):
            def test_value(self):
                self.assertEqual(helper_app.VALUE, 3)
        result = unittest.TextTestRunner(verbosity=2).run(unittest.defaultTestLoader.loadTestsFromTestCase(T))
        sys.exit(not result.wasSuccessful())
    """))
    proc, xml = _run_reporter(tmp_path, "./tests/runtests.py", "--verbosity", "2")
    assert proc.returncode == 0, proc.stderr
    assert parse_reporter_junit(xml).statuses == {"tests/runtests.py::T::test_value": TestStatus.PASSED}


def test_pytest_collection_failures_are_read_from_its_junit(tmp_path):
    (tmp_path / "test_ok.py").write_text("def test_fine():\n    pass\n")
    (tmp_path / "test_broken.py").write_text("import no_such_module_here\n")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={tmp_path}/r.xml",
                    "-o", "junit_family=xunit1", "test_ok.py", "test_broken.py"], cwd=tmp_path, capture_output=True)
    assert junit_collection_errors((tmp_path / "r.xml").read_bytes()) == ["test_broken.py"]


# --------------------------------------------------------------------------- bounded work

def test_reporter_xml_over_the_element_cap_is_results_over_limit():
    """The reporter's XML is streamed with pytest's caps: 2.1 million empty elements (what
    a test user could write over the results file) raise, they are never built into a tree."""
    import pytest
    from harness.grading.parsers import MAX_JUNIT_ELEMENTS, ResultsTooLarge
    bomb = b"<testsuite>" + b"<x/>" * (MAX_JUNIT_ELEMENTS + 1) + b"</testsuite>"
    for parse in (parse_reporter_junit, get_parser("sympy").parse, get_parser("django").parse):
        with pytest.raises(ResultsTooLarge):
            parse(bomb) if parse is parse_reporter_junit else parse(RunArtefacts("", junit_xml=bomb))
    assert junit_collection_errors(bomb) == []


def test_reporter_text_cross_checks_keep_conflicts_in_sets():
    """100,000 contradicting printed lines: every contradicted test is a conflict once, the
    notes stay capped (the text is the code under test's to print)."""
    cases = "".join(f'<testcase file="t/test_a.py" classname="t.test_a" name="test_{i}"><failure/></testcase>'
                    for i in range(20_000))
    xml = f"<testsuite>{cases}</testsuite>".encode()
    printed = "t/test_a.py[20000] \n" + "".join(f"test_{i % 20_000} ok\n" for i in range(100_000)) + \
        "".join(f"test_extra_{i} ok\n" for i in range(5_000))
    parsed = get_parser("sympy").parse(RunArtefacts(printed, junit_xml=xml))
    assert len(parsed.conflicts) == 25_000 and len(set(parsed.conflicts)) == 25_000
    assert len(parsed.notes) <= 50
    assert parsed.statuses["t/test_a.py::test_7"] is TestStatus.FAILED
