"""Issue 36, class 3: every walk over what the tests (or a build) left is iterative and
bounded, and says what it could not see; the host charges that to the model.

A directory tree 2,500 levels deep (past Python's recursion limit in ``os.walk`` and
``shutil.rmtree`` of Python 3.11, the launcher's interpreter, and past ``PATH_MAX``), made
with directory descriptors as code under test can make it, in a sealed directory, in the
working copy and in the results directory. At 6eb3dd5 the survey, the purge and the
removal raise ``RecursionError`` (the launcher then wrote no evidence, and the run was
``container_died``, charged to the harness and retried); here they finish, the survey and
the purge say ``truncated``, the tree is removed, and the host makes the run
``ambiguous_results`` (origin model).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.grading.status import ErrorReason
from harness.incontainer import sealing
from harness.integrity.evidence import SURVEY_WATCH, judge_evidence, parse_evidence

DEPTH = 2500


@pytest.fixture(autouse=True)
def _no_deep_tree_left(tmp_path):
    """pytest's own clean-up of old temporary directories recurses (shared by every session
    on the machine): every deep tree made here is removed here, whatever the test did."""
    yield
    for entry in list(os.scandir(tmp_path)):
        if entry.is_dir(follow_symlinks=False):
            _flatten_remove(entry.path)


def _flatten_remove(path: str) -> None:
    """GNU rm walks a tree of any depth without recursion (and without the code under test)."""
    subprocess.run(["rm", "-rf", "--", path], check=True)


def deep_tree(parent: str, name: str = "d", depth: int = DEPTH) -> None:
    """``parent/name/d/d/...`` ``depth`` levels down, with a file at the bottom."""
    fd = os.open(parent, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            sub = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd, name = sub, "d"
        os.close(os.open("conftest.py", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    finally:
        os.close(fd)


def test_the_survey_of_a_tree_deeper_than_any_walk_finishes_and_says_so(tmp_path):
    assert sys.getrecursionlimit() < DEPTH
    sealed_dir = tmp_path / "tests"
    sealed_dir.mkdir()
    (sealed_dir / "test_x.py").write_text("")
    dirs = [str(sealed_dir)]
    before = sealing.listings(dirs)
    deep_tree(str(sealed_dir))
    out = sealing.survey(str(tmp_path), dirs, before, [str(sealed_dir / "test_x.py")], SURVEY_WATCH)
    assert out["truncated"] is True
    assert sealing.MAX_DEPTH < out["count"] <= sealing.MAX_DEPTH + 2
    verdict = judge_evidence(parse_evidence(json_bytes({"created": out}), b""), {}, (), frozenset(), True, False,
                             False)
    assert "created_entries_unsurveyed" in verdict.flags and verdict.ambiguous and not verdict.tampered


def test_a_tree_of_any_depth_is_removed(tmp_path):
    deep_tree(str(tmp_path), "run")
    sealing.remove(str(tmp_path / "run"))
    assert os.listdir(tmp_path) == []


def test_the_bytecode_purge_walks_a_deep_working_copy_without_recursion(tmp_path):
    testbed, pristine = tmp_path / "testbed", tmp_path / "pristine"
    for root in (testbed, pristine):
        (root / "pkg" / "__pycache__").mkdir(parents=True)
        (root / "pkg" / "m.py").write_text("x = 1\n")
    (testbed / "pkg" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"planted")
    deep_tree(str(testbed / "pkg"), "build")
    record: dict = {}
    sealing.purge_bytecode(str(testbed), str(pristine), record)
    assert record["bytecode_removed"]["sample"] == ["pkg/__pycache__/m.cpython-311.pyc"]
    assert record["bytecode_removed"]["truncated"] is True
    verdict = judge_evidence(parse_evidence(json_bytes(record), b""), {}, (), frozenset(), True, False, False)
    assert "bytecode_unsurveyed" in verdict.flags and verdict.ambiguous


def test_a_launcher_that_stopped_after_the_tests_is_the_models_doing():
    """The launcher writes what it knows before reading the tests' leftovers
    (``complete`` false); a record like that, or one with errors from the checks, is
    ambiguous, which is the model's: never a harness fault retried as infrastructure."""
    for launcher in ({"tests": {"exit_code": 0}, "complete": False},
                     {"tests": {"exit_code": 0}, "complete": False, "post_run_errors": ["the checks: RecursionError"]}):
        verdict = judge_evidence(parse_evidence(json_bytes(launcher), b""), {}, (), frozenset(), True, False, False)
        assert "post_run_checks_incomplete" in verdict.flags and verdict.ambiguous
        assert verdict.infrastructure is None
    assert ErrorReason.AMBIGUOUS_RESULTS.origin == "model"


def json_bytes(record: dict) -> bytes:
    import json
    return json.dumps(record).encode()
