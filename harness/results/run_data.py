"""A run directory, read and validated: one verdict per instance, with the evidence behind it.

This is the loading half of the result model (see :mod:`harness.results`).  It reads only
what the harness wrote (``summary.json`` and one ``report.json`` per instance, or one per
attempt) and never needs Docker.

Rules that keep the numbers honest:

* **The universe is the summary's.**  Every id any of the summary's id lists names is an
  instance of the run (``no_prediction_ids`` included: they stay in the denominator).
* **Anything we cannot vouch for is unresolved.**  An instance listed in the summary
  without a ``report.json`` is unresolved (``no_report``); so is one whose report and
  summary disagree (``summary_report_mismatch``).
* Instance ids become directory names: an id that could escape the run directory is
  refused.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harness.errors import InputError
from harness.paths import PAGE, InstanceFiles, RunPaths, attempt_dir_name, attempt_number
from harness.results import stats
from harness.results._io import expect_dict, id_list, optional, read_json, str_list, tests_ran
from harness.results.report import DISJOINT_FROM_RESOLVED
# the infra-error origins and the repository slice key are the summary's (one rule for both)
from harness.results.report import INFRA_ORIGINS, repo_of

__all__ = ["INFRA_ORIGINS", "SAFE_ID", "page_path", "InstanceEvidence", "InstanceFigures", "InstanceOutcome", "RunData",
           "repo_of", "load_run"]

# Summary id lists.  The first four are required by the run-directory contract; the rest
# are optional (older or newer summaries) and only widen the run's instance universe.
_REQUIRED_ID_LISTS = ("resolved_ids", "unresolved_ids", "empty_patch_ids", "error_ids")
_OPTIONAL_ID_LISTS = ("invalid_ids", "incomplete_ids", "submitted_ids", "completed_ids", "no_prediction_ids")

#: Instance ids become directory names; anything that could escape the run dir is refused.
SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]*")


#: Note on an instance whose report could not be read (``load_run(strict=False)``).
UNREADABLE = "unreadable_report"


def page_path(report_dir: str) -> str:
    """URL path of the page in ``report_dir`` (relative, every segment percent-encoded:
    an id can never become a scheme such as ``javascript:`` or leave its directory)."""
    return "/".join(quote(segment, safe="") for segment in report_dir.split("/")) + "/" + PAGE


@dataclass(frozen=True)
class InstanceEvidence:
    """What the harness recorded about one instance: the "why" behind its verdict."""

    report_path: str | None
    status: str | None
    error_reason: str | None
    error_origin: str | None
    empty_patch: bool
    f2p_failed: tuple[str, ...]
    p2p_failed: tuple[str, ...]
    missing: tuple[str, ...]
    integrity_flags: tuple[str, ...]
    notes: tuple[str, ...]

    def reason(self, *, limit: int | None = None) -> str:
        """One line naming every recorded cause; ``limit`` caps each test list for display."""

        def tests(label: str, names: tuple[str, ...]) -> str:
            shown = names if limit is None else names[:limit]
            more = f" (+{len(names) - len(shown)} more)" if len(shown) < len(names) else ""
            return f"{label}: {', '.join(shown)}{more}"

        parts: list[str] = list(self.notes)
        if self.error_reason:
            origin = f" (origin: {self.error_origin})" if self.error_origin else ""
            parts.append(f"error: {self.error_reason}{origin}")
        if self.empty_patch:
            parts.append("empty patch")
        if self.integrity_flags:
            parts.append(f"integrity: {', '.join(self.integrity_flags)}")
        if self.f2p_failed:
            parts.append(tests("F2P failed", self.f2p_failed))
        if self.p2p_failed:
            parts.append(tests("P2P regressions", self.p2p_failed))
        if self.missing:
            parts.append(tests("missing tests", self.missing))
        if self.status and not parts:
            parts.append(f"status {self.status}")
        return "; ".join(parts) if parts else "no cause recorded"


@dataclass(frozen=True)
class InstanceFigures:
    """Counts and timings of the main report, for tables and charts (not part of a verdict).

    ``report_dir`` is the directory of the main report relative to the run directory
    (``<id>`` or ``<id>/attempt-<n>``); ``attempt_dirs`` those of every attempt report.
    ``seconds`` is the evaluation's ``timings.total`` (``wall`` when absent).
    """

    report_dir: str
    f2p_passed: int
    f2p_total: int
    p2p_passed: int
    p2p_total: int
    seconds: float | None
    timings: tuple[tuple[str, float], ...]
    attempt_dirs: tuple[str, ...] = ()


@dataclass(frozen=True)
class InstanceOutcome:
    """The harness's verdict on one instance of one run (first attempt when there are several)."""

    instance_id: str
    repo: str
    resolved: bool
    evidence: InstanceEvidence
    attempts: tuple[stats.Attempt, ...] = ()
    figures: InstanceFigures | None = None  # None: no report at all

    @property
    def page(self) -> str | None:
        """The instance's HTML page as a URL path relative to the run directory (None without a report)."""
        return page_path(self.figures.report_dir) if self.figures else None


