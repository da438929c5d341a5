"""SWE-bench's output layout and schema, written from a run directory (``--swebench-output``).

Tools built for ``swebench.harness.run_evaluation``'s outputs (leaderboard checks,
submissions, analysis notebooks) read two things, both written here beside the run's own
files::

    <report_dir>/<model>.<run_id>.json             the run report (report_dir: --report-dir, default
                                                   the run directory)
    <run_dir>/logs/run_evaluation/<run_id>/<model>/<instance_id>/
        report.json       {instance_id: {patch_is_None, patch_exists, patch_successfully_applied, resolved,
                          infra_failure, tests_status: {FAIL_TO_PASS, PASS_TO_PASS, FAIL_TO_FAIL, PASS_TO_FAIL}}}
        test_output.txt   the test output between SWE-bench's start/end markers, then the exit-code marker
        patch.diff        the model patch as graded
        run_instance.log  what happened, in a few lines (SWE-bench's markers where they apply)

``<model>`` is the model name with ``/`` written ``__``, as SWE-bench writes it.

The verdicts are this harness's (the same as in ``<instance_id>/report.json``); the shape
and the counting rules are SWE-bench's, so that SWE-bench's own ``make_run_report`` over
these logs writes the same run report:

* ``report.json`` exists exactly for the instances that were graded and are not errors
  (an INVALID result charged to the model, e.g. a patch that does not apply, is unresolved:
  it has one); an instance the harness or the instance itself failed (the environment did
  not build, the engine was lost, ...) has none, so it counts among ``error_ids``;
* an instance without a prediction is ``incomplete``; one whose patch is empty or null is
  ``empty_patch`` (graded here all the same: its report is kept);
* ``FAIL_TO_FAIL`` and ``PASS_TO_FAIL`` are empty, as ``run_evaluation`` writes them (it
  grades F2P and P2P only);
* ``test_output.txt`` of an INVALID result carries SWE-bench's error marker after its end
  marker (``Tests Timed Out`` for a timeout, ``Tests Errored`` otherwise), so that SWE-bench's
  log reader re-grading it refuses it as this harness did;
* ``infra_failure_ids`` are the errors charged to the harness (their reason in
  ``failure_reasons``).

Repeated attempts: an instance's first attempt (as in ``summary.json``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.errors import InputError
from harness.paths import InstanceFiles, RunPaths, id_problem

LOGS = Path("logs") / "run_evaluation"
#: The files of an instance in SWE-bench's layout: SWE-bench's names (the run directory's own
#: happen to be spelled alike, harness.paths names those).
REPORT_NAME, TEST_OUTPUT_NAME, PATCH_NAME = "report.json", "test_output.txt", "patch.diff"
#: beside the model directories: what the run report was counted from (harness's, not SWE-bench's)
REQUEST = "harness-layout.json"
START_TEST_OUTPUT = ">>>>> Start Test Output"
END_TEST_OUTPUT = ">>>>> End Test Output"
TEST_EXIT_CODE = ">>>>> Test Exit Code"
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
APPLY_PATCH_PASS = ">>>>> Applied Patch"
TESTS_ERROR = ">>>>> Tests Errored"
TESTS_TIMEOUT = ">>>>> Tests Timed Out"
SCHEMA_VERSION = 2


def model_dirname(model: str) -> str:
    """SWE-bench's directory name for a model (``/`` -> ``__``); InputError when it cannot
    name a directory here (said before anything runs)."""
    name = model.replace("/", "__")
    problem = id_problem(name)
    if problem:
        raise InputError(f"SWE-bench's layout names a directory after the model ({name!r}), which {problem}",
                         field="model_name_or_path")
    return name


def instance_report(report: Mapping[str, Any]) -> dict[str, Any]:
    """SWE-bench's ``report.json`` for one of our reports (keyed by instance id)."""
    ts = report.get("tests_status") or {}
    empty = {"success": [], "failure": []}
    return {report["instance_id"]: {
        "patch_is_None": bool(report.get("patch_is_None")),
        "patch_exists": bool(report.get("patch_exists")),
        "patch_successfully_applied": bool(report.get("patch_successfully_applied")),
        "resolved": bool(report.get("resolved")),
        "infra_failure": is_error(report) and report.get("error_origin") == "harness",
        "tests_status": {
            "FAIL_TO_PASS": _lists(ts.get("FAIL_TO_PASS")),
            "PASS_TO_PASS": _lists(ts.get("PASS_TO_PASS")),
            "FAIL_TO_FAIL": dict(empty),
            "PASS_TO_FAIL": dict(empty),
        },
    }}


