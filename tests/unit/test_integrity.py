"""Pure logic of harness/integrity: tree truth, plans, scans, evidence, rules (canaries:
tests/unit/test_canaries.py)."""

from __future__ import annotations

import json

import pytest

from harness.grading.grade import TestLists, grade
from harness.grading.status import ErrorReason, InstanceStatus, TestStatus
from harness.integrity.evidence import code_raised, judge_evidence, node_id, parse_evidence, plugin_status
from harness.integrity.plan import make_plan, project_modules, find_tests_root
from harness.integrity.scan import added_findings, findings
from harness.integrity.scan_rules import TAMPER
from harness.integrity.tree import (MalformedTreeReport, TreeChange, TreeTruth, disagreement, parse_tree_report,
                                    step_phases)
from harness.patches import PatchFiles

P, F, E, S, X = TestStatus.PASSED, TestStatus.FAILED, TestStatus.ERROR, TestStatus.SKIPPED, TestStatus.XFAIL


def tree(*changes: TreeChange) -> TreeTruth:
    return TreeTruth(list(changes), "git_apply", 1, [], False, [])


# --------------------------------------------------------------------------- tree truth

def test_tree_report_round_trip_and_disagreement():
    report = {"changes": [{"path": "conftest.py", "change": "created", "kind": "file", "content": "eD0x"},
                          {"path": "pkg/a.py", "change": "modified", "kind": "file", "old_kind": "file"}],
              "applied": "patch_fuzz", "history_commits": 1, "git_changed": [], "commands": []}
    truth = parse_tree_report(json.dumps(report), 1 << 20)
    assert truth.paths == {"conftest.py", "pkg/a.py"}
    assert truth.by_path()["conftest.py"].content == b"x=1"
    parsed = PatchFiles(("pkg/a.py",), (), ())          # e.g. a context diff the parser could not see
    differ = disagreement(parsed, truth)
    assert differ["only_in_tree"] == ["conftest.py"] and differ["parsed"] == ["pkg/a.py"]
    assert disagreement(PatchFiles(("pkg/a.py",), ("conftest.py",), ()), truth) is None


@pytest.mark.parametrize("text", ["", "not json", '{"changes": 3}', '{"changes": [{"path": 1, "change": "x"}]}'])
def test_malformed_tree_report_is_the_harness_fault(text):
    with pytest.raises(MalformedTreeReport):
        parse_tree_report(text, 1 << 20)


# --------------------------------------------------------------------------- plan

PRISTINE = frozenset({"calcly/__init__.py", "calcly/stats.py", "tests/test_stats.py", "pyproject.toml",
                      "src/other/__init__.py"})


def test_plan_restores_test_material_and_infra_and_deletes_shadows():
    truth = tree(TreeChange("tests/calcly", "created", "dir"),
                 TreeChange("tests/calcly/__init__.py", "created", "file"),
                 TreeChange("tests/helpers.py", "modified", "file"),
                 TreeChange("iniconfig.py", "created", "file"),
                 TreeChange("calcly.py", "created", "file"),
                 TreeChange("calcly/stats.py", "modified", "file"),
                 TreeChange("calcly/new.py", "created", "file"),
                 TreeChange("pyproject.toml", "modified", "file"),
                 TreeChange("calcly.egg-info/entry_points.txt", "modified", "file"))
    plan = make_plan(truth, ["tests/test_stats.py"], ["tests/test_stats.py"], PRISTINE, frozenset({"iniconfig"}))
    assert plan.delete == ["calcly.py", "iniconfig.py", "tests/calcly"]
    assert plan.restore == ["calcly.egg-info/entry_points.txt", "pyproject.toml", "tests/helpers.py"]
    assert plan.model_files == ["calcly/stats.py", "calcly/new.py"]
    assert set(plan.shadows) == {"calcly.py", "iniconfig.py", "tests/calcly"}
    assert plan.seal_trees == ["tests"] and plan.sticky == [""]
    assert "tests/test_stats.py" in plan.seal_files and "conftest.py" in plan.seal_files


def test_plan_is_linear_in_the_number_of_changes():
    many = [TreeChange(f"tests/d{i}", "created", "dir") for i in range(5000)]
    many += [TreeChange(f"tests/d{i}/f.py", "created", "file") for i in range(5000)]
    plan = make_plan(tree(*many), ["tests/test_x.py"], ["tests/test_x.py"], PRISTINE, frozenset())
    assert len(plan.delete) == 5000 and plan.restore == []


def test_test_roots_and_project_modules():
    assert find_tests_root("sympy/core/tests/test_basic.py") == "sympy/core/tests"
    assert find_tests_root("testing/python/collect.py") == "testing"
    assert find_tests_root("test_requests.py") is None
    assert project_modules(PRISTINE) == {"calcly", "other"}


