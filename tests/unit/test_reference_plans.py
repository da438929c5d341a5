"""Issue 36, class 4: only test code is restored; library code is never reverted. And
class 2's half that the plan holds: install metadata is matched as the loaders match it.

The property over the published data: **no file of any Lite or Verified reference patch is
reverted** by the restore plan (all 800 records, 707 distinct: django, matplotlib and
scikit-learn included; planning needs no container, see
harness/integrity/reference_plan.py for the layout each record is planned with). At
6eb3dd5 three are: matplotlib-18869 and -23299 (``lib/matplotlib/__init__.py``, an
``__init__.py`` above the tests) and pylint-4661 (``setup.cfg``, whose change is the
project's dependency list, not the runner's section).
"""

from __future__ import annotations

import json

import pytest

from harness.integrity.plan import make_plan
from harness.integrity.tree import TreeChange, TreeTruth
from tests import realdata
from tests.scripts import loaded_script


def tree(*changes: TreeChange) -> TreeTruth:
    return TreeTruth(list(changes), "git_apply", 1, [], False, [])


MPL = frozenset({"lib/matplotlib/__init__.py", "lib/matplotlib/axes/__init__.py", "lib/matplotlib/axes/_base.py",
                 "lib/matplotlib/tests/__init__.py", "lib/matplotlib/tests/test_axes.py",
                 "lib/matplotlib/tests/conftest.py", "setup.py", "setup.cfg"})


def test_library_package_markers_above_the_tests_are_library_code():
    truth = tree(TreeChange("lib/matplotlib/__init__.py", "modified", "file"),
                 TreeChange("lib/matplotlib/axes/__init__.py", "modified", "file"),
                 TreeChange("lib/matplotlib/tests/__init__.py", "modified", "file"),
                 TreeChange("lib/matplotlib/tests/conftest.py", "modified", "file"))
    plan = make_plan(truth, ["lib/matplotlib/tests/test_axes.py"], ["lib/matplotlib/tests/test_axes.py"], MPL,
                     frozenset())
    assert plan.restore == ["lib/matplotlib/tests/__init__.py", "lib/matplotlib/tests/conftest.py"]
    assert plan.model_files == ["lib/matplotlib/__init__.py", "lib/matplotlib/axes/__init__.py"]
    # still sealed in place for the run (not reverted): the tests cannot rewrite it
    assert "lib/matplotlib/__init__.py" in plan.seal_files


def test_a_module_is_a_shadow_only_on_a_directory_on_the_tests_path():
    """``lib/matplotlib/typing.py`` is a module of the package (imported as
    ``matplotlib.typing``), never ``typing``: ``lib/matplotlib`` is a package, not on the
    path. ``lib/typing.py`` would be found as ``typing`` (``lib`` is the tests' base
    directory: pytest puts it on the path)."""
    truth = tree(TreeChange("lib/matplotlib/typing.py", "created", "file"),
                 TreeChange("lib/typing.py", "created", "file"))
    plan = make_plan(truth, ["lib/matplotlib/tests/test_axes.py"], ["lib/matplotlib/tests/test_axes.py"], MPL,
                     frozenset({"typing"}))
    assert plan.delete == ["lib/typing.py"]
    assert plan.model_files == ["lib/matplotlib/typing.py"]


SETUP_CFG = b"[metadata]\nname = pylint\n\n[options]\ninstall_requires =\n    astroid\n\n[tool:pytest]\naddopts = -q\n"


@pytest.mark.parametrize("after,steers", [
    (SETUP_CFG.replace(b"    astroid\n", b"    astroid\n    appdirs\n"), False),        # the project's own
    (SETUP_CFG.replace(b"addopts = -q", b"addopts = -q -p evil"), True),               # the runner's
    (SETUP_CFG + b"[TOOL:PYTEST]\npython_functions = nothing\n", True),               # a second spelling
    (SETUP_CFG.replace(b"[options]", b"[options]\n[pytest]\naddopts = -x"), True),
    (SETUP_CFG.replace(b"addopts = -q", b"addopts = -q\n  --deselect x"), True),       # a continuation
    (b"\xff\xfe", True),                                                              # not readable
])
def test_shared_configuration_is_restored_only_when_the_runner_section_changes(after, steers):
    from harness.integrity.plan import steers_runner
    assert steers_runner("setup.cfg", SETUP_CFG, after) is steers