def _lists(value: Any) -> dict[str, list[str]]:
    value = value or {}
    return {"success": list(value.get("success") or []), "failure": list(value.get("failure") or [])}


def is_error(report: Mapping[str, Any]) -> bool:
    """An error in summary.json's sense: INVALID, charged to the harness or the instance."""
    return bool(report.get("error_reason")) and report.get("error_origin") != "model"


def test_output(raw: str, report: Mapping[str, Any]) -> str:
    """Our test output as SWE-bench's logs frame it."""
    parts = [START_TEST_OUTPUT, raw.rstrip("\n"), END_TEST_OUTPUT]
    if report.get("test_exit_code") is not None:
        parts.append(f"{TEST_EXIT_CODE}: {report['test_exit_code']}")
    if report.get("status") == "INVALID":
        parts.append(TESTS_TIMEOUT if report.get("error_reason") == "timeout" else TESTS_ERROR)
    return "\n".join(parts) + "\n"


def instance_log(report: Mapping[str, Any]) -> str:
    lines = [f"instance {report['instance_id']}: graded by harness {report.get('harness_version', '')}"]
    if report.get("error_reason") == "patch_apply_failed":
        lines.append(APPLY_PATCH_FAIL)
    elif report.get("patch_successfully_applied"):
        lines.append(f"{APPLY_PATCH_PASS} ({report.get('apply_strategy')})")
    lines.append(f"status {report.get('status')}, resolved {bool(report.get('resolved'))}")
    if report.get("error_reason"):
        lines.append(f"error {report['error_reason']} (charged to the {report.get('error_origin')}): "
                     f"{str(report.get('error_detail') or '')[:2000]}")
    return "\n".join(lines) + "\n"


