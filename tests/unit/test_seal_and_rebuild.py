"""The seal's survey, bytecode purge and fingerprints (harness/incontainer/sealing.py, run
here on a real directory tree), how the host judges what the tests created
(harness/integrity/evidence.py), and when the patched tree is rebuilt and who a failed
rebuild is charged to (harness/integrity/rebuild.py)."""

from __future__ import annotations

import json
import os

import pytest

from harness.errors import RebuildFailed
from harness.incontainer import sealing
from harness.inputs.specs import EnvSpec
from harness.integrity import rebuild
from harness.integrity.evidence import SURVEY_WATCH, created_entries, judge_evidence, parse_evidence
from harness.integrity.plan import make_plan
from harness.integrity.tree import TreeChange, TreeTruth

# --------------------------------------------------------------------------- the survey


def _tree(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _sealed_dirs(root):
    tests = root / "tests"
    return [str(root), str(tests), str(tests / "unit")]


def test_survey_reports_what_honest_tests_write_and_watches_what_a_runner_would_load(tmp_path):
    _tree(tmp_path, {"tests/test_a.py": "", "tests/unit/__init__.py": "", "tests/unit/test_b.py": "",
                     "tests/data/x.txt": "", "pkg/mod.py": ""})
    dirs = _sealed_dirs(tmp_path)
    sealed = [str(tmp_path / p) for p in ("tests/test_a.py", "tests/unit/__init__.py", "tests/unit/test_b.py")]
    before = sealing.listings(dirs)
    # honest: a temp tree with a package of its own, a fixture file, a cache
    _tree(tmp_path, {"tests/testbed/test_target.py": "", "tests/testbed/pkg/__init__.py": "", "tests/out.json": "",
                     ".cache/v/x": ""})
    honest = sealing.survey(str(tmp_path), dirs, before, sealed, SURVEY_WATCH)
    assert honest["count"] == 8 and not honest["truncated"]
    judged = created_entries({"created": honest})
    assert judged.infra == {} and judged.shadows == [], honest["watched"]
    # hostile: runner infrastructure where it is loaded, and entries found before sealed modules
    (tmp_path / "tests" / "test_a").mkdir()                                     # a package beside test_a.py
    (tmp_path / "tests" / "unit" / "test_b.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (tmp_path / "tests" / "unit" / "__init__.abi3.so").write_bytes(b"\x7fELF")  # shadows the package itself
    _tree(tmp_path, {"tests/conftest.py": "", "tests/testbed/conftest.py": "", "tests/pytest.ini": "",
                     "tests/evil.pth": "", "tests/testbed/pkg/sub/__init__.py": ""})
    os.symlink("/tmp", tmp_path / "tests" / "unit" / "test_b")                  # a link where a package would be
    hostile = sealing.survey(str(tmp_path), dirs, before, sealed, SURVEY_WATCH)
    judged = created_entries({"created": hostile})
    assert judged.infra == {"tests": ["conftest.py", "evil.pth", "pytest.ini"], "tests/testbed": ["conftest.py"]}
    assert sorted(judged.shadows) == [
        "tests/test_a (beside tests/test_a.py)",
        "tests/unit/__init__.abi3.so (beside tests/unit/__init__.py)",
        "tests/unit/test_b (beside tests/unit/test_b.py)",
        "tests/unit/test_b.cpython-311-x86_64-linux-gnu.so (beside tests/unit/test_b.py)"]
    # a package's __init__.py inside a directory the tests made is theirs; a module beside an unsealed one too
    assert not any("pkg/sub" in d for d in judged.infra)
    (tmp_path / "pkg" / "mod").mkdir()
    assert created_entries({"created": sealing.survey(str(tmp_path), dirs + [str(tmp_path / "pkg")],
                                                      {**before, str(tmp_path / "pkg"): {"mod.py"}}, sealed,
                                                      SURVEY_WATCH)}).shadows == judged.shadows


def test_the_survey_is_bounded_and_says_when_it_stopped(tmp_path, monkeypatch):
    _tree(tmp_path, {"tests/test_a.py": ""})
    dirs = [str(tmp_path / "tests")]
    before = sealing.listings(dirs)
    for i in range(30):
        (tmp_path / "tests" / f"f{i}").write_text("")
    monkeypatch.setattr(sealing, "SURVEY_BUDGET", 10)
    out = sealing.survey(str(tmp_path), dirs, before, [], SURVEY_WATCH)
    assert out["truncated"] and out["count"] == 10
    verdict = judge_evidence(parse_evidence(json.dumps({"created": out}).encode(), b""), {}, (), frozenset(),
                             True, False, False)
    assert "created_entries_unsurveyed" in verdict.flags and verdict.ambiguous


def test_planted_infrastructure_and_shadows_make_the_run_tampered_and_old_evidence_still_counts():
    hostile = {"created": {"count": 2, "truncated": False, "watched": [
        {"path": "tests/conftest.py", "kind": "file", "direct": True, "beside": None},
        {"path": "tests/test_a", "kind": "dir", "direct": True, "beside": "tests/test_a.py"}]},
        "protected_hardlinks": 0}
    verdict = judge_evidence(parse_evidence(json.dumps(hostile).encode(), b""), {}, (), frozenset(), True, False,
                             False)
    assert {"infra_planted_during_run", "shadow_planted_during_run", "hardlinks_unprotected"} <= set(verdict.flags)
    assert "conftest.py" in verdict.tampered and "tests/test_a (beside tests/test_a.py)" in verdict.tampered
    # evidence.json of a run before the survey: new names in the sticky directories
    old = created_entries({"new_entries": {"": [".pytest_cache", "conftest.py"]}})
    assert old.infra == {"": ["conftest.py"]} and old.shadows == []


# --------------------------------------------------------------------------- bytecode and fingerprints


def test_bytecode_the_pristine_tree_does_not_have_is_removed(tmp_path):
    pristine, testbed = tmp_path / "pristine", tmp_path / "testbed"
    _tree(pristine, {"pkg/__pycache__/mod.cpython-311.pyc": "pristine", "pkg/legacy.pyc": "old", "pkg/mod.py": ""})
    _tree(testbed, {"pkg/__pycache__/mod.cpython-311.pyc": "pristine", "pkg/legacy.pyc": "old", "pkg/mod.py": "",
                    "tests/__pycache__/test_a.cpython-311-pytest-8.3.4.pyc": "planted",
                    "tests/__pycache__/nested/x.pyc": "", "pkg/new.pyc": "", ".git/objects/x.pyc": "kept"})
    os.utime(testbed / "pkg/__pycache__/mod.cpython-311.pyc", (1, 1))   # metadata alone is never trusted
    (testbed / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_text("pristinE")  # same size, other bytes
    record = {}
    sealing.purge_bytecode(str(testbed), str(pristine), record)
    left = sorted(str(p.relative_to(testbed)) for p in testbed.rglob("*") if p.is_file())
    assert left == [".git/objects/x.pyc", "pkg/legacy.pyc", "pkg/mod.py"]
    assert record["bytecode_removed"]["count"] == 4    # the nested directory goes as one


def test_a_fingerprint_sees_links_but_a_sealed_directory_may_gain_entries(tmp_path):
    _tree(tmp_path, {"tests/test_a.py": "x"})
    directory, path = str(tmp_path / "tests"), str(tmp_path / "tests" / "test_a.py")
    before = {p: sealing.fingerprint(p) for p in (directory, path)}
    (tmp_path / "tests" / "new.txt").write_text("honest")
    (tmp_path / "tests" / "newdir").mkdir()
    assert sealing.fingerprint(directory) == before[directory]
    os.link(path, tmp_path / "tests" / "alias.py")
    assert sealing.fingerprint(path) != before[path]


# --------------------------------------------------------------------------- rebuilds

ASTROPY_LIKE = EnvSpec("o/r", "1", install="python setup.py build_ext --inplace", compiler="keep",
                       rebuild_in_place=True)
REQUESTS_LIKE = EnvSpec("o/r", "1", install="python -m pip install -e .")


def test_a_rebuild_runs_only_where_it_can_and_matters():
    assert rebuild.decide(REQUESTS_LIKE, ["requests/models.py"], 0) == rebuild.RebuildDecision(False, "")
    # a harmless .c in a pure-Python repository: nothing built is imported from the tree
    quiet = rebuild.decide(REQUESTS_LIKE, ["requests/models.py", "requests/speedups.c"], 0)
    assert not quiet.run and "no compiled extension" in quiet.why
    assert rebuild.decide(ASTROPY_LIKE, ["astropy/wcs/src/wcs.c"], 40).run
    assert not rebuild.decide(ASTROPY_LIKE, ["astropy/wcs/src/wcs.c"], 0).run
    # compiled extensions in the tree, a touched source, no way to rebuild: the environment's failure
    with pytest.raises(RebuildFailed) as info:
        rebuild.decide(REQUESTS_LIKE, ["requests/speedups.c"], 3)
    assert info.value.reason == "environment_build_failed" and info.value.origin == "harness"
    always = EnvSpec("o/r", "1", install="make inplace", reinstall_after_patch="always", rebuild_in_place=True)
    assert rebuild.decide(always, ["README.rst"], 0).run


def _record(build_exit, pristine_exit=None, timed_out=False):
    record = {"build": {"exit_code": build_exit, "timed_out": timed_out},
              "commands": [{"phase": "build", "output_tail": "x.c:3:1: error: expected ';'\n"}]}
    if pristine_exit is not None:
        record["pristine_build"] = {"exit_code": pristine_exit, "timed_out": False}
    return record


def test_a_failed_rebuild_is_the_models_only_when_the_pristine_tree_rebuilds():
    assert rebuild.outcome(_record(0), "make", 60) is None
    model = rebuild.outcome(_record(1, 0), "make", 60)
    assert model.reason == "rebuild_failed" and model.origin == "model" and "x.c:3:1: error" in str(model)
    assert rebuild.outcome(_record(None, 0, timed_out=True), "make", 60).reason == "timeout"
    for pristine in (2, None):   # the pristine tree fails too, or could not be tried
        env = rebuild.outcome(_record(1, pristine), "make", 60)
        assert env.reason == "environment_build_failed" and env.origin == "harness"


def _truth(*changes):
    return TreeTruth(list(changes), "git_apply", 1, [], False, [])


def test_what_the_build_wrote_is_judged_again_like_the_patch():
    pristine = frozenset({"pkg/__init__.py", "pkg/_native.c", "tests/test_a.py"})
    patch = _truth(TreeChange("pkg/_native.c", "modified", "file", sha256="a"))
    built = _truth(TreeChange("pkg/_native.c", "modified", "file", sha256="a"),
                   TreeChange("pkg/_native.so", "modified", "file", sha256="b"),
                   TreeChange("tests/conftest.py", "created", "file", sha256="c"),
                   TreeChange("tests/test_a.py", "modified", "file", sha256="d"))
    before = make_plan(patch, ["tests/test_a.py"], ["tests/test_a.py"], pristine, frozenset())
    after = make_plan(built, ["tests/test_a.py"], ["tests/test_a.py"], pristine, frozenset())
    # the created conftest.py is restored away (the pristine tree has none); the test file is the test
    # patch's, installed over whatever the build left
    assert after.restore == ["tests/conftest.py"] and "pkg/_native.so" in after.model_files
    found = rebuild.build_findings(patch, built, before, after)
    assert found.details["build_changes"] == ["pkg/_native.so", "tests/conftest.py", "tests/test_a.py"]
    assert found.flags == ["build_touched_tests", "build_touched_test_infra"]
    assert found.details["build_touched_tests"] == ["tests/conftest.py", "tests/test_a.py"]
