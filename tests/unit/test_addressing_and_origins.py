"""No silent drops (ids a runner cannot address are refused before anything runs), and
origins that follow the evidence (harness/inputs/instance_checks.py, harness/grading/origins.py,
the judgement in harness/evaluation/evaluator.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.grading.verdict import settle_origin
from harness.integrity.judge import RunContext, judge_run
from harness.grading.origins import evidence_origin, same_failure_as_control
from harness.grading.status import ErrorReason, InstanceStatus, TestStatus
from harness.inputs.instances import parse_instance
from harness.results.report import InstanceResult, summarise
from harness.inputs.instance_checks import instance_id_problem, refuse_unaddressable
from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry

#: SWE-bench's published records (../shared/swebench beside the checkout; $HARNESS_SWEBENCH_DATA)
SHARED = Path(os.environ.get("HARNESS_SWEBENCH_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "swebench"))


def _record(**overrides) -> dict:
    record = {"instance_id": "x__y-1", "repo": "x/y", "base_commit": "a" * 40, "patch": "", "version": "1",
              "test_patch": "diff --git a/t/test_a.py b/t/test_a.py\n--- a/t/test_a.py\n+++ b/t/test_a.py\n"
                            "@@ -1 +1,2 @@\n x\n+y\n",
              "FAIL_TO_PASS": ["t/test_a.py::test_fix"], "PASS_TO_PASS": ["t/test_a.py::test_keep"]}
    record.update(overrides)
    return record


def test_sympy_ids_under_a_pytest_spec_are_refused_naming_instance_field_and_ids():
    inst = parse_instance(_record(FAIL_TO_PASS=["test_ccode_Relational", "test_ccode_sinc"],
                                  PASS_TO_PASS=["test_ccode_sqrt"]))
    problem = instance_id_problem(inst, "pytest", "pytest")
    assert problem is not None
    assert problem.record == "x__y-1" and problem.field == "FAIL_TO_PASS"
    assert "'test_ccode_Relational'" in str(problem) and "'test_ccode_sinc'" in str(problem)
    assert "pytest" in str(problem)
    # the same ids are exactly what the sympy convention addresses
    assert instance_id_problem(inst, "sympy", "sympy") is None


def test_log_fragments_are_not_refused_but_left_out_and_reported():
    inst = parse_instance(_record(PASS_TO_PASS=["t/test_a.py::test_keep", "[100%]", "["]))
    assert instance_id_problem(inst, "pytest", "pytest") is None
    output = ("=========================== short test summary info ============================\n"
              "PASSED t/test_a.py::test_keep\nPASSED t/test_a.py::test_fix\n")
    judged = judge_run(inst, "pytest-text", output, None, 0, RunContext(test_files=("t/test_a.py",)))
    assert judged.verdict.status is InstanceStatus.FULL
    assert judged.details["ignored_test_ids"] == ["[100%]", "["] and "dataset_ids_ignored" in judged.flags


def test_a_record_naming_its_log_parser_must_match_the_spec_convention():
    inst = parse_instance(_record(log_parser="parse_log_pylint"))
    problem = instance_id_problem(inst, "pytest", "pytest")
    assert problem is not None and problem.field == "log_parser" and "pytest-options" in str(problem)
    assert instance_id_problem(inst, "pytest", "pytest-options") is None
    # seaborn's parser spells ids as the pytest convention does: not a mismatch
    assert instance_id_problem(parse_instance(_record(log_parser="parse_log_seaborn")), "pytest", "pytest") is None


@pytest.mark.skipif(not (SHARED / "lite-test.jsonl").exists(), reason="shared SWE-bench records absent")
def test_every_lite_and_verified_record_is_addressable_by_its_spec():
    """No Lite or Verified record with a spec is refused (none silently unaddressable), and
    a spec that grades Django labels with pytest refuses every Django record."""
    from harness.inputs.instances import load_instances
    specs = SpecRegistry.load(DEFAULT_SPECS_DIR)
    for name in ("lite-test.jsonl", "verified-test.jsonl"):
        loaded = load_instances(SHARED / name)
        kept, refused = refuse_unaddressable(loaded.instances, specs)
        assert refused == [], [str(e) for e in refused[:3]]
        assert len(kept) == len(loaded.instances)
    django = [i for i in load_instances(SHARED / "lite-test.jsonl").instances if i.repo == "django/django"]
    assert len(django) == 114
    assert all(instance_id_problem(i, "pytest", "pytest") is not None for i in django)


# --------------------------------------------------------------------------- origins

def test_reference_patch_failures_are_never_the_models():
    assert evidence_origin(ErrorReason.SUITE_DID_NOT_RUN) == "model"
    assert evidence_origin(ErrorReason.SUITE_DID_NOT_RUN, reference_patch=True) == "harness"
    assert evidence_origin(ErrorReason.COLLECTION_ERROR, reference_patch=True) == "harness"
    assert evidence_origin(ErrorReason.TIMEOUT, reference_patch=True) == "harness"
    assert evidence_origin(ErrorReason.PATCH_APPLY_FAILED, reference_patch=True) == "instance"
    assert evidence_origin(ErrorReason.TEST_PATCH_APPLY_FAILED, reference_patch=True) == "instance"
    assert evidence_origin(ErrorReason.CONTAINER_DIED, reference_patch=True) == "harness"
    assert evidence_origin(None, reference_patch=True) is None


def test_failing_like_the_control_is_not_the_models():
    assert same_failure_as_control(ErrorReason.SUITE_DID_NOT_RUN, ErrorReason.SUITE_DID_NOT_RUN)
    assert not same_failure_as_control(ErrorReason.SUITE_DID_NOT_RUN, None)
    assert not same_failure_as_control(ErrorReason.TAMPERED, ErrorReason.TAMPERED)
    assert same_failure_as_control(ErrorReason.COLLECTION_ERROR, ErrorReason.COLLECTION_ERROR,
                                   ["t/test_a.py"], ["t/test_a.py", "t/test_b.py"])
    # the model broke a module the control collected: that is the model's doing
    assert not same_failure_as_control(ErrorReason.COLLECTION_ERROR, ErrorReason.COLLECTION_ERROR,
                                       ["t/test_c.py"], ["t/test_a.py"])


def test_settled_origin_is_reported_and_counted():
    result = InstanceResult("x__y-1", "x/y", "gold", InstanceStatus.INVALID,
                            error_reason=ErrorReason.SUITE_DID_NOT_RUN)
    settle_origin(result, reference_patch=True)
    report = result.to_report()
    assert report["error_origin"] == "harness"
    back = InstanceResult.from_report(report)
    assert back.error_origin == "harness"
    summary = summarise("r", "gold", ["x__y-1"], [back], {})
    assert summary["error_ids"] == ["x__y-1"] and summary["errors_by_origin"]["harness"] == ["x__y-1"]
    settle_origin(result, reference_patch=False)
    assert result.to_report()["error_origin"] == "model" and result.origin is None


# --------------------------------------------------------------------------- collection errors

def test_graded_tests_never_collected_are_a_collection_error_not_failed():
    inst = parse_instance(_record(FAIL_TO_PASS=["test_fix"], PASS_TO_PASS=["test_keep", "test_other"]))
    xml = (b'<testsuite><testcase classname="" name="" file="t/test_a.py">'
           b'<error type="collection" message="ImportError: cannot import name \'fix\'"/></testcase>'
           b'<testcase classname="t.test_b" name="test_other" file="t/test_b.py"/></testsuite>')
    judged = judge_run(inst, "sympy", "", xml, 1, RunContext(test_files=("t/test_a.py",)), convention="sympy")
    assert judged.reason is ErrorReason.COLLECTION_ERROR
    assert judged.verdict.status is InstanceStatus.INVALID
    assert judged.details["collection_errors"] == ["t/test_a.py"]
    assert judged.details["not_collected"] == ["test_fix", "test_keep"]
    assert "collection_error" in judged.flags and "t/test_a.py" in judged.detail


def test_collection_error_elsewhere_is_visible_but_does_not_decide():
    inst = parse_instance(_record(FAIL_TO_PASS=["test_fix"], PASS_TO_PASS=[]))
    xml = (b'<testsuite><testcase classname="" name="" file="t/test_z.py"><error type="collection" message="x"/>'
           b'</testcase><testcase classname="t.test_a" name="test_fix" file="t/test_a.py"/></testsuite>')
    judged = judge_run(inst, "sympy", "", xml, 1, RunContext(test_files=("t/test_a.py",)), convention="sympy")
    assert judged.reason is None and judged.verdict.status is InstanceStatus.FULL
    assert "collection_error" in judged.flags


def test_nothing_parsed_is_suite_did_not_run():
    inst = parse_instance(_record())
    judged = judge_run(inst, "sympy", "Traceback ...", None, 1, RunContext(test_files=("t/test_a.py",)), convention="sympy")
    assert judged.reason is ErrorReason.SUITE_DID_NOT_RUN
    assert judged.verdict.status is InstanceStatus.INVALID
    assert TestStatus  # statuses stay typed


def test_a_model_run_failing_like_its_control_is_charged_to_the_environment(tmp_path):
    from harness.atomic import write_json_atomic
    from harness.results.control import record_control
    from harness.grading.verdict import final_verdict
    inst = parse_instance(_record())
    control = InstanceResult("x__y-1", "x/y", "gold", InstanceStatus.INVALID, error_reason=ErrorReason.COLLECTION_ERROR,
                             integrity_details={"collection_errors": ["t/test_a.py"]})
    settle_origin(control, reference_patch=True)
    write_json_atomic(tmp_path / "x__y-1" / "report.json", control.to_report())

    def model_run(files):
        return InstanceResult("x__y-1", "x/y", "m", InstanceStatus.INVALID, error_reason=ErrorReason.COLLECTION_ERROR,
                              integrity_details={"collection_errors": files})
    same = model_run(["t/test_a.py"])
    final_verdict(same, reference=False, control=record_control(same, inst, tmp_path))
    assert same.error_origin == "harness" and "failed_like_control" in same.integrity_flags
    worse = model_run(["t/test_a.py", "t/test_b.py"])     # the model broke another module too
    final_verdict(worse, reference=False, control=record_control(worse, inst, tmp_path))
    assert worse.error_origin == "model" and "failed_like_control" not in worse.integrity_flags


def test_the_control_facts_a_run_records_decide_alike_when_applied_again(tmp_path):
    """harness report re-applies the recorded facts (harness/results/control.py): the same flags,
    details and origin come out, whatever the re-grade cleared before, and a report from
    before the facts were recorded keeps failed_like_control from the control's reason."""
    from harness.atomic import write_json_atomic
    from harness.results.control import record_control, recorded_facts
    from harness.grading.verdict import apply_control, final_verdict
    inst = parse_instance(_record())
    control = InstanceResult("x__y-1", "x/y", "gold", InstanceStatus.NO, collected=["t/test_a.py::test_keep"],
                             integrity_details={"skipped_or_xfailed": {"t/test_a.py::test_keep": "SKIPPED"}})
    write_json_atomic(tmp_path / "x__y-1" / "report.json", control.to_report())
    run = InstanceResult("x__y-1", "x/y", "m", InstanceStatus.NO, collected=["t/test_a.py::test_fix"])
    final_verdict(run, reference=False, control=record_control(run, inst, tmp_path))
    facts = run.integrity_details["control"]
    assert facts["skipped"] == ["t/test_a.py::test_keep"] and facts["collected"] == ["t/test_a.py::test_keep"]
    first = (list(run.integrity_flags), dict(run.integrity_details), run.error_origin)
    assert first[0] == ["collected_fewer_than_control"]
    run.integrity_flags = []                                   # what the re-grade keeps of them
    apply_control(run, recorded_facts(run))
    apply_control(run, recorded_facts(run))              # and again: no duplicates
    assert (run.integrity_flags, run.integrity_details, run.error_origin) == first

    legacy = InstanceResult("x__y-1", "x/y", "m", InstanceStatus.INVALID, error_reason=ErrorReason.TIMEOUT,
                            integrity_flags=["failed_like_control"],
                            integrity_details={"control_error_reason": "timeout"})
    facts = recorded_facts(legacy)
    legacy.integrity_flags = []
    apply_control(legacy, facts)
    assert legacy.integrity_flags == ["failed_like_control"] and legacy.error_origin == "harness"