def run_report(instance_ids: Iterable[str], predictions: Mapping[str, str | None],
               reports: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``<model>.<run_id>.json`` by SWE-bench's counting rules (see the module doc):
    ``reports`` are our reports by instance id, ``predictions`` the model patch by id."""
    dataset = sorted(set(instance_ids))
    completed, resolved, unresolved, error, incomplete, empty = (set() for _ in range(6))
    infra: dict[str, str] = {}
    for instance_id in dataset:
        if instance_id not in predictions:
            incomplete.add(instance_id)
            continue
        if predictions[instance_id] in ("", None):
            empty.add(instance_id)
            continue
        report = reports.get(instance_id)
        if report is None or is_error(report):
            error.add(instance_id)
        else:
            completed.add(instance_id)
            (resolved if report.get("resolved") else unresolved).add(instance_id)
        if report is not None and is_error(report) and report.get("error_origin") == "harness":
            infra[instance_id] = str(report.get("error_reason"))
    submitted = sorted(i for i in predictions if i in set(dataset))
    return {
        "total_instances": len(dataset),
        "submitted_instances": len(submitted),
        "completed_instances": len(completed),
        "resolved_instances": len(resolved),
        "unresolved_instances": len(unresolved),
        "infra_failure_instances": len(infra),
        "ambiguous_failure_instances": 0,
        "empty_patch_instances": len(empty),
        "error_instances": len(error),
        "completed_ids": sorted(completed),
        "incomplete_ids": sorted(incomplete),
        "empty_patch_ids": sorted(empty),
        "submitted_ids": submitted,
        "resolved_ids": sorted(resolved),
        "unresolved_ids": sorted(unresolved),
        "infra_failure_ids": sorted(infra),
        "ambiguous_failure_ids": [],
        "failure_reasons": dict(sorted(infra.items())),
        "error_ids": sorted(error),
        "schema_version": SCHEMA_VERSION,
    }


@dataclass(frozen=True)
class WrittenLayout:
    run_report: Path
    logs: Path
    instances: int


def first_attempts(run_dir: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Each instance's first attempt in a run directory: (its directory, its report)."""
    found: dict[str, tuple[int, Path, dict[str, Any]]] = {}
    for path in RunPaths(Path(run_dir)).report_files():
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
            instance_id = report["instance_id"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # incomplete: report.json is written last
        attempt = report.get("attempt") or 0
        if instance_id not in found or attempt < found[instance_id][0]:
            found[instance_id] = (attempt, path.parent, report)
    return {k: (d, r) for k, (_, d, r) in found.items()}


def write_layout(run_dir: Path, run_id: str, model: str, instance_ids: Iterable[str],
                 predictions: Mapping[str, str | None], report_dir: Path | None = None) -> WrittenLayout:
    """Write SWE-bench's layout for every graded instance of ``run_dir`` and the run report
    over ``instance_ids`` (atomically, file by file; a re-run rewrites them)."""
    from harness.atomic import write_json_atomic, write_text_atomic
    run_dir = Path(run_dir)
    model_dir = run_dir / LOGS / run_id / model_dirname(model)
    graded = first_attempts(run_dir)
    reports = {}
    for instance_id, (directory, report) in graded.items():
        if id_problem(instance_id):
            continue  # never a directory of ours: report.json names it, the path does not
        reports[instance_id] = report
        target = model_dir / instance_id
        target.mkdir(parents=True, exist_ok=True)
        if is_error(report):
            _remove(target / REPORT_NAME)
        else:
            write_json_atomic(target / REPORT_NAME, instance_report(report))
        raw = _read(InstanceFiles(directory).test_output)
        if raw is not None:
            write_text_atomic(target / TEST_OUTPUT_NAME, test_output(raw.decode("utf-8", "replace"), report))
        patch = _read(InstanceFiles(directory).patch)
        if patch is not None:
            write_text_atomic(target / PATCH_NAME, patch)
        write_text_atomic(target / "run_instance.log", instance_log(report))
    instance_ids = sorted(set(instance_ids))
    summary = run_report(instance_ids, predictions, reports)
    report_path = Path(report_dir or run_dir).resolve() / f"{model_dirname(model)}.{run_id}.json"
    report_path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(report_path, summary)
    # what the run report was counted from, so that a re-grade (harness report) rewrites it alike
    kinds = {i: "none" if p is None else "empty" if p == "" else "patch" for i, p in predictions.items()}
    write_json_atomic(model_dir.parent / REQUEST, {"model": model, "instance_ids": instance_ids,
                                                   "predictions": kinds, "run_report": str(report_path)})
    return WrittenLayout(report_path, model_dir, len(reports))


def refresh_layout(run_dir: Path) -> WrittenLayout | None:
    """Rewrite the layout a run directory holds (after ``harness report`` re-graded it);
    None when it holds none."""
    run_dir = Path(run_dir)
    written = None
    for request_path in sorted((run_dir / LOGS).glob(f"*/{REQUEST}")):
        request = json.loads(request_path.read_text(encoding="utf-8"))
        patches = {i: None if k == "none" else "" if k == "empty" else "patch" for i, k in request["predictions"].items()}
        report = Path(request["run_report"])
        written = write_layout(run_dir, request_path.parent.name, request["model"], request["instance_ids"], patches,
                               report.parent)
    return written


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