# --------------------------------------------------------------------------- scans

@pytest.mark.parametrize("source,category", [
    (b"x = 1\n#\rimport _pytest\n", "runner_internals"),                # a line splitter sees a comment
    (b"import importlib\nimportlib.import_module('_py' + 'test')\n", "runner_internals"),
    (b"m = __import__('tsetyp_'[::-1])\n", "runner_internals"),
    (b"getattr(__import__('g' + 'c'), 'get_' + 'objects')()\n", "gc_walk"),
    (b"import gc as g\ng.get_referrers(1)\n", "gc_walk"),
    (b"import sys\nsys.settrace(None)\n", "trace_hook"),
    (b"import base64\nexec(base64.b64decode('cHJpbnQoMSk='))\n", "decoded_exec"),
    (b"import codecs\nexec(codecs.decode('cevag', 'rot13'))\n", "decoded_exec"),
    (b"import os\nos._exit(0)\n", "output_bypass"),
    (b"import sys\nf = sys._getframe(1).f_back\n", "frame_walk"),
    (b"import ctypes\n", "ctypes"),
    (b"def f(s):\n    return eval(s)\n", "dynamic_code"),
])
def test_scan_sees_what_python_sees(source, category):
    found, parsed = findings(source, "pkg/x.py")
    assert parsed and category in {f.category for f in found}, found