@dataclass(frozen=True)
class RunData:
    """A run directory, read and validated.  ``outcomes`` covers every id the summary lists."""

    run_id: str
    path: str
    model_name_or_path: str | None
    outcomes: Mapping[str, InstanceOutcome]
    has_attempts: bool
    warnings: tuple[str, ...]
    summary: Mapping[str, Any] = field(default_factory=dict)  # summary.json as read


def _timings(value: Any, path: Path, record: str) -> tuple[tuple[str, float], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) for k, v in value.items()):
        raise InputError("must be an object {phase: seconds}", source=str(path), record=record, field="timings")
    return tuple((k, float(v)) for k, v in value.items())


def _count(report: dict, key: str, path: Path, record: str) -> int | None:
    value = optional(report, key, (int,), path, record)
    if value is not None and value < 0:
        raise InputError("must be >= 0", source=str(path), record=record, field=key)
    return value


def _amount(report: dict, key: str, path: Path, record: str) -> float | None:
    value = optional(report, key, (int, float), path, record)
    if value is None:
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        number = math.inf
    if not (number >= 0 and math.isfinite(number)):  # NaN fails both
        raise InputError("must be a finite number >= 0", source=str(path), record=record, field=key)
    return number


def _parse_report(path: Path, expected_id: str) -> dict:
    """Validate one report.json and return the fields this package uses."""
    report = expect_dict(read_json(path, "instance report"), path, None, "report")
    instance_id = report.get("instance_id")
    if instance_id != expected_id:
        raise InputError(f"is {instance_id!r}, expected {expected_id!r} (the directory name)",
                         source=str(path), field="instance_id")
    if not isinstance(report.get("resolved"), bool):
        raise InputError("required boolean field is missing or not a boolean",
                         source=str(path), record=expected_id, field="resolved")
    tests_status = optional(report, "tests_status", (dict,), path, expected_id) or {}
    lists: dict[str, tuple[str, ...]] = {}
    for group in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        block = tests_status.get(group) or {}
        if not isinstance(block, dict):
            raise InputError("must be an object with success/failure lists",
                             source=str(path), record=expected_id, field=f"tests_status.{group}")
        for outcome in ("success", "failure"):
            lists[f"{group}.{outcome}"] = str_list(block.get(outcome), path, expected_id,
                                                   f"tests_status.{group}.{outcome}")
    integrity = optional(report, "integrity", (dict,), path, expected_id) or {}
    ran = tests_ran(report) or report.get("status") != "INVALID"
    calls = optional(report, "calls", (int,), path, expected_id)
    if calls is not None and calls < 0:
        raise InputError("must be >= 0", source=str(path), record=expected_id, field="calls")
    cost = optional(report, "cost", (int, float), path, expected_id)
    if cost is not None and not (cost >= 0 and cost != float("inf")):
        raise InputError("must be a finite number >= 0", source=str(path), record=expected_id, field="cost")

    # what the agent's prediction said of the attempt (harness.inputs.predictions.AGENT_FIELDS)
    steps = _count(report, "steps", path, expected_id)
    agent_seconds = _amount(report, "agent_seconds", path, expected_id)
    return {
        "resolved": report["resolved"],
        "repo": optional(report, "repo", (str,), path, expected_id),
        "status": optional(report, "status", (str,), path, expected_id),
        "error_reason": optional(report, "error_reason", (str,), path, expected_id),
        "error_origin": optional(report, "error_origin", (str,), path, expected_id),
        "empty_patch": report.get("patch_is_None") is True or report.get("patch_exists") is False,
        # a run that never reached its tests failed none of them (nor regressed any): not run
        "f2p_failed": lists["FAIL_TO_PASS.failure"] if ran else (),
        "p2p_failed": lists["PASS_TO_PASS.failure"] if ran else (),
        "tests_ran": ran,
        "f2p_passed": len(lists["FAIL_TO_PASS.success"]),
        "p2p_passed": len(lists["PASS_TO_PASS.success"]),
        "f2p_total": len(lists["FAIL_TO_PASS.success"]) + len(lists["FAIL_TO_PASS.failure"]),
        "p2p_total": len(lists["PASS_TO_PASS.success"]) + len(lists["PASS_TO_PASS.failure"]),
        "missing": str_list(report.get("missing"), path, expected_id, "missing") if ran else (),
        "integrity_flags": str_list(integrity.get("flags"), path, expected_id, "integrity.flags"),
        "attempt": optional(report, "attempt", (int,), path, expected_id),
        "calls": calls,
        "cost": float(cost) if cost is not None else None,
        "steps": steps,
        "agent_seconds": agent_seconds,
        "exit_status": optional(report, "exit_status", (str,), path, expected_id),
        "model_name_or_path": optional(report, "model_name_or_path", (str,), path, expected_id),
        "timings": _timings(report.get("timings"), path, expected_id),
    }


