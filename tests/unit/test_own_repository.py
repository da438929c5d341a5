"""Instances from a repository's own commits: the pure parts (splitting by path, version
rules, the FAIL_TO_PASS/PASS_TO_PASS/flaky decision, a spec inferred from tree files) and
the five findings of issue 37 that need no container."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
import yaml

from harness.grading.status import TestStatus
from harness.inputs.commit_rules import (RuleError, TestPathRule, VersionRule, environment_setup_commits,
                                         instance_id_for, make_record, problem_statement_of, version_of)
from harness.inputs.instances import has_test_lists, parse_instance
from harness.inputs.spec_inference import NotInferable, infer_spec, render_spec
from harness.results.derivation import RunOutcomes, decide, render_markdown

P, F, E, S, X = TestStatus.PASSED, TestStatus.FAILED, TestStatus.ERROR, TestStatus.SKIPPED, TestStatus.XFAIL
PYTHONS = ("3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13")


# ------------------------------------------------------------------ splitting a fix commit

def test_default_rule_puts_tests_conftest_and_test_modules_in_the_test_patch():
    code, tests = TestPathRule().split(["pkg/core.py", "tests/test_core.py", "pkg/tests/data.json",
                                        "testing/helpers.py", "pkg/test_util.py", "pkg/util_test.py",
                                        "conftest.py", "docs/testing.rst", "pkg/contest.py"])
    assert code == ["pkg/core.py", "docs/testing.rst", "pkg/contest.py"]
    assert tests == ["tests/test_core.py", "pkg/tests/data.json", "testing/helpers.py", "pkg/test_util.py",
                     "pkg/util_test.py", "conftest.py"]


def test_a_users_rule_replaces_the_default():
    rule = TestPathRule(("spec/*", "*.spec.py"))  # one with a slash matches the whole path
    assert rule.split(["spec/a.py", "src/x.spec.py", "tests/test_a.py", "src/a.py"]) == (
        ["tests/test_a.py", "src/a.py"], ["spec/a.py", "src/x.spec.py"])


def test_the_split_keeps_order_and_drops_repeats():
    assert TestPathRule().split(["b.py", "a.py", "b.py", "tests/t.py"]) == (["b.py", "a.py"], ["tests/t.py"])


# ------------------------------------------------------------------ version rules

@pytest.mark.parametrize("rule, tag, version", [
    ("describe-minor", "v4.2.1", "4.2"), ("describe-minor", "release-1.10.0rc1", "1.10"),
    ("describe-minor", "2", "2.0"), ("describe-major", "v4.2.1", "4"), ("describe", "v4.2.1", "4.2.1"),
    ("describe-minor", "nightly", "nightly"), ("fixed:7.1", None, "7.1"), ("describe-minor", None, None)])
def test_version_rules(rule, tag, version):
    assert version_of(VersionRule.parse(rule), tag) == version


def test_an_unknown_version_rule_is_refused_with_the_choices():
    with pytest.raises(RuleError, match="describe-minor"):
        VersionRule.parse("semver")
    with pytest.raises(RuleError, match="needs a version"):
        VersionRule.parse("fixed:")


def test_environment_setup_commit_rules():
    records = [{"base_commit": "a", "version": "1.0", "created_at": "2024-01-01T00:00:00Z"},
               {"base_commit": "b", "version": "1.0", "created_at": "2024-03-01T00:00:00Z"},
               {"base_commit": "c", "version": "2.0", "created_at": "2024-02-01T00:00:00Z"}]
    assert environment_setup_commits(records, "base") == ["a", "b", "c"]
    assert environment_setup_commits(records, "version-latest") == ["b", "b", "c"]
    with pytest.raises(RuleError):
        environment_setup_commits(records, "newest")


def test_instance_ids_from_a_name_a_pull_request_or_the_commit():
    sha = "0123456789abcdef0123456789abcdef01234567"
    assert instance_id_for("o/n", sha, "Fix x", {}) == "o__n-0123456789ab"
    assert instance_id_for("o/n", sha, "Merge pull request #412 from a/b\n\nFix x", {}) == "o__n-412"
    assert instance_id_for("o/n", sha, "Merge pull request #412", {sha: "mine-1"}) == "mine-1"


def test_a_record_has_swebench_fields_in_order_and_empty_lists():
    record = make_record(repo="o/n", instance_id="o__n-1", base_commit="ab" * 20, patch="p", test_patch="t",
                         problem_statement=problem_statement_of("Fix it\r\n\r\nbody\n\n\n"),
                         created_at="2024-01-01T00:00:00Z", version="1.0")
    assert list(record)[:3] == ["repo", "instance_id", "base_commit"]
    assert record["problem_statement"] == "Fix it\n\nbody\n"
    assert record["FAIL_TO_PASS"] == [] and record["environment_setup_commit"] == "ab" * 20
    assert not has_test_lists(record)


def test_records_without_lists_are_accepted_only_for_a_derivation():
    record = make_record(repo="o/n", instance_id="o__n-1", base_commit="ab" * 20, patch="p", test_patch="t",
                         problem_statement="", created_at="", version="1.0")
    del record["PASS_TO_PASS"]
    with pytest.raises(Exception, match="PASS_TO_PASS"):
        parse_instance(record)
    assert parse_instance(record, lists_required=False).fail_to_pass == ()
    # a record that gives one list and not the other is no record to derive: refused
    with pytest.raises(Exception, match="FAIL_TO_PASS.*empty"):
        parse_instance({**record, "PASS_TO_PASS": ["t::a"]}, lists_required=False)
    assert has_test_lists({**record, "FAIL_TO_PASS": '["t::a"]'}) and not has_test_lists({**record, "FAIL_TO_PASS": "[]"})


# ------------------------------------------------------------------ the decision

def runs(*statuses: dict) -> list[RunOutcomes]:
    return [RunOutcomes(s) for s in statuses]


def test_fail_to_pass_pass_to_pass_and_what_is_left_out():
    without = runs({"a": F, "b": P, "c": F, "d": S, "e": E}, {"a": E, "b": P, "c": F, "d": S, "e": F})
    with_fix = runs({"a": P, "b": P, "c": F, "d": S, "e": X}, {"a": P, "b": P, "c": F, "d": S, "e": X})
    got = decide("i", without, with_fix)
    assert (got.fail_to_pass, got.pass_to_pass, got.flaky, got.refused) == (["a", "e"], ["b"], [], None)
    assert got.left_out == {"fail_in_both": ["c"], "skipped": ["d"], "xfail": [], "missing_with_fix": []}


def test_a_test_absent_without_the_fix_failed_there():
    # the test patch imports what the fix adds: without it, the module does not import
    got = decide("i", runs({}, {}), runs({"new": P, "old": P}, {"new": P, "old": P}))
    assert got.fail_to_pass == ["new", "old"] and got.refused is None


def test_flaky_tests_are_reported_and_left_out_of_both_lists():
    got = decide("i", runs({"a": F, "b": P, "c": P}, {"a": F, "b": F, "c": P}),
                 runs({"a": P, "b": P, "c": P}, {"a": P, "b": P, "c": F}))
    assert (got.fail_to_pass, got.pass_to_pass, got.flaky) == (["a"], [], ["b", "c"])
    contradicted = decide("i", runs({"a": F, "b": P}), [RunOutcomes({"a": P, "b": P}, conflicts=("b",))])
    assert contradicted.flaky == ["b"] and contradicted.pass_to_pass == []


def test_the_lists_keep_the_order_the_tests_ran_in():
    got = decide("i", runs({"z": F, "y": F, "x": P}), runs({"z": P, "x": P, "y": P}))
    assert (got.fail_to_pass, got.pass_to_pass) == (["z", "y"], ["x"])


def test_a_reference_patch_that_fixes_nothing_is_refused_with_the_evidence():
    got = decide("i", runs({"a": F, "b": P}, {"a": F, "b": P}), runs({"a": F, "b": P}, {"a": F, "b": P}))
    assert got.refused.startswith("the reference patch fixes no test") and "failing in both: a" in got.refused
    assert got.row()["status"] == "refused"


def test_a_reference_patch_that_breaks_a_kept_test_is_refused():
    got = decide("i", runs({"a": F, "b": P}), runs({"a": P}))  # b: missing with the fix
    assert got.broken == ["b"] and "breaks 1 test(s) that pass without it: b" in got.refused


def test_a_run_that_is_not_evidence_refuses_the_record():
    got = decide("i", runs({"a": F}), [RunOutcomes({"a": P}), RunOutcomes(invalid="timeout: tests exceeded 60 s")])
    assert got.refused == "run 2 with the reference patch is not evidence: timeout: tests exceeded 60 s"


def test_the_table_names_every_record_and_the_flaky_tests():
    row = decide("i-1", runs({"a": F, "b": F}, {"a": F, "b": P}), runs({"a": P, "b": P}, {"a": P, "b": P})).row()
    text = render_markdown({"input": "in", "output": "out", "repeat": 2, "runs_dir": "r",
                            "instances": [row, {"instance_id": "i-2", "status": "unchanged"}]})
    assert "| i-1 | derived | 1 | 0 | 2 | 1 |" in text and "- i-1: `b`" in text and "kept as given: 1" in text


# ------------------------------------------------------------------ a spec from tree files

def tree(files: dict[str, str]):
    return (lambda path: files.get(path)), sorted(files)


FLIT = """[build-system]
requires = ["flit_core>=3.4,<4"]
build-backend = "flit_core.buildapi"

