"""Issue 36, class 1 (the reading must not invent failures): a class whose ``setUpClass``, or
a module whose ``setUpModule``, raises ``SkipTest`` skips its tests; the in-container
reporter (harness/incontainer/junit_reporter.py) records each of them as skipped, with the
skip's origin, never as a collection failure (at 6eb3dd5 it filed the ``_ErrorHolder`` as
one, and a Django release-tree proxy was INVALID ``collection_error`` for it: docs/
REAL_INSTANCES.md, django 2.2). Run for real under the bootstrap, as the launcher runs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.grading.reporter_parsers import junit_collection_errors, parse_reporter_junit
from harness.grading.status import TestStatus
from harness.integrity.evidence import code_raised, parse_evidence
from harness.runners import INCONTAINER_SOURCE
from tests.bootstrap_host import bootstrapped

LIBRARY = "import unittest\n\n\ndef require(feature):\n    raise unittest.SkipTest('no ' + feature)\n"
TESTS = '''\
import unittest

from lib import core


class NeedsFeature(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        raise unittest.SkipTest("Database doesn't support feature(s): test_db_allows_multiple_connections")

    def test_one(self):
        pass

    def test_two(self):
        pass


class LibrarySkips(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        core.require("a server")

    def test_three(self):
        pass


class Runs(unittest.TestCase):
    def test_four(self):
        self.assertEqual(1, 1)
'''
MODULE = '''\
import unittest


def setUpModule():
    raise unittest.SkipTest("the whole module")


class InModule(unittest.TestCase):
    def test_five(self):
        pass
'''


def test_a_class_or_module_skipped_in_its_set_up_has_its_tests_skipped(tmp_path: Path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("")
    (tmp_path / "lib" / "core.py").write_text(LIBRARY)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_set_up.py").write_text(TESTS)
    (tmp_path / "tests" / "test_module.py").write_text(MODULE)
    results = tmp_path / "results.xml"
    with bootstrapped(tmp_path / "channel", tmp_path, results) as channel:
        proc = subprocess.run([sys.executable, str(INCONTAINER_SOURCE / "junit_reporter.py"), "--framework",
                               "unittest", "--junit", str(results), "--", "python", "-m", "unittest", "-v",
                               "tests.test_set_up", "tests.test_module"], cwd=tmp_path,
                              env={"PATH": os.environ.get("PATH", "/usr/bin"), **channel.env}, capture_output=True,
                              text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    xml = results.read_bytes()
    statuses = parse_reporter_junit(xml).statuses
    base = "tests/test_set_up.py::"
    assert statuses == {base + "NeedsFeature::test_one": TestStatus.SKIPPED,
                        base + "NeedsFeature::test_two": TestStatus.SKIPPED,
                        base + "LibrarySkips::test_three": TestStatus.SKIPPED,
                        base + "Runs::test_four": TestStatus.PASSED,
                        "tests/test_module.py::InModule::test_five": TestStatus.SKIPPED}
    assert junit_collection_errors(xml) == []
    # each skip carries where it was raised: the library's set-up skip is the library's
    ev = parse_evidence(b"{}", channel.events())
    assert code_raised(ev, frozenset({"lib/core.py"})) == {base + "LibrarySkips::test_three"}
    assert ev.raised[base + "NeedsFeature::test_one"][0]["where"] == "tests/test_set_up.py"
