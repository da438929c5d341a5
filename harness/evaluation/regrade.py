"""Re-grading a run from its saved outputs, without containers (``harness report RUN``).

For every instance directory that reached the test run, the saved ``test_output.txt``,
``results.xml``, ``evidence.json``, ``events.jsonl``, ``instance.json`` and the report's
recorded parser, exit code, canaries (with what the control proved of them, and whether
the run was of the reference patch), the model's files (tree truth) and what the
reference-patch control said (``integrity.control``, harness/results/control.py) are graded again
with the current rules; instances that never reached the tests (patch
did not apply, timeout, build failure) keep their verdict. ``report.json`` files and
``summary.json`` are rewritten atomically.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.atomic import write_json_atomic
from harness.errors import InputError
from harness.evaluation.setup import sandbox_cpu, test_files_of
from harness.grading.status import InstanceStatus
from harness.grading.verdict import final_verdict
from harness.inputs.instances import parse_instance
from harness.integrity.canaries import Canary
from harness.integrity.declared import RecordedDeclarations
from harness.integrity.evidence import parse_evidence
from harness.integrity.judge import RunContext, apply_judgement, judge_run, refuse_runner_reach
from harness.integrity.perturbed import apply_perturbed
from harness.patches import patch_files
from harness.paths import SUMMARY, InstanceFiles, RunPaths
from harness.results.control import recorded_facts
from harness.results.report import InstanceResult, summarise
from harness.runners import get_runner


def _recorded_declarations(declared) -> RecordedDeclarations | None:
    return RecordedDeclarations(declared) if isinstance(declared, dict) else None


def regrade_run(run_dir: Path) -> dict:
    """Re-grade every report under ``run_dir``; returns the new summary.

    Raises InputError when ``run_dir`` is not a run directory.
    """
    run_dir = Path(run_dir).resolve()
    summary_path = RunPaths(run_dir).summary
    if not summary_path.exists():
        raise InputError(f"not a run directory (no {SUMMARY})", source=str(run_dir))
    old = json.loads(summary_path.read_text())
    results: list[InstanceResult] = []
    changed = []
    # the instances' reports only (SWE-bench's layout under logs/ holds reports of its own shape)
    for report_path in RunPaths(run_dir).report_files():
        files = InstanceFiles(report_path.parent)
        result = InstanceResult.from_report(json.loads(report_path.read_text()))
        before = (result.status, result.error_reason)
        if _reached_tests(result) and files.instance_record.exists():
            # a derivation's runs graded records without lists (harness/run/derive.py)
            instance = parse_instance(json.loads(files.instance_record.read_text()),
                                      source=str(files.instance_record), lists_required=False)
            recorded = result.integrity_details.get("canaries") or []
            canaries = tuple(Canary.from_dict(c) for c in recorded if isinstance(c, dict) and c.get("test_id"))
            runner = result.runner or "pytest"
            test_files = test_files_of(patch_files(instance.test_patch), runner)

            def read(path: Path) -> bytes | None:
                return path.read_bytes() if path.exists() else None

            output = (read(files.test_output) or b"").decode("utf-8", "replace")
            evidence = read(files.evidence)
            control = recorded_facts(result)
            keep = {f for f in result.integrity_flags if f.startswith("patch_") or f in _SET_UP_FLAGS}
            result.integrity_flags = [f for f in result.integrity_flags if f in keep]
            parser = result.parser or "pytest"
            forbid = bool(result.integrity_details.get("forbid_runner_internals", True))
            # what the run expected of the evidence (older reports: what the runner states)
            expected = result.integrity_details.get("evidence_expected")
            if not isinstance(expected, bool):
                expected = runner == "pytest" and parser.startswith("pytest") or get_runner(runner).reporter
            proof = result.integrity_details.get("canary_proof")
            # what the run read of the pristine tests and what the reference showed (issue 36)
            declared = result.integrity_details.get("declared")
            shown = result.integrity_details.get("outcome_reference")
            reference_undeclared = ({str(k): str(v) for k, v in shown.items()} if isinstance(shown, dict)
                                    else (control or {}).get("undeclared"))
            patch = files.patch
            reference = patch.exists() and patch.read_text(encoding="utf-8", errors="surrogateescape") == instance.patch
            ctx = RunContext(test_files=tuple(test_files), canaries=canaries, reference=reference,
                             canary_proof={k: v for k, v in proof.items() if isinstance(v, str)}
                             if isinstance(proof, dict) else {},
                             model_files=frozenset(result.integrity_details.get("model_files") or ()),
                             runner_project=not forbid, plugin_expected=expected and evidence is not None,
                             control_skipped=frozenset((control or {}).get("skipped") or ()),
                             evidence=parse_evidence(evidence, read(files.events)) if evidence else None,
                             cpu=sandbox_cpu(result), declarations=_recorded_declarations(declared),
                             reference_undeclared=reference_undeclared)
            apply_judgement(result, judge_run(instance, parser, output, read(files.results_xml),
                                              result.test_exit_code, ctx,
                                              convention=result.id_convention or "pytest"))
            refuse_runner_reach(result, instance.tests, forbid)
            perturbed = result.integrity_details.get("perturbed_run")
            if isinstance(perturbed, dict) and "perturbations" in perturbed and result.status is InstanceStatus.FULL:
                apply_perturbed(result, perturbed, {k: v for k, v in (perturbed.get("proof") or {}).items()
                                                    if isinstance(v, str)}, reference)
            final_verdict(result, reference=reference, control=control)
            write_json_atomic(report_path, result.to_report())
        if before != (result.status, result.error_reason):
            changed.append(result.instance_id)
        results.append(result)
    input_errors = old.get("input_errors", {})
    total = {*(r.instance_id for r in results), *old.get("no_prediction_ids", []),
             *old.get("resolved_ids", []), *old.get("unresolved_ids", []), *old.get("error_ids", [])}
    summary = summarise(old.get("run_id", run_dir.name), old.get("model_name_or_path", ""),
                        sorted(total), results, input_errors,
                        old.get("empty_patch_ids", []))
    for key in ("instances_file", "predictions"):
        if key in old:
            summary[key] = old[key]
    if "no_prediction_ids" in old:
        summary["no_prediction_ids"] = sorted(set(old["no_prediction_ids"]) - set(summary["submitted_ids"]))
    summary["regraded_changed_ids"] = sorted(set(changed))
    write_json_atomic(summary_path, summary)
    return summary


#: flags decided before the tests ran (kept as they are when re-grading)
_SET_UP_FLAGS = frozenset({"history_not_stripped", "canary_unavailable", "canaries_off", "scan_incomplete",
                           "scan_tokenized", "perturbed_run_failed"})


def _reached_tests(result: InstanceResult) -> bool:
    tests = [c for c in result.commands if c.phase == "tests"]
    return bool(tests) and not tests[-1].timed_out and not tests[-1].truncated