[project]
name = "tiny"
requires-python = ">=3.8"
classifiers = ["Programming Language :: Python :: 3.9", "Programming Language :: Python :: 3.11"]

[project.optional-dependencies]
test = ["pytest>=7", "hypothesis"]
"""


def test_python_is_the_newest_the_project_names_and_requires_python_admits():
    inferred = infer_spec(*tree({"pyproject.toml": FLIT, "tiny/__init__.py": ""}), PYTHONS)
    assert inferred.fields["python"] == "3.11"
    assert "requires-python '>=3.8'" in inferred.sources["python"] and "classifiers" in inferred.sources["python"]
    assert inferred.fields["install_extras"] == ["test"] and "requirements" not in inferred.fields  # pytest in [test]
    assert "flit_core.buildapi" in inferred.sources["install"] and inferred.fields["install_requires_from_tree"]


def test_ci_configuration_and_tox_name_pythons_too():
    files = {"setup.py": "from setuptools import setup\nsetup(name='x', python_requires='>=3.6, <3.10')\n",
             ".github/workflows/ci.yml": "jobs:\n  t:\n    strategy:\n      matrix:\n        python-version: ['3.7', '3.8']\n",
             "tox.ini": "[tox]\nenvlist = py36,py37\n[testenv]\ndeps =\n    pytest<7\n    mock\n"}
    inferred = infer_spec(*tree(files), PYTHONS)
    assert inferred.fields["python"] == "3.8"  # named by the CI, admitted by python_requires (3.9 would be too)
    assert inferred.fields["requirements"] == ["pytest<7", "mock"]
    assert "tox.ini [testenv] deps" in inferred.sources["requirements"]


def test_requirement_files_are_followed_and_pytest_added_when_none_names_it():
    files = {"setup.cfg": "[metadata]\nname = x\n[options]\npython_requires = >=3.12\n",
             "requirements/test.txt": "-r base.txt\ncoverage>=5  # measured\n-e .\n--index-url http://x\n",
             "requirements/base.txt": "attrs==23.1.0\n"}
    inferred = infer_spec(*tree(files), PYTHONS)
    assert inferred.fields["python"] == "3.13"
    assert inferred.fields["requirements"] == ["attrs==23.1.0", "coverage>=5", "pytest"]
    assert "setuptools.build_meta:__legacy__" in inferred.sources["install"]


def test_a_tree_without_a_build_backend_is_refused():
    with pytest.raises(NotInferable, match="build backend cannot be inferred"):
        infer_spec(*tree({"pyproject.toml": "[tool.black]\nline-length = 99\n", "x.py": ""}), PYTHONS)
    with pytest.raises(NotInferable, match="admits none"):
        infer_spec(*tree({"pyproject.toml": FLIT.replace(">=3.8", ">=4")}), PYTHONS)


def test_the_rendered_spec_is_a_spec_the_harness_loads(tmp_path):
    from harness.inputs.specs import SpecRegistry
    inferred = infer_spec(*tree({"pyproject.toml": FLIT}), PYTHONS)
    text = render_spec("own/tiny", "0.3", inferred, "ab" * 20)
    assert text.count("  # ") >= len(inferred.fields)  # every field says where it came from
    (tmp_path / "own__tiny.yaml").write_text(text)
    spec = SpecRegistry.load(tmp_path).get("own/tiny", "0.3")
    assert (spec.python, spec.install_extras, spec.test_cmd) == ("3.11", ("test",), "python -m pytest -rA")
    assert yaml.safe_load(text)["versions"] == {"0.3": {}}


# ------------------------------------------------------------------ finding 1: build_requires from the tree

def test_an_absent_build_requires_is_read_from_the_tree_whenever_the_tree_is_built(tmp_path):
    from harness.preparation.preparer import Preparer
    from harness.inputs.specs import SpecRegistry
    (tmp_path / "pyproject.toml").write_text(FLIT)
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "own__tiny.yaml").write_text("repo: own/tiny\ndefaults:\n  python: '3.11'\n"
                                          "  install: python -m pip install --no-build-isolation --no-deps -e .\n"
                                          "versions:\n  '0.3': {}\n")
    spec = SpecRegistry.load(specs).get("own/tiny", "0.3")
    assert spec.build_requires is None and not spec.install_requires_from_tree
    fake = types.SimpleNamespace(images=types.SimpleNamespace(bases=types.SimpleNamespace(
        installer={"3.11": ("pip==24.0", "setuptools==69.5.1", "wheel==0.43.0")})))
    requirements, _, _ = Preparer.requirement_set(fake, spec, None, tmp_path)
    assert "flit_core>=3.4,<4" in [r.text for r in requirements]


# ------------------------------------------------------------------ finding 2: validate's exit

def test_a_validation_that_validated_nothing_or_built_nothing_is_a_problem():
    from harness.results.validity import validation_problem
    assert "every record was refused (a, b)" in validation_problem([], {}, ["b", "a"])
    rows = [{"instance_id": "x"}, {"instance_id": "y"}]
    built = {"x": [{"status": "FULL"}], "y": [{"status": "NO"}]}
    assert validation_problem(rows, built, []) is None
    unbuilt = {**built, "y": [{"status": "INVALID", "error_reason": "environment_build_failed"}]}
    assert "1 of 2 instance(s) failed to build: y" in validation_problem(rows, unbuilt, [])


# ------------------------------------------------------------------ finding 3: a patch that did not apply

def _not_applied(tmp_path: Path) -> Path:
    from harness.grading.status import ErrorReason, InstanceStatus
    from harness.results.report import CommandRecord, InstanceResult, summarise
    run = tmp_path / "r"
    directory = run / "o__n-1"
    directory.mkdir(parents=True)
    result = InstanceResult(instance_id="o__n-1", repo="o/n", model_name_or_path="m", status=InstanceStatus.INVALID,
                            error_reason=ErrorReason.PATCH_APPLY_FAILED, error_detail="hunk 1 failed",
                            f2p_failure=["t.py::a"], p2p_failure=["t.py::b", "t.py::c"],
                            missing=["t.py::a", "t.py::b", "t.py::c"], integrity_flags=["canary_unavailable"],
                            commands=[CommandRecord("prepare", ["x"], 0, 0.1), CommandRecord("apply", ["git"], 1, 0.1)])
    (directory / "report.json").write_text(json.dumps(result.to_report()))
    (directory / "instance.json").write_text(json.dumps({"instance_id": "o__n-1", "FAIL_TO_PASS": ["t.py::a"],
                                                         "PASS_TO_PASS": ["t.py::b", "t.py::c"]}))
    (run / "summary.json").write_text(json.dumps(summarise("r", "m", ["o__n-1"], [result], {})))
    return run


def test_a_patch_that_did_not_apply_shows_its_tests_as_not_run_not_failed(tmp_path):
    from harness.results.instance_detail import load_instance_detail
    from harness.results.run_data import load_run
    run = _not_applied(tmp_path)
    detail = load_instance_detail(run, "o__n-1", "r")
    assert {t.outcome for t in detail.tests} == {"not_run"} and detail.test_counts == (("not_run", 3),)
    reason = load_run(run).outcomes["o__n-1"].evidence.reason()
    assert "P2P regressions" not in reason and "F2P failed" not in reason and "missing" not in reason
    assert "patch_apply_failed" in reason
    assert load_run(run).outcomes["o__n-1"].figures.p2p_total == 2  # the graded tests are still counted


# ------------------------------------------------------------------ finding 4: the badge explained

def test_the_instance_page_says_what_canary_unavailable_means(tmp_path):
    from harness.views.site import write_instance_page
    run = _not_applied(tmp_path)
    write_instance_page(run, "o__n-1", "r")
    page = (run / "o__n-1" / "report.html").read_text()
    assert '<dt class="mono">canary_unavailable</dt>' in page
    assert "no canary could be planted" in page


# ------------------------------------------------------------------ finding 5: full pytest ids with spaces

def test_full_pytest_ids_with_spaces_are_graded_and_the_readme_says_so():
    from harness.grading.conventions import get_convention, map_results
    native = {"tests/test_x.py::test_f[a b]": P, "tests/test_x.py::test_f[c]": F}
    mapped = map_results(get_convention("pytest"), native, {}, ["tests/test_x.py::test_f[a b]"])
    assert mapped.statuses["tests/test_x.py::test_f[a b]"] is P and mapped.statuses["tests/test_x.py::test_f[a"] is P
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    sentence = readme[readme.index("A spec's `id_convention:`"):readme.index("`pytest-options` (requests")]
    assert "full pytest node ids, spaces in a" in sentence and "names the same" in sentence


# ------------------------------------------------------------------ outcomes read back from a run directory

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_one" file="tests/test_a.py"/>
<testcase classname="tests.test_a" name="test_p[a b]" file="tests/test_a.py"><failure message="x"/></testcase>
<testcase classname="tests.test_a" name="test_p[a c]" file="tests/test_a.py"/>
<testcase classname="tests.test_a" name="test_canary_clone" file="tests/test_a.py"><failure message="y"/></testcase>
<testcase classname="tests.test_a" name="test_canary_clone[x]" file="tests/test_a.py"><failure message="y"/></testcase>
</testsuite></testsuites>"""


