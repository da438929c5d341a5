"""scripts/same_verdicts.py: two runs compared instance by instance and test by test."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scripts import loaded_script


def _run(root: Path, name: str, reports: list[dict]) -> Path:
    run = root / name
    for report in reports:
        (run / report["instance_id"]).mkdir(parents=True)
        (run / report["instance_id"] / "report.json").write_text(json.dumps(report))
    return run


def _report(instance_id: str, status: str = "FULL", f2p_failure: tuple = (), missing: tuple = ()) -> dict:
    return {"instance_id": instance_id, "status": status, "resolved": status == "FULL",
            "error_reason": None, "error_origin": None, "patch_successfully_applied": True,
            "tests_status": {"FAIL_TO_PASS": {"success": [t for t in ("a", "b") if t not in f2p_failure],
                                              "failure": list(f2p_failure)},
                             "PASS_TO_PASS": {"success": ["c"], "failure": []}},
            "missing": list(missing)}


def test_identical_runs_are_the_same_and_exit_zero(tmp_path, capsys):
    before = _run(tmp_path, "before", [_report("x-1"), _report("x-2", "NO", f2p_failure=("a",))])
    after = _run(tmp_path, "after", [_report("x-1"), _report("x-2", "NO", f2p_failure=("a",))])
    with loaded_script("same_verdicts") as script:
        assert script.main([str(before), str(after)]) == 0
    assert "2 instances, 6 graded tests: same" in capsys.readouterr().out


def test_one_test_changing_outcome_is_named_and_exits_one(tmp_path, capsys):
    before = _run(tmp_path, "before", [_report("x-1")])
    after = _run(tmp_path, "after", [_report("x-1", "PARTIAL", f2p_failure=("b",))])
    with loaded_script("same_verdicts") as script:
        assert script.main([str(before), str(after)]) == 1
    out = capsys.readouterr().out
    assert "x-1: status: 'FULL' -> 'PARTIAL'" in out
    assert "x-1: FAIL_TO_PASS b: success -> failure" in out


def test_an_instance_in_one_run_only_and_a_newly_missing_test_are_differences(tmp_path):
    before = _run(tmp_path, "before", [_report("x-1"), _report("x-2")])
    after = _run(tmp_path, "after", [_report("x-1", missing=("d",))])
    with loaded_script("same_verdicts") as script:
        instances, tests, lines = script.compare(before, after)
    assert instances == 1 and tests == 3
    assert lines == [f"x-2: only in {before}", "x-1: missing d: absent -> missing"]