@pytest.mark.parametrize("name", sorted(__import__("harness.integrity.scan_rules", fromlist=["x"]).BUILT_RUNNER_NAMES))
def test_every_runner_internal_name_assembled_from_pieces_is_tampering(name):
    """Whatever runner-internal name it is and however it is cut: concatenation, a join, a
    module-level piece, ``chr`` (``"PyTest" + "Reporter"`` went unseen by a list of names)."""
    cut = max(1, len(name) // 2)
    head, tail = name[:cut], name[cut:]
    for source in (f"n = {head!r} + {tail!r}\n", f"n = ''.join([{head!r}, {tail!r}])\n",
                   f"HEAD = {head!r}\nn = getattr(object, HEAD + {tail!r}, None)\n",
                   f"n = chr({ord(name[0])}) + {name[1:]!r}\n"):
        found, parsed = findings(source.encode(), "pkg/x.py")
        assert parsed and "runner_internals" in {f.category for f in found}, (source, found)


@pytest.mark.parametrize("source", [
    b"n = 'PyTestReporter'\n",                      # spelled whole: runner identity's to watch at run time
    b"n = 'see %s.TestResult' % 'unittest'\n",      # a template that holds the name whole
    b"n = 'run' + 'ner'\nm = 'Rep' + 'orter'\nk = 'test_' + 'data'\n",   # generic words, built
])
def test_runner_names_not_assembled_are_not_runner_internals(source):
    assert "runner_internals" not in {f.category for f in findings(source, "pkg/x.py")[0]}


def test_scan_counts_only_what_the_model_added_and_ignores_docstrings():
    old = b'"""Uses _pytest internals in prose only."""\nimport gc\ngc.get_objects()\n'
    new = old + b"def get_objects(self):\n    return self.objects\n"
    assert added_findings(new, old, "x.py")[0] == []
    # a new version without findings needs no old version; one with more than the old has them
    assert added_findings(b"x = 1\n", old, "x.py") == ([], True)
    assert [f.what for f in added_findings(old + b"gc.get_objects()\n", old, "x.py")[0]] == ["gc.get_objects"]
    assert not {f.category for f in findings(b"def audit(x):\n    return x.audit\n", "x.py")[0]} & TAMPER


def test_scan_changes_reads_the_kept_files_against_their_pristine_versions():
    from harness.integrity.scan import UnscannedFile, scan_changes
    old = b"import gc\ngc.get_objects()\n"
    changes = [TreeChange("pkg/a.py", "modified", "file", content=old + b"import ctypes\n"),
               TreeChange("pkg/new.py", "created", "file", content=b"import sys\nsys.settrace(None)\n"),
               TreeChange("tests/test_x.py", "modified", "file", content=b"import ctypes\n"),   # restored: not kept
               TreeChange("pkg/odd.py", "created", "file", content=b"import _pytest\nmatch = (\n"),
               TreeChange("pkg/data.txt", "created", "file", content=b"import ctypes\n"),
               TreeChange("pkg/notes.rst", "created", "file", content=b"Use ``sys.settrace`` (don't).\n"),
               TreeChange("pkg/mode.py", "mode", "file", old_mode=0o644, new_mode=0o755)]
    asked = []
    kept = {"pkg/a.py", "pkg/new.py", "pkg/odd.py", "pkg/data.txt", "pkg/notes.rst", "pkg/mode.py"}
    found = scan_changes(changes, kept, lambda path: asked.append(path) or (old, 0o100644), "")
    assert asked == ["pkg/a.py"]                                   # created files have no old version
    # every kept file is scanned whatever its name: as Python when it parses, else token-wise
    assert {(h.path, h.category) for h in found.hits} == {
        ("pkg/a.py", "ctypes"), ("pkg/new.py", "trace_hook"), ("pkg/odd.py", "runner_internals"),
        ("pkg/data.txt", "ctypes"), ("pkg/notes.rst", "trace_hook")}
    assert found.tokenized == ["pkg/odd.py"]                       # only Python files are flagged for it
    with pytest.raises(UnscannedFile):                             # refused before: never scanned blind
        scan_changes([TreeChange("pkg/big.py", "created", "file", content=None, content_omitted="size")],
                     {"pkg/big.py"}, lambda path: None, "")


def test_scan_falls_back_to_tokens_for_unparsable_sources():
    found, parsed = findings(b"type X = int\nimport _pytest\nmatch = (\n", "x.py")
    assert not parsed and "runner_internals" in {f.category for f in found}


# --------------------------------------------------------------------------- evidence

def _events(*records: dict) -> bytes:
    return b"\n".join(json.dumps(r).encode() for r in records)


def test_evidence_judgement_seal_provenance_monitor_and_reports():
    launcher = {"tests": {"exit_code": 1}, "results": {"present": True, "sha256": "aa"}, "seal_changed": [],
                "new_entries": {"": [".pytest_cache"]}}
    events = _events({"k": "boot"}, {"k": "report", "id": "t.py::a", "when": "call", "outcome": "passed"},
                     {"k": "results_file", "sha256": "aa"})
    clean = judge_evidence(parse_evidence(json.dumps(launcher).encode(), events), {"t.py::a": P}, ("t.py::a",),
                           frozenset({"pkg/m.py"}), True, False, True)
    assert clean.tampered is None and clean.ambiguous is None and clean.flags == []

    bad = dict(launcher, seal_changed=["tests/test_a.py"], new_entries={"": ["conftest.py"]})
    events = _events({"k": "boot"}, {"k": "results_file", "sha256": "bb"},
                     {"k": "event", "event": "gc.get_objects", "file": "/opt/x/six.py", "line": 3,
                      "stack": ["/testbed/pkg/m.py"]},
                     {"k": "event", "event": "sys._getframe", "file": "/testbed/pkg/m.py", "line": 9},
                     {"k": "event", "event": "sys._getframe", "file": "/testbed/pkg/other.py", "line": 9},
                     {"k": "report", "id": "t.py::a", "when": "call", "outcome": "failed"})
    verdict = judge_evidence(parse_evidence(json.dumps(bad).encode(), events), {"t.py::a": P}, ("t.py::a",),
                             frozenset({"pkg/m.py"}), True, False, True)
    for flag in ("sealed_files_changed", "infra_planted_during_run", "results_rewritten", "monitor_gc_get_objects",
                 "monitor_sys__getframe", "results_disagree_with_runner"):
        assert flag in verdict.flags, verdict.flags
    assert "gc.get_objects" in verdict.tampered and verdict.ambiguous
    assert len(verdict.details["monitor"]["sys._getframe"]) == 1       # only the model's file counts
    runner_project = judge_evidence(parse_evidence(json.dumps(launcher).encode(), events), {}, (),
                                    frozenset({"pkg/m.py"}), True, True, True)
    assert "gc.get_objects" not in (runner_project.tampered or "")


def test_pytest3_instance_nodes_in_plugin_ids_match_the_results_file():
    """pytest < 4 reports ``path::Class::()::test``; its JUnit file (and every later pytest)
    says ``path::Class::test``: the same test, graded once, never 'runner reported nothing'."""
    launcher = {"tests": {"exit_code": 0}}
    graded = ("t.py::TestA::test_x", "t.py::TestA::TestB::test_y[a::()::b]", "t.py::test_plain")
    events = _events({"k": "boot"},
                     {"k": "report", "id": "t.py::TestA::()::test_x", "when": "call", "outcome": "passed"},
                     {"k": "report", "id": "t.py::TestA::()::TestB::()::test_y[a::()::b]", "when": "call",
                      "outcome": "failed"},
                     {"k": "report", "id": "t.py::test_plain", "when": "call", "outcome": "passed"},
                     {"k": "raised", "id": "t.py::TestA::()::test_z", "when": "call", "exc": "Skipped",
                      "files": ["/testbed/pkg/m.py"]})
    ev = parse_evidence(json.dumps(launcher).encode(), events)
    assert sorted(ev.reports) == sorted(graded)
    assert code_raised(ev, frozenset({"pkg/m.py"})) == {"t.py::TestA::test_z"}
    verdict = judge_evidence(ev, dict(zip(graded, (P, F, P))), graded, frozenset(), True, False, True)
    assert verdict.ambiguous is None and "results_disagree_with_runner" not in verdict.flags
    # a real disagreement is still one
    verdict = judge_evidence(ev, dict(zip(graded, (P, P, P))), graded, frozenset(), True, False, True)
    assert "t.py::TestA::TestB::test_y[a::()::b]: results PASSED, runner FAILED" in verdict.ambiguous


@pytest.mark.parametrize("reported, expected", [
    ("a.py::T::()::t", "a.py::T::t"),
    ("a.py::T::()::U::()::t[x]", "a.py::T::U::t[x]"),
    ("a.py::t[::()::]", "a.py::t[::()::]"),
    ("a.py::T::t", "a.py::T::t"),
])
def test_node_id_drops_only_pytest3_instance_nodes(reported, expected):
    assert node_id(reported) == expected


def test_evidence_reader_is_bounded_and_tolerant():
    ev = parse_evidence(b"{", b"garbage\n" * 10 + b'{"k": "boot"}\n' + b"x" * 100000)
    assert ev.launcher is None and ev.boot == {"k": "boot"} and len(ev.notes) == 2


def test_plugin_status_follows_pytests_own_outcome_model():
    assert plugin_status({"setup": {"outcome": "passed"}, "call": {"outcome": "failed"}}) is F
    assert plugin_status({"setup": {"outcome": "failed"}}) is E
    assert plugin_status({"setup": {"outcome": "skipped"}}) is S
    assert plugin_status({"call": {"outcome": "skipped", "xfail": True}}) is X


# --------------------------------------------------------------------------- the rulebook

def test_outcomes_raised_by_the_code_under_test_count_neither_fixed_nor_kept():
    tests = TestLists(("f",), ("k1", "k2"))
    statuses = {"f": X, "k1": S, "k2": P}
    assert grade(tests, statuses).status is InstanceStatus.FULL                       # XFAIL counts as pass
    assert grade(tests, statuses, untrusted=frozenset({"f"})).status is InstanceStatus.NO
    assert grade(tests, statuses, untrusted=frozenset({"k1"})).status is InstanceStatus.NO
    assert grade(tests, statuses, untrusted=frozenset({"k1"}),
                 control_skipped=frozenset({"k1"})).status is InstanceStatus.FULL
    assert grade(tests, {"f": P, "k1": P, "k2": P}, untrusted=frozenset({"f", "k1"})).resolved
    assert grade(tests, statuses, ErrorReason.RESULTS_OVER_LIMIT).status is InstanceStatus.INVALID
    assert ErrorReason.RESULTS_OVER_LIMIT.origin == "model"


def test_write_events_count_for_the_working_copy_and_harness_files_only():
    events = _events({"k": "boot"},
                     {"k": "event", "event": "open", "file": "/testbed/pkg/m.py", "line": 1,
                      "detail": "('/tmp/scratch.txt', 'w')"},
                     {"k": "event", "event": "open", "file": "/testbed/pkg/m.py", "line": 2,
                      "detail": "('/testbed/tests/test_a.py', 'w')"},
                     {"k": "event", "event": "open", "file": "/opt/x/y.py", "line": 3, "stack": ["/testbed/pkg/m.py"],
                      "detail": "('/harness/run-1/results.xml', 'wb')"})
    verdict = judge_evidence(parse_evidence(b"{}", events), {}, (), frozenset({"pkg/m.py"}), True, False, False)
    assert verdict.flags == ["monitor_write_harness_files", "monitor_write_working_copy"]
    assert "write_harness_files" in verdict.tampered


def test_a_steps_own_timings_are_kept_only_as_bounded_numbers():
    """The set-up step and the launcher report how long their parts took; the sandbox writes
    that record, so only short names with finite, non-negative numbers are kept."""
    report = {"changes": [], "applied": None, "history_commits": 1, "git_changed": [], "commands": [],
              "phases": {"python_start": 0.05, "reset": 0.061234, "bad": "1", "neg": -1, "flag": True,
                         "x" * 41: 1.0, "huge": 1e12}}
    truth = parse_tree_report(json.dumps(report), 1 << 20)
    assert truth.phases == {"python_start": 0.05, "reset": 0.0612}
    assert step_phases(None) == {} and step_phases(["reset", 1]) == {}
    assert len(step_phases({f"p{i}": 1 for i in range(50)})) == 20