def _evaluated(tmp_path: Path, status: str, reason: str | None, junit: str | None, runner: str = "pytest") -> Path:
    from harness.grading.status import ErrorReason, InstanceStatus
    from harness.results.report import CommandRecord, InstanceResult
    directory = tmp_path / "o__n-1"
    directory.mkdir()
    result = InstanceResult(instance_id="o__n-1", repo="o/n", model_name_or_path="gold",
                            status=InstanceStatus(status), error_reason=ErrorReason(reason) if reason else None,
                            parser="pytest-junit" if runner == "pytest" else runner, id_convention=runner,
                            runner=runner,
                            integrity_details={"canaries": [{"test_id": "tests/test_a.py::test_canary_clone"}]},
                            commands=[CommandRecord("tests", ["pytest"], 1, 1.0)])
    (directory / "report.json").write_text(json.dumps(result.to_report()))
    test_patch = ("diff --git a/tests/test_a.py b/tests/test_a.py\n--- a/tests/test_a.py\n+++ b/tests/test_a.py\n"
                  "@@ -1 +1,2 @@\n x = 1\n+y = 2\n")
    (directory / "instance.json").write_text(json.dumps({
        "instance_id": "o__n-1", "repo": "o/n", "base_commit": "ab" * 20, "patch": "", "test_patch": test_patch,
        "FAIL_TO_PASS": [], "PASS_TO_PASS": []}))
    if junit is not None:
        (directory / "results.xml").write_text(junit)
    return directory