def _evidence(path: Path | None, fields: dict | None, notes: Iterable[str], fallback_reason: str | None) -> InstanceEvidence:
    if fields is None:
        return InstanceEvidence(report_path=None, status=None, error_reason=fallback_reason, error_origin=None,
                                empty_patch=False, f2p_failed=(), p2p_failed=(), missing=(), integrity_flags=(),
                                notes=tuple(notes))
    return InstanceEvidence(
        report_path=str(path), status=fields["status"],
        error_reason=fields["error_reason"] or fallback_reason, error_origin=fields["error_origin"],
        empty_patch=fields["empty_patch"], f2p_failed=fields["f2p_failed"], p2p_failed=fields["p2p_failed"],
        missing=fields["missing"], integrity_flags=fields["integrity_flags"], notes=tuple(notes))


def _figures(root: Path, path: Path, fields: dict, attempt_dirs: tuple[str, ...]) -> InstanceFigures:
    timings = dict(fields["timings"])
    seconds = timings.get("total", timings.get("wall"))
    return InstanceFigures(
        report_dir=path.parent.relative_to(root).as_posix(),
        f2p_passed=fields["f2p_passed"], f2p_total=fields["f2p_total"],
        p2p_passed=fields["p2p_passed"], p2p_total=fields["p2p_total"],
        seconds=seconds, timings=fields["timings"], attempt_dirs=attempt_dirs)


def _attempt_from(fields: dict | None) -> stats.Attempt:
    if fields is None:
        # The attempt directory exists (or its number was skipped) but nothing was
        # recorded: the harness lost it, so it is an infra error with unknown spend.
        return stats.Attempt(success=False, infra_error=True, calls=None, cost=None, lost=True)
    return stats.Attempt(success=fields["resolved"], infra_error=fields["error_origin"] in INFRA_ORIGINS,
                         calls=fields["calls"], cost=fields["cost"], steps=fields["steps"],
                         agent_seconds=fields["agent_seconds"], exit_status=fields["exit_status"])


def _read_attempts(instance_dir: Path, instance_id: str) -> list[tuple[int, Path, dict | None]]:
    """Attempt reports in attempt order; gaps in the numbering become report-less attempts."""
    if not instance_dir.is_dir():
        return []
    numbered: dict[int, Path] = {}
    for child in instance_dir.iterdir():
        number = attempt_number(child.name)
        if number is not None and child.is_dir():
            if number < 1:
                raise InputError("attempt numbers start at 1", source=str(child), record=instance_id, field="attempt")
            numbered[number] = InstanceFiles(child).report
    if not numbered:
        return []
    result: list[tuple[int, Path, dict | None]] = []
    for number in range(1, max(numbered) + 1):
        path = numbered.get(number, InstanceFiles(instance_dir).attempt(number).report)
        fields = _parse_report(path, instance_id) if path.is_file() else None
        if fields is not None and fields["attempt"] is not None and fields["attempt"] != number:
            raise InputError(f"is {fields['attempt']}, but the report lives in {attempt_dir_name(number)}/",
                             source=str(path), record=instance_id, field="attempt")
        result.append((number, path, fields))
    return result


