"""Edges of the grading sequence against the real engine: timeouts, malformed records,
a broken test patch, and a model patch that edits the tests (the order matters)."""

from __future__ import annotations

import json
import time

from harness.demo import DEMO_DIR
from tests.conftest import leftover_containers
from tests.patchgen import base_file, demo_instance, edit, write_predictions

CALCLY = "harness-demo__calcly-1"


def _instances_file(tmp_path, records):
    path = tmp_path / "instances.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_a_test_that_sleeps_past_the_timeout_is_invalid_timeout(harness_run, tmp_path, engine):
    stats = base_file(CALCLY, "calcly/stats.py")
    slow = stats.replace('    """Return the median (middle value) of *values*."""',
                         '    """Return the median (middle value) of *values*."""\n    import time; time.sleep(3600)')
    assert slow != stats
    preds = write_predictions(tmp_path / "p.jsonl", {CALCLY: edit(CALCLY, {"calcly/stats.py": slow})})
    started = time.monotonic()
    run = harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", str(preds),
                      "--instance-ids", CALCLY, "--timeout", "6", run_id="timeout")
    elapsed = time.monotonic() - started
    report = run.report(CALCLY)
    assert (report["status"], report["error_reason"], report["error_origin"]) == ("INVALID", "timeout", "model")
    assert report["resolved"] is False
    assert elapsed < 120
    assert CALCLY in run.summary["unresolved_ids"] and CALCLY in run.summary["invalid_ids"]
    assert leftover_containers(engine, "timeout") == []


def test_a_malformed_record_is_named_and_the_rest_still_runs(harness_run, tmp_path, capsys):
    good = demo_instance(CALCLY)
    bad = dict(demo_instance("harness-demo__textkit-1"))
    bad["FAIL_TO_PASS"] = "[not json"
    run = harness_run("--instances", _instances_file(tmp_path, [good, bad]), "--predictions", "gold",
                      run_id="malformed")
    err = capsys.readouterr().err
    assert "harness-demo__textkit-1" in err and "FAIL_TO_PASS" in err
    summary = run.summary
    assert summary["resolved_ids"] == [CALCLY]
    assert summary["error_ids"] == ["harness-demo__textkit-1"]
    assert "FAIL_TO_PASS" in summary["input_errors"]["harness-demo__textkit-1"]
    assert summary["total_instances"] == 2


def test_a_test_patch_that_does_not_apply_is_a_loud_instance_error(harness_run, tmp_path):
    record = dict(demo_instance(CALCLY))
    record["test_patch"] = record["test_patch"].replace(
        "         assert median([1, 2, 3]) == 2\n", "         assert median([1, 2, 3]) == 99\n", 1)
    assert record["test_patch"] != demo_instance(CALCLY)["test_patch"]
    run = harness_run("--instances", _instances_file(tmp_path, [record]), "--predictions", "gold",
                      run_id="badtestpatch")
    report = run.report(CALCLY)
    assert (report["status"], report["error_reason"], report["error_origin"]) == \
        ("INVALID", "test_patch_apply_failed", "instance")
    assert run.summary["error_ids"] == [CALCLY]


def test_a_model_patch_that_edits_the_tests_does_not_survive(harness_run, tmp_path):
    """The model rewrites the F2P tests so they pass against the buggy code, and adds a
    conftest.py; the harness restores the tests before applying the test patch, so the
    real tests run and fail. Without the restore step the verdict would be FULL."""
    tests = base_file(CALCLY, "tests/test_stats.py")
    gutted = tests + "\n\ndef test_unsorted_input():\n    pass\n"
    conftest = "import pytest\n\n@pytest.fixture(autouse=True)\ndef _x():\n    yield\n"
    patch = edit(CALCLY, {"tests/test_stats.py": gutted, "conftest.py": conftest})
    preds = write_predictions(tmp_path / "p.jsonl", {CALCLY: patch})
    run = harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", str(preds),
                      "--instance-ids", CALCLY, run_id="edits-tests")
    report = run.report(CALCLY)
    assert report["patch_successfully_applied"] is True
    assert report["status"] == "NO" and not report["resolved"]
    assert "patch_touched_tests" in report["integrity"]["flags"]
    assert "patch_touched_test_infra" in report["integrity"]["flags"]
    assert set(report["tests_status"]["FAIL_TO_PASS"]["failure"]) == set(demo_instance(CALCLY)["FAIL_TO_PASS"])


def test_a_run_collecting_fewer_graded_tests_than_the_control_is_flagged(harness_run, tmp_path):
    """The model's patch renames a name the test module imports, so the module no longer
    collects: compared with the reference-patch run, fewer graded tests were collected."""
    control = harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", "gold",
                          "--instance-ids", CALCLY, run_id="control")
    stats = base_file(CALCLY, "calcly/stats.py")
    patched = stats.replace("class StatsError(ValueError):", "class _StatsError(ValueError):")
    assert patched != stats
    preds = write_predictions(tmp_path / "p.jsonl", {CALCLY: edit(CALCLY, {"calcly/stats.py": patched})})
    run = harness_run("--instances", str(DEMO_DIR / "instances.jsonl"), "--predictions", str(preds),
                      "--instance-ids", CALCLY, "--control", str(control.root), run_id="fewer")
    report = run.report(CALCLY)
    assert not report["resolved"]
    assert "collected_fewer_than_control" in report["integrity"]["flags"]
    assert report["integrity"]["not_collected_but_in_control"]
    assert report["integrity"]["control_collected"] == len(demo_instance(CALCLY)["FAIL_TO_PASS"]) + \
        len(demo_instance(CALCLY)["PASS_TO_PASS"])