def test_sympys_xpass_lines_mark_their_tests_as_swebench_keeps_no_status_for_them(tmp_path):
    """bin/test prints ``X`` for an @XFAIL test that passed; the results file says passed (as
    grading counts it), and with ``--xfail leave-out`` the derivation must leave it out."""
    from harness.evaluation.outcomes import run_outcomes
    junit = ('<testsuites><testsuite name="sympy">'
             '<testcase classname="tests.test_a" name="test_xpassing" file="tests/test_a.py"/>'
             '<testcase classname="tests.test_a" name="test_plain" file="tests/test_a.py"/></testsuite></testsuites>')
    directory = _evaluated(tmp_path, "NO", None, junit, runner="sympy")
    (directory / "test_output.txt").write_text("tests/test_a.py[2] \ntest_xpassing X\n"
                                               "test_plain ok                                  [OK]\n")
    got = run_outcomes(directory, without_fix=False)
    assert got.statuses == {"test_xpassing": P, "test_plain": P}
    assert got.xpassed == ("test_xpassing",)
    assert decide("i", [RunOutcomes({"test_xpassing": F, "test_plain": P}, xpassed=got.xpassed)], [got],
                  xfail="leave-out").pass_to_pass == ["test_plain"]


def test_every_tests_outcome_is_read_back_in_the_datasets_spelling_without_canaries(tmp_path):
    from harness.evaluation.outcomes import run_outcomes
    got = run_outcomes(_evaluated(tmp_path, "NO", None, JUNIT), without_fix=False)
    # pytest's convention spells a parametrised id cut at its first space; two tests share it: the worst stands
    assert got.statuses == {"tests/test_a.py::test_one": P, "tests/test_a.py::test_p[a": F} and got.invalid is None


