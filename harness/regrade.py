"""Re-grading a run from its saved outputs, without containers (``harness report RUN``).

For every instance directory that reached the test run, the saved ``test_output.txt``,
``results.xml``, ``instance.json`` and the report's recorded parser, exit code and canary
are graded again with the current rules; instances that never reached the tests (patch
did not apply, timeout, build failure) keep their verdict. ``report.json`` files and
``summary.json`` are rewritten atomically.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.errors import InputError
from harness.evaluation import Canary, apply_judgement, judge_run, settle_origin, test_files_of
from harness.instances import parse_instance
from harness.patches import patch_files
from harness.report import InstanceResult, summarise, write_json_atomic


def regrade_run(run_dir: Path) -> dict:
    """Re-grade every report under ``run_dir``; returns the new summary.

    Raises InputError when ``run_dir`` is not a run directory.
    """
    run_dir = Path(run_dir).resolve()
    summary_path = run_dir / "summary.json"
    if not summary_path.exists():
        raise InputError("not a run directory (no summary.json)", source=str(run_dir))
    old = json.loads(summary_path.read_text())
    results: list[InstanceResult] = []
    changed = []
    for report_path in sorted(run_dir.glob("**/report.json")):
        directory = report_path.parent
        result = InstanceResult.from_report(json.loads(report_path.read_text()))
        before = (result.status, result.error_reason)
        if _reached_tests(result) and (directory / "instance.json").exists():
            instance = parse_instance(json.loads((directory / "instance.json").read_text()),
                                      source=str(directory / "instance.json"))
            canary_info = result.integrity_details.get("canaries") or {}
            canary = (Canary(canary_info["path"], canary_info["pass_name"], canary_info["fail_name"],
                             canary_info.get("class_name"))
                      if canary_info.get("path") and canary_info.get("fail_name") else None)
            test_files = test_files_of(patch_files(instance.test_patch), result.runner or "pytest")
            output_path, junit_path = directory / "test_output.txt", directory / "results.xml"
            output = output_path.read_text(errors="replace") if output_path.exists() else ""
            junit = junit_path.read_bytes() if junit_path.exists() else None
            for flag in ("ambiguous_results", "canary_tampered", "canary_missing", "canary_pass_failed",
                         "exit_code_mismatch", "collection_error", "dataset_ids_ignored"):
                if flag in result.integrity_flags:
                    result.integrity_flags.remove(flag)
            apply_judgement(result, judge_run(instance, result.parser or "pytest", output, junit,
                                              result.test_exit_code, test_files, canary,
                                              convention=result.id_convention or "pytest"))
            patch = directory / "patch.diff"
            settle_origin(result, patch.exists() and patch.read_text(encoding="utf-8", errors="surrogateescape") == instance.patch)
            write_json_atomic(report_path, result.to_report())
        if before != (result.status, result.error_reason):
            changed.append(result.instance_id)
        results.append(result)
    input_errors = old.get("input_errors", {})
    total = {*(r.instance_id for r in results), *input_errors, *old.get("no_prediction_ids", []),
             *old.get("resolved_ids", []), *old.get("unresolved_ids", []), *old.get("error_ids", [])}
    summary = summarise(old.get("run_id", run_dir.name), old.get("model_name_or_path", ""),
                        sorted(total), results, input_errors,
                        old.get("empty_patch_ids", []))
    for key in ("no_prediction_ids", "instances_file", "predictions"):
        if key in old:
            summary[key] = old[key]
    summary["regraded_changed_ids"] = sorted(set(changed))
    write_json_atomic(summary_path, summary)
    return summary


def _reached_tests(result: InstanceResult) -> bool:
    tests = [c for c in result.commands if c.phase == "tests"]
    return bool(tests) and not tests[-1].timed_out and not tests[-1].truncated
