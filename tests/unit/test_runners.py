"""Runners (harness/runners): registry, commands, targets, ids, canaries, spec fields."""

from __future__ import annotations

import shlex
import random
import textwrap
from pathlib import Path

import pytest

from harness.errors import UnknownNameError
from harness.evaluation.setup import build_test_command
from harness.integrity.canaries import plant
from harness.grading.parsers import get_parser
from harness.patches import patch_files
from harness.runners import INCONTAINER_DIR, RUNNERS, get_runner
from harness.runners.unittest_runner import django_label
from harness.inputs.specs import EnvSpec, SpecRegistry

DJANGO_TEST_PATCH = """\
diff --git a/tests/admin_views/tests.py b/tests/admin_views/tests.py
--- a/tests/admin_views/tests.py
+++ b/tests/admin_views/tests.py
@@ -1,1 +1,2 @@
 x = 1
+y = 2
diff --git a/tests/admin_views/models.py b/tests/admin_views/models.py
--- a/tests/admin_views/models.py
+++ b/tests/admin_views/models.py
@@ -1,1 +1,2 @@
 x = 1
+y = 2
diff --git a/tests/admin_views/fixtures/data.json b/tests/admin_views/fixtures/data.json
--- a/tests/admin_views/fixtures/data.json
+++ b/tests/admin_views/fixtures/data.json
@@ -1,1 +1,1 @@
-[]
+[{}]
"""


def test_registry_and_close_names():
    assert {"pytest", "sympy", "django", "unittest"} <= set(RUNNERS)
    with pytest.raises(UnknownNameError, match="'django'"):
        get_runner("djang")


def test_pytest_options_come_after_the_file_arguments():
    """pytest 3's -o takes every following word: nothing of ours sits between the command
    and its files (astropy 1.3's pytest 3.3.1 lost its file arguments that way)."""
    spec = EnvSpec(repo="a/b", version="1", test_cmd="pytest -rA -p no:cacheprovider")
    command = build_test_command(spec, patch_files(_patch("tests/test_x.py", "tests/test_y.py")), "/harness/o/r.xml")
    words = shlex.split(command)
    assert words[:5] == ["pytest", "-rA", "-p", "no:cacheprovider", "tests/test_x.py"]
    assert words[5] == "tests/test_y.py"
    assert words[6:] == ["--junitxml=/harness/o/r.xml", "-o", "junit_family=xunit1"]


def test_pytest_test_directives_none_runs_the_command_alone():
    spec = EnvSpec(repo="a/b", version="1", test_cmd="pytest -rA", test_directives="none")
    assert shlex.split(build_test_command(spec, patch_files(_patch("t/test_x.py")), "/r.xml")) == [
        "pytest", "-rA", "--junitxml=/r.xml", "-o", "junit_family=xunit1"]


def test_sympy_runs_bin_test_unchanged_under_the_reporter():
    spec = EnvSpec(repo="sympy/sympy", version="1.1", runner="sympy", parser="sympy", id_convention="sympy",
                   test_cmd="bin/test -C --verbose")
    words = shlex.split(build_test_command(spec, patch_files(_patch("sympy/core/tests/test_basic.py")), "/o/r.xml"))
    split = words.index("--")
    assert words[:split] == ["/opt/harness/venv/bin/python", f"{INCONTAINER_DIR}/junit_reporter.py",
                             "--framework", "sympy", "--junit", "/o/r.xml"]
    assert words[split + 1:] == ["bin/test", "-C", "--verbose", "sympy/core/tests/test_basic.py"]


def test_django_labels_as_swebench_derives_them():
    runner = get_runner("django")
    test_patch = patch_files(DJANGO_TEST_PATCH)
    assert runner.targets(test_patch) == ["admin_views.tests", "admin_views.models"]
    assert runner.test_files(test_patch) == ["tests/admin_views/tests.py", "tests/admin_views/models.py"]
    assert django_label("tests/migrations/test_commands.py") == "migrations.test_commands"
    assert django_label("django/contrib/auth/tests/test_x.py") == "django.contrib.auth.tests.test_x"
    # the canaries go into a test module, not into models.py
    assert runner.canary_file(runner.test_files(test_patch)) == "tests/admin_views/tests.py"