def test_a_run_without_the_fix_whose_test_module_did_not_import_is_evidence(tmp_path):
    from harness.evaluation.outcomes import run_outcomes
    uncollected = ('<testsuites><testsuite name="pytest"><testcase classname="" name="tests.test_a">'
                   '<error message="collection failure">ImportError</error></testcase></testsuite></testsuites>')
    directory = _evaluated(tmp_path, "INVALID", "suite_did_not_run", uncollected)
    assert run_outcomes(directory, without_fix=True) == RunOutcomes({})
    assert run_outcomes(directory, without_fix=False).invalid.startswith("suite_did_not_run")


def test_an_expected_failure_passes_or_is_left_out_as_swebench_leaves_it():
    without, with_fix = runs({"a": F, "x": X, "y": F}), runs({"a": P, "x": X, "y": X})
    kept = decide("i", without, with_fix)
    assert (kept.fail_to_pass, kept.pass_to_pass) == (["a", "y"], ["x"])  # as grading counts an XFAIL
    left = decide("i", without, with_fix, xfail="leave-out")
    assert (left.fail_to_pass, left.pass_to_pass, left.left_out["xfail"]) == (["a"], [], ["x", "y"])
    with pytest.raises(ValueError):
        decide("i", without, with_fix, xfail="drop")


def test_an_xpass_is_left_out_with_the_expected_failures():
    without = [RunOutcomes({"a": F, "x": P}, xpassed=("x",))]
    with_fix = [RunOutcomes({"a": P, "x": P}, xpassed=("x",))]
    assert decide("i", without, with_fix).pass_to_pass == ["x"]  # PASSED to grading
    assert decide("i", without, with_fix, xfail="leave-out").left_out["xfail"] == ["x"]


def test_xpass_lines_of_the_output_mark_their_tests(tmp_path):
    from harness.evaluation.outcomes import run_outcomes
    directory = _evaluated(tmp_path, "NO", None, JUNIT)
    (directory / "test_output.txt").write_text("PASSED tests/test_a.py::test_one\n"
                                               "XPASS tests/test_a.py::test_p[a c] reason\n")
    got = run_outcomes(directory, without_fix=False)
    assert got.xpassed == ("tests/test_a.py::test_p[a",)