def test_a_suite_that_never_ran_says_why_when_its_output_does():
    """A patch that breaks the package's import (a circular import: ACR on sympy-21614):
    the reason names the error the runner stopped on, not only its exit code."""
    inst = parse_instance(_record())
    output = ("Traceback (most recent call last):\n  File \"/testbed/y/__init__.py\", line 3, in <module>\n"
              "ImportError: cannot import name 'Derivative' from partially initialized module 'y.core'\n"
              "\n" + "noise after the error\n" * 50)
    judged = judge_run(inst, "pytest-text", output, None, 1, RunContext(test_files=("t/test_a.py",)))
    assert judged.reason is ErrorReason.SUITE_DID_NOT_RUN
    assert "ImportError: cannot import name 'Derivative'" in judged.detail
    quiet = judge_run(inst, "pytest-text", "nothing here\n", None, 1, RunContext(test_files=("t/test_a.py",)))
    assert quiet.reason is ErrorReason.SUITE_DID_NOT_RUN and "ends with" not in quiet.detail


def test_the_final_verdict_settles_the_origin_before_the_control_has_its_say():
    """Live (harness.run.batch) and harness report (harness.evaluation.regrade) both end with final_verdict:
    a model run that timed out like its control is the environment's, although the origin
    rule alone charges a timeout to the model."""
    from harness.grading.verdict import final_verdict

    def timed_out() -> InstanceResult:
        return InstanceResult("x__y-1", "x/y", "m", InstanceStatus.INVALID, error_reason=ErrorReason.TIMEOUT)
    alone = timed_out()
    final_verdict(alone, reference=False, control=None)
    assert alone.error_origin == "model" and alone.integrity_flags == []
    like_control = timed_out()
    final_verdict(like_control, reference=False, control={"error_reason": "timeout"})
    assert like_control.error_origin == "harness" and like_control.integrity_flags == ["failed_like_control"]
    reference = timed_out()
    final_verdict(reference, reference=True, control=None)
    assert reference.error_origin == "harness"