def test_spell_id_and_canaries_per_runner():
    assert get_runner("pytest").spell_id("t/test_a.py", None, "test_x") == "t/test_a.py::test_x"
    assert get_runner("sympy").spell_id("s/tests/test_a.py", None, "test_x") == "s/tests/test_a.py::test_x"
    assert get_runner("django").spell_id("tests/a/tests.py", "T", "test_x") == "tests/a/tests.py::T::test_x"
    with pytest.raises(ValueError, match="class"):
        get_runner("django").spell_id("tests/a/tests.py", None, "test_x")
    # canaries are clones of real tests in their own scope, spelled by the runner
    module = ("import unittest\n\n\ndef helper(n):\n    return 2 * n\n\n\n"
              "class TestThing(unittest.TestCase):\n    def test_two_of_one(self):\n        self.assertEqual(helper(1), 2)\n\n"
              "    def test_six_of_three(self):\n        self.assertEqual(helper(3), 6)\n\n\n"
              "def test_two_of_one():\n    assert helper(1) == 2\n\n\n"
              "def test_six_of_three():\n    assert helper(3) == 6\n").encode()
    files = {"tests/a/models.py": module, "tests/a/tests.py": module}
    changed, canaries = plant(files, list(files), {}, count=3, spell=get_runner("django").spell_id,
                              styles=get_runner("django").canary_styles,
                              collects_class=get_runner("django").collects_class)
    assert canaries and all(c.path == "tests/a/tests.py" and c.cls == "TestThing" for c in canaries)
    assert all(c.test_id == get_runner("django").spell_id(c.path, c.cls, c.name) for c in canaries)
    compile(changed["tests/a/tests.py"], "canary", "exec")
    sympy = get_runner("sympy")
    _, functions = plant({"sympy/core/tests/test_a.py": module}, ["sympy/core/tests/test_a.py"], {}, count=3,
                         spell=sympy.spell_id, styles=sympy.canary_styles, collects_class=sympy.collects_class)
    assert functions and all(c.cls is None and c.test_id == f"sympy/core/tests/test_a.py::{c.name}"
                             for c in functions)


#: tests that share their words and numbers, as real test modules do (a canary's tokens
#: come from its file)
PAIRS = [("sum", "pair", b"[4, 5]", 9), ("max", "pair", b"[4, 9]", 9), ("min", "pair", b"[5, 9]", 5),
         ("sum", "trio", b"[2, 3, 4]", 9)]


def test_unittest_canary_really_fails_and_passes(tmp_path):
    """The method canaries run under plain unittest: each fails where its original passes."""
    import subprocess
    import sys
    runner = get_runner("unittest")
    source = (b"import unittest\n\n\nclass TestMod(unittest.TestCase):\n"
              + b"".join(b"    def test_%s_of_%s(self):\n        self.assertEqual(%s(%s), %d)\n"
                         b"        self.assertEqual(len(%r), %d)\n\n" % (f.encode(), w.encode(), f.encode(), a, v,
                                                                           w.encode(), len(w))
                         for f, w, a, v in PAIRS))
    changed, canaries = plant({"test_mod.py": source}, ["test_mod.py"], {}, count=1, spell=runner.spell_id,
                              styles=runner.canary_styles, collects_class=runner.collects_class,
                              rng=random.Random(0))
    (canary,) = canaries
    (tmp_path / "test_mod.py").write_bytes(changed["test_mod.py"])
    proc = subprocess.run([sys.executable, "-m", "unittest", "-v", "test_mod"], cwd=tmp_path, capture_output=True,
                          text=True)
    assert proc.returncode == 1
    assert f"{canary.original} (test_mod.TestMod" in proc.stderr and f"{canary.name} (test_mod.TestMod" in proc.stderr
    assert "FAILED (failures=1)" in proc.stderr and "Ran 5 tests" in proc.stderr


def test_spec_defaults_follow_the_runner(tmp_path: Path):
    (tmp_path / "x.yaml").write_text(textwrap.dedent("""\
        repo: a/b
        defaults: {runner: django, test_cmd: "./tests/runtests.py --verbosity 2"}
        versions: {'1': {}}
    """))
    spec = SpecRegistry.load(tmp_path).get("a/b", "1")
    assert (spec.runner, spec.parser, spec.id_convention) == ("django", "django", "django")
    plain = EnvSpec(repo="a/b", version="1")
    assert (plain.runner, plain.parser, plain.id_convention) == ("pytest", "pytest", "pytest")
    assert get_parser(spec.parser).name == "django"