def test_pyproject_runner_table_in_any_toml_form_steers():
    from harness.integrity.plan import steers_runner
    before = b'[project]\nname = "x"\n'
    assert steers_runner("pyproject.toml", before, before + b'dependencies = ["a"]\n') is False
    assert steers_runner("pyproject.toml", before, before + b'[tool.pytest.ini_options]\naddopts = "-p x"\n')
    assert steers_runner("pyproject.toml", before, b'tool = {pytest = {ini_options = {addopts = "-p x"}}}\n'
                         + before)
    assert steers_runner("pyproject.toml", before, b"[project\n")   # unreadable


def test_a_shared_configuration_change_outside_the_runner_section_stays():
    truth = tree(TreeChange("setup.cfg", "modified", "file",
                            content=SETUP_CFG.replace(b"    astroid\n", b"    astroid\n    appdirs\n")))
    plan = make_plan(truth, ["tests/test_x.py"], ["tests/test_x.py"], frozenset({"setup.cfg"}), frozenset(),
                     pristine_bytes=lambda path: SETUP_CFG if path == "setup.cfg" else None)
    assert plan.restore == [] and plan.model_files == ["setup.cfg"]
    hostile = tree(TreeChange("setup.cfg", "modified", "file", content=SETUP_CFG + b"[TOOL:PYTEST]\n"))
    plan = make_plan(hostile, ["tests/test_x.py"], ["tests/test_x.py"], frozenset({"setup.cfg"}), frozenset(),
                     pristine_bytes=lambda path: SETUP_CFG)
    assert plan.restore == ["setup.cfg"]


@pytest.mark.parametrize("path", ["Evil.EGG-INFO/entry_points.txt", "evil.Dist-Info/entry_points.txt",
                                  "src/x.DIST-INFO/METADATA", "evil.egg/EGG-INFO/entry_points.txt",
                                  "Evil.Egg-Link", "__EDITABLE__.evil.pth", "__editable___evil_finder.py",
                                  "evil.PTH"])
def test_install_metadata_is_matched_as_the_loaders_match_it(path):
    """importlib.metadata and pkg_resources find a distribution's metadata by a lower-cased
    suffix: at 6eb3dd5 only the lower-case spellings were restored."""
    truth = tree(TreeChange(path, "created", "file"))
    plan = make_plan(truth, ["tests/test_x.py"], ["tests/test_x.py"], frozenset({"pkg/__init__.py"}), frozenset())
    assert plan.restore == [path] and plan.model_files == []


def test_install_metadata_rule_leaves_other_names_alone():
    from harness.integrity.plan import is_install_metadata
    assert not is_install_metadata("pkg/eggs.py") and not is_install_metadata("docs/dist-info.rst")


def test_no_reference_patch_file_is_reverted_over_every_lite_and_verified_record(tmp_path):
    """The 800 records (707 distinct ids). The nine repositories here are planned with their
    base commit's tree (and their shared configuration files' real contents), django,
    matplotlib and scikit-learn with the layout their patches imply."""
    realdata.require()
    report = tmp_path / "plans.json"
    with loaded_script("check_reference_plans") as script:
        code = script.main([str(realdata.LITE), str(realdata.VERIFIED), "--repos-dir", str(realdata.REPOS),
                            "--json", str(report)])
    found = json.loads(report.read_text())
    assert found["records"] == 707
    assert found["layouts"]["tree"] >= 300
    assert found["reverted"] == [], found["reverted"]
    assert code == 0
