"""``harness report`` (harness.evaluation.regrade) judges a run's saved outputs again and must reach the
verdict the live evaluation recorded, test list by test list: here for a patch that reaches
into the test runner, the case the two once decided apart (the live run counted no graded
test as passed, the re-grade kept the lists as judged). No container: the live side is the
Evaluator's own grading step on the same outputs."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from harness.atomic import write_json_atomic, write_text_atomic
from harness.evaluation.evaluator import Evaluator
from harness.evaluation.regrade import regrade_run
from harness.evaluation.setup import EvalConfig
from harness.grading.status import ErrorReason, InstanceStatus
from harness.inputs.instances import parse_instance
from harness.inputs.predictions import Prediction
from harness.inputs.specs import DEFAULT_SPECS_DIR, SpecRegistry
from harness.paths import RunPaths
from harness.results.report import CommandRecord, InstanceResult

TEST_PATCH = ("diff --git a/t/test_a.py b/t/test_a.py\n--- a/t/test_a.py\n+++ b/t/test_a.py\n"
              "@@ -1 +1,2 @@\n x\n+y\n")
OUTPUT = ("============================= test session starts ==============================\n"
          "t/test_a.py ..                                                           [100%]\n"
          "=========================== short test summary info ============================\n"
          "PASSED t/test_a.py::test_fix\nPASSED t/test_a.py::test_keep\n"
          "============================== 2 passed in 0.01s ===============================\n")
JUNIT = (b'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="0" '
         b'skipped="0" tests="2"><testcase classname="t.test_a" name="test_fix" time="0.001"/>'
         b'<testcase classname="t.test_a" name="test_keep" time="0.001"/></testsuite></testsuites>')
LISTS = ("status", "resolved", "error_reason", "error_detail", "f2p_success", "f2p_failure", "p2p_success",
         "p2p_failure", "missing", "f2p_rate", "p2p_rate")


def _live(tmp_path: Path, flags: list[str], details: dict) -> tuple[InstanceResult, dict]:
    """The live grading step on a passing run's output, with the scan's findings as given."""
    record = {"instance_id": "x__y-1", "repo": "x/y", "base_commit": "a" * 40, "version": "1",
              "patch": "diff --git a/y.py b/y.py\n", "test_patch": TEST_PATCH,
              "FAIL_TO_PASS": ["t/test_a.py::test_fix"], "PASS_TO_PASS": ["t/test_a.py::test_keep"]}
    instance = parse_instance(record)
    spec = SpecRegistry.load(DEFAULT_SPECS_DIR).get("harness-demo/calcly", "1.0")
    prediction = Prediction("x__y-1", "model", "diff --git a/z.py b/z.py\n")
    evaluator = Evaluator(instance, prediction, spec, pristine=None, config=EvalConfig(monitor=False, canaries=0))
    evaluator.outputs.test_output, evaluator.outputs.junit_xml = OUTPUT, JUNIT
    evaluator.result.test_exit_code = 0
    evaluator.result.commands.append(CommandRecord(phase="tests", argv=["/bin/bash", "-c", "pytest"], exit_code=0,
                                                   duration=0.1, timed_out=False, output_tail=OUTPUT))
    evaluator.result.integrity_flags.extend(flags)
    evaluator.result.integrity_details.update(details, forbid_runner_internals=True)
    evaluator._grade(None, ["t/test_a.py"], SimpleNamespace(model_files=["z.py"]))
    return evaluator.result, record


def _regraded(tmp_path: Path, live: InstanceResult, record: dict) -> dict:
    run = RunPaths(tmp_path / "run")
    files = run.instance(live.instance_id)
    write_json_atomic(run.summary, {"run_id": "run", "resolved_ids": [], "unresolved_ids": [live.instance_id],
                                    "empty_patch_ids": [], "error_ids": []})
    write_json_atomic(files.instance_record, record)
    write_text_atomic(files.test_output, OUTPUT)
    write_text_atomic(files.results_xml, JUNIT)
    write_text_atomic(files.patch, "diff --git a/z.py b/z.py\n")
    write_json_atomic(files.report, live.to_report())
    regrade_run(run.root)
    return json.loads(files.report.read_text())


def _lists(report: dict) -> dict:
    result = InstanceResult.from_report(report)
    return {key: getattr(result, key) for key in LISTS}


def test_a_patch_reaching_into_the_test_runner_is_regraded_as_the_live_run_graded_it(tmp_path):
    live, record = _live(tmp_path, ["patch_references_test_runner"],
                         {"patch_references_test_runner": ["conftest.py: pytest_runtest_makereport"]})
    assert live.status is InstanceStatus.INVALID and live.error_reason is ErrorReason.TAMPERED
    assert live.f2p_success == [] and live.f2p_failure == ["t/test_a.py::test_fix"]
    assert live.p2p_success == [] and live.p2p_failure == ["t/test_a.py::test_keep"]
    assert _lists(_regraded(tmp_path, live, record)) == _lists(live.to_report())


def test_an_untampered_passing_run_is_regraded_alike_too(tmp_path):
    live, record = _live(tmp_path, [], {})
    assert live.status is InstanceStatus.FULL and live.f2p_success == ["t/test_a.py::test_fix"]
    assert _lists(_regraded(tmp_path, live, record)) == _lists(live.to_report())