def test_project_specs_name_their_runners():
    from harness.inputs.specs import DEFAULT_SPECS_DIR
    registry = SpecRegistry.load(DEFAULT_SPECS_DIR)
    assert registry.get("sympy/sympy", "1.1").runner == "sympy"
    assert registry.get("django/django", "4.2").runner == "django"
    assert registry.get("psf/requests", "2.10").id_convention == "pytest-options"
    assert registry.get("pytest-dev/pytest", "8.0").runner == "pytest"


def _patch(*paths: str) -> str:
    return "".join(f"diff --git a/{p} b/{p}\n--- a/{p}\n+++ b/{p}\n@@ -1,1 +1,2 @@\n x\n+y\n" for p in paths)


def test_patches_reaching_into_the_sympy_reporter_are_flagged():
    """Added lines reaching into a runner's own result machinery are runner internals (a
    tampered run unless the spec is the runner's own project)."""
    from harness.integrity.scan import pattern_findings
    old = b"x = 1\n"
    new = (b"x = 1\nfrom sympy.testing.runtests import PyTestReporter\n"
           b"PyTestReporter.test_fail = PyTestReporter.test_pass\n")
    hits = pattern_findings(new, old, "sympy/core/basic.py", get_runner("sympy").internals)
    assert [h.category for h in hits] == ["runner_internals", "runner_internals"] and hits[0].line == 2
    assert pattern_findings(new, old, "sympy/core/basic.py", get_runner("pytest").internals) == []
    assert pattern_findings(new, new, "sympy/core/basic.py", get_runner("sympy").internals) == []


def test_nested_classes_are_spelled_as_pytest_node_ids():
    assert get_runner("pytest").test_id("t/test_a.py", "Outer.Inner", "test_x") == "t/test_a.py::Outer::Inner::test_x"
    assert get_runner("unittest").spell_id("t/test_a.py", "Outer.Inner", "test_x") == "t/test_a.py::Outer::Inner::test_x"


def test_pytest_canaries_go_into_the_test_classes_pytest_collects_and_fail_there(tmp_path):
    """pytest runs module-level tests and methods of Test* classes (and TestCase subclasses):
    canaries go into either, never into a class pytest skips (a helper class, one with
    __init__, a decorated one), and each canary fails under real pytest while its original passes."""
    import ast
    import subprocess
    import sys
    runner = get_runner("pytest")
    collects = {c.name: runner.collects_class(c) for c in ast.parse(
        "import unittest\nclass TestA: pass\nclass TestB:\n    def __init__(self): pass\n"
        "class Helper: pass\nclass CaseTests(unittest.TestCase): pass\nclass Mixin(object): pass\n"
        "@decorate\nclass TestC: pass\n").body if isinstance(c, ast.ClassDef)}
    assert collects == {"TestA": True, "TestB": False, "Helper": False, "CaseTests": True, "Mixin": False,
                        "TestC": False}
    source = (b"class Helper:\n    def test_not_collected(self):\n        assert len('ab') == 2\n\n\n"
              b"class TestShapes:\n"
              + b"".join(b"    def test_%s_of_%s(self):\n        assert %s(%s) == %d\n        assert len(%r) == %d\n\n"
                         % (f.encode(), w.encode(), f.encode(), a, v, w.encode(), len(w)) for f, w, a, v in PAIRS))
    changed, canaries = plant({"test_mod.py": source}, ["test_mod.py"], {}, count=2, spell=runner.spell_id,
                              styles=runner.canary_styles, collects_class=runner.collects_class,
                              rng=random.Random(0))
    assert len(canaries) == 2 and all(c.cls == "TestShapes" for c in canaries)
    (tmp_path / "test_mod.py").write_bytes(changed["test_mod.py"])
    proc = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "test_mod.py"],
                          cwd=tmp_path, capture_output=True, text=True)
    for canary in canaries:
        assert f"FAILED {canary.test_id}" in proc.stdout, proc.stdout
        assert f"PASSED {canary.original_id}" in proc.stdout, proc.stdout