def load_run(run_dir: str | os.PathLike[str], *, strict: bool = True) -> RunData:
    """Read ``summary.json`` and every per-instance report of one run directory.

    The run's instance universe is the union of the summary's id lists.  Verdicts:

    * flat layout (``<id>/report.json``): resolved only if the report says
      ``resolved: true`` *and* the summary lists the id in ``resolved_ids``; a
      disagreement counts as unresolved with note ``summary_report_mismatch``;
    * attempts layout (``<id>/attempt-<n>/report.json``): the main verdict is the first
      attempt's (a root ``<id>/report.json``, if also present, takes precedence), and all
      attempts feed the repeated-attempt statistics;
    * no report at all: unresolved, note ``no_prediction`` when the summary says the
      instance had none, ``no_report`` otherwise;
    * with ``strict=False`` (the report pages), an instance whose report is malformed is
      kept, unresolved, with note ``unreadable_report: <why>`` and a warning, instead of
      failing the whole run (comparisons stay strict: they refuse such input).

    Raises:
        InputError (ValueError): the directory or summary is missing, any JSON is
            malformed, or a required field is missing or mistyped (message names the
            file and the field).
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise InputError("run directory not found", source=str(root))
    summary_path = RunPaths(root).summary
    summary = expect_dict(read_json(summary_path, "run summary"), summary_path, None, "summary")
    lists = {key: id_list(summary, key, summary_path, required=True) for key in _REQUIRED_ID_LISTS}
    lists.update({key: id_list(summary, key, summary_path, required=False) for key in _OPTIONAL_ID_LISTS})
    resolved_ids = set(lists["resolved_ids"])
    for key in DISJOINT_FROM_RESOLVED:
        both = sorted(resolved_ids & set(lists[key]))
        if both:
            raise InputError(f"ids also listed in resolved_ids: {', '.join(both)}", source=str(summary_path), field=key)
    error_reasons = summary.get("error_reasons") or {}
    if not isinstance(error_reasons, dict):
        raise InputError("must be an object {instance_id: reason}", source=str(summary_path), field="error_reasons")
    run_id = summary.get("run_id")
    if run_id is not None and not isinstance(run_id, str):
        raise InputError("must be a string", source=str(summary_path), field="run_id")
    model = summary.get("model_name_or_path")
    no_prediction = set(lists["no_prediction_ids"])

    universe = sorted(set().union(*(set(ids) for ids in lists.values())))
    warnings: list[str] = []
    total = summary.get("total_instances")
    if isinstance(total, int) and not isinstance(total, bool) and total != len(universe):
        warnings.append(f"summary.json says total_instances={total} but lists {len(universe)} instance ids; "
                        "only the listed ids are compared")

    outcomes: dict[str, InstanceOutcome] = {}
    has_attempts = False
    for instance_id in universe:
        if not SAFE_ID.fullmatch(instance_id):
            raise InputError(f"instance id {instance_id!r} is not a safe directory name",
                             source=str(summary_path), field="resolved_ids/unresolved_ids/...")
        instance_dir = root / instance_id
        root_report = InstanceFiles(instance_dir).report
        main_path: Path | None
        main_fields: dict | None
        from_attempt = False
        notes: list[str] = []
        try:
            attempts = _read_attempts(instance_dir, instance_id)
            if root_report.is_file():
                main_path, main_fields = root_report, _parse_report(root_report, instance_id)
            elif attempts and attempts[0][2] is not None:
                _, main_path, main_fields = attempts[0]
                from_attempt = True
            else:
                main_path, main_fields = None, None
        except InputError as exc:
            if strict:
                raise
            # Shown, never dropped: the instance stays in the universe, unresolved, and says why.
            attempts, main_path, main_fields = [], None, None
            notes.append(f"{UNREADABLE}: {exc}")
            warnings.append(f"{instance_id}: report not readable, counted unresolved: {exc}")
        has_attempts = has_attempts or bool(attempts)
        fallback = error_reasons.get(instance_id) if isinstance(error_reasons.get(instance_id), str) else None
        if main_fields is None:
            if not notes:
                notes.append("no_prediction" if instance_id in no_prediction and not attempts else "no_report")
            resolved = False
        elif from_attempt:
            # With several attempts the summary's lists may describe any attempt; the
            # main figure is defined as the first attempt, so no cross-check here.
            resolved = main_fields["resolved"]
        else:
            in_summary = instance_id in resolved_ids
            if main_fields["resolved"] != in_summary:
                notes.append(f"summary_report_mismatch (report resolved={main_fields['resolved']}, "
                             f"summary resolved={in_summary}); counted unresolved")
                warnings.append(f"{instance_id}: report.json and summary.json disagree; counted unresolved")
            resolved = main_fields["resolved"] and in_summary
        outcome_attempts = tuple(_attempt_from(fields) for _, _, fields in attempts)
        if not attempts and main_fields is not None:
            outcome_attempts = (_attempt_from(main_fields),)
        attempt_dirs = tuple(p.parent.relative_to(root).as_posix() for _, p, f in attempts if f is not None)
        outcomes[instance_id] = InstanceOutcome(
            instance_id=instance_id,
            repo=repo_of(instance_id, main_fields["repo"] if main_fields else None),
            resolved=resolved,
            evidence=_evidence(main_path, main_fields, notes, fallback),
            attempts=outcome_attempts,
            figures=_figures(root, main_path, main_fields, attempt_dirs) if main_fields and main_path else None,
        )
        if model is None and main_fields is not None:
            model = main_fields["model_name_or_path"]

    # A report outside the summary's universe is suspicious (stale directory, wrong
    # summary); it is not counted, but it is mentioned.
    listed = set(universe)
    for child in sorted(root.iterdir()):
        if child.is_dir() and child.name not in listed and InstanceFiles(child).report.is_file():
            warnings.append(f"{child.name}: has report.json but is not listed in summary.json; ignored")

    return RunData(run_id=run_id or root.name, path=str(root), model_name_or_path=model if isinstance(model, str) else None,
                   outcomes=outcomes, has_attempts=has_attempts, warnings=tuple(warnings), summary=summary)
