"""Compare saved runs with each other or with a vendor's claimed verdicts.

This module only reads run directories written by the harness (``summary.json`` plus one
``report.json`` per instance, optionally one per attempt) and never needs Docker.  It
produces plain dataclasses (:class:`ClaimsComparison`, :class:`RunsComparison`) that turn
into JSON with :func:`to_dict` and into Markdown with :func:`render_markdown`.

Rules that keep the numbers honest:

* **Denominators are fixed before looking at outcomes.**  Against claims, the
  denominator is the claim file's whole universe (``resolved + unresolved +
  no_prediction``); instances the vendor did not predict, or that are missing from our
  run, count as unresolved and are never dropped.  Between two runs, it is the set of
  instance ids both runs were assigned.
* **Anything we cannot vouch for is unresolved.**  An instance listed in the summary
  without a ``report.json`` is unresolved (``no_report``); so is one whose report and
  summary disagree.
* **Controls are shown, not subtracted.**  Instances whose reference patch failed the
  validity control are listed apart but stay in the main denominator.

Bad input raises :class:`harness.errors.InputError` (a :class:`ValueError`) naming the
file and the field.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import stats
from harness.errors import InputError

__all__ = [
    "INFRA_ORIGINS",
    "InstanceEvidence",
    "InstanceOutcome",
    "RunData",
    "Claims",
    "RateWithInterval",
    "AgreementTable",
    "DiscordantInstance",
    "ReferenceControlFailure",
    "ClaimsComparison",
    "BootstrapDifference",
    "Flip",
    "RepoSlice",
    "SliceAverages",
    "RunRef",
    "RunsComparison",
    "repo_of",
    "load_run",
    "load_claims",
    "load_validity",
    "compare_with_claims",
    "compare_runs",
    "to_dict",
    "render_markdown",
    "write_outputs",
    "add_compare_parser",
    "run_compare",
]

CONFIDENCE = 0.95
BOOTSTRAP_ITERATIONS = 10_000

#: ``error_origin`` values that make an attempt an infrastructure error: the verdict says
#: nothing about the agent (the harness broke, or the instance itself is defective).
INFRA_ORIGINS = frozenset({"harness", "instance"})

# Summary id lists.  The first four are required by the run-directory contract; the rest
# are optional (older or newer summaries) and only widen the run's instance universe.
_REQUIRED_ID_LISTS = ("resolved_ids", "unresolved_ids", "empty_patch_ids", "error_ids")
_OPTIONAL_ID_LISTS = ("invalid_ids", "incomplete_ids", "submitted_ids", "completed_ids")

# Instance ids become directory names; refuse anything that could escape the run dir.
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]*")
_ATTEMPT_DIR = re.compile(r"attempt-(\d+)")


# =========================================================================== input


def _read_json(path: Path, what: str) -> Any:
    if not path.is_file():
        raise InputError(f"{what} not found", source=str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {what}: {exc}", source=str(path)) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON in {what} (line {exc.lineno}, column {exc.colno}): {exc.msg}",
                         source=str(path)) from exc


def _expect_dict(value: Any, path: Path, field_name: str | None, what: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"{what} must be a JSON object, got {type(value).__name__}",
                         source=str(path), field=field_name)
    return value


def _id_list(data: dict, key: str, path: Path, *, required: bool) -> list[str]:
    if key not in data:
        if required:
            raise InputError("required field is missing", source=str(path), field=key)
        return []
    value = data[key]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InputError("must be a list of instance id strings", source=str(path), field=key)
    duplicates = sorted({item for item in value if value.count(item) > 1})
    if duplicates:
        raise InputError(f"lists the same instance twice: {', '.join(duplicates)}", source=str(path), field=key)
    return value


def _opt(report: dict, key: str, kinds: tuple[type, ...], path: Path, record: str) -> Any:
    """Optional report field: absent or null gives None; a wrong type is an error."""
    value = report.get(key)
    if value is None:
        return None
    if isinstance(value, bool) and bool not in kinds:
        raise InputError(f"expected {'/'.join(k.__name__ for k in kinds)}, got bool",
                         source=str(path), record=record, field=key)
    if not isinstance(value, kinds):
        raise InputError(f"expected {'/'.join(k.__name__ for k in kinds)}, got {type(value).__name__}",
                         source=str(path), record=record, field=key)
    return value


def _str_list(value: Any, path: Path, record: str, field_name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InputError("must be a list of strings", source=str(path), record=record, field=field_name)
    return tuple(value)


def repo_of(instance_id: str, report_repo: str | None = None) -> str:
    """Repository slice key for an instance, always in ``owner/name`` form.

    The report's ``repo`` field wins when present.  Otherwise it is derived from the id
    (``pytest-dev__pytest-5227`` -> ``pytest-dev__pytest`` -> ``pytest-dev/pytest``); the
    ``__`` is turned back into ``/`` so instances with and without a report land in the
    same slice.
    """
    if report_repo:
        return report_repo
    base = instance_id.rsplit("-", 1)[0]
    return base.replace("__", "/", 1) if "__" in base else base


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
class InstanceOutcome:
    """The harness's verdict on one instance of one run (first attempt when there are several)."""

    instance_id: str
    repo: str
    resolved: bool
    evidence: InstanceEvidence
    attempts: tuple[stats.Attempt, ...] = ()


@dataclass(frozen=True)
class RunData:
    """A run directory, read and validated.  ``outcomes`` covers every id the summary lists."""

    run_id: str
    path: str
    model_name_or_path: str | None
    outcomes: Mapping[str, InstanceOutcome]
    has_attempts: bool
    warnings: tuple[str, ...]


def _parse_report(path: Path, expected_id: str) -> dict:
    """Validate one report.json and return the fields this module uses."""
    report = _expect_dict(_read_json(path, "instance report"), path, None, "report")
    instance_id = report.get("instance_id")
    if instance_id != expected_id:
        raise InputError(f"is {instance_id!r}, expected {expected_id!r} (the directory name)",
                         source=str(path), field="instance_id")
    if not isinstance(report.get("resolved"), bool):
        raise InputError("required boolean field is missing or not a boolean",
                         source=str(path), record=expected_id, field="resolved")
    tests_status = _opt(report, "tests_status", (dict,), path, expected_id) or {}
    failed: dict[str, tuple[str, ...]] = {}
    for group in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        block = tests_status.get(group) or {}
        if not isinstance(block, dict):
            raise InputError("must be an object with success/failure lists",
                             source=str(path), record=expected_id, field=f"tests_status.{group}")
        failed[group] = _str_list(block.get("failure"), path, expected_id, f"tests_status.{group}.failure")
    integrity = _opt(report, "integrity", (dict,), path, expected_id) or {}
    calls = _opt(report, "calls", (int,), path, expected_id)
    if calls is not None and calls < 0:
        raise InputError("must be >= 0", source=str(path), record=expected_id, field="calls")
    cost = _opt(report, "cost", (int, float), path, expected_id)
    if cost is not None and not (cost >= 0 and cost != float("inf")):
        raise InputError("must be a finite number >= 0", source=str(path), record=expected_id, field="cost")
    return {
        "resolved": report["resolved"],
        "repo": _opt(report, "repo", (str,), path, expected_id),
        "status": _opt(report, "status", (str,), path, expected_id),
        "error_reason": _opt(report, "error_reason", (str,), path, expected_id),
        "error_origin": _opt(report, "error_origin", (str,), path, expected_id),
        "empty_patch": report.get("patch_is_None") is True or report.get("patch_exists") is False,
        "f2p_failed": failed["FAIL_TO_PASS"],
        "p2p_failed": failed["PASS_TO_PASS"],
        "missing": _str_list(report.get("missing"), path, expected_id, "missing"),
        "integrity_flags": _str_list(integrity.get("flags"), path, expected_id, "integrity.flags"),
        "attempt": _opt(report, "attempt", (int,), path, expected_id),
        "calls": calls,
        "cost": float(cost) if cost is not None else None,
        "model_name_or_path": _opt(report, "model_name_or_path", (str,), path, expected_id),
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


def _attempt_from(fields: dict | None) -> stats.Attempt:
    if fields is None:
        # The attempt directory exists (or its number was skipped) but nothing was
        # recorded: the harness lost it, so it is an infra error with unknown spend.
        return stats.Attempt(success=False, infra_error=True, calls=None, cost=None)
    return stats.Attempt(success=fields["resolved"], infra_error=fields["error_origin"] in INFRA_ORIGINS,
                         calls=fields["calls"], cost=fields["cost"])


def _read_attempts(instance_dir: Path, instance_id: str) -> list[tuple[int, Path, dict | None]]:
    """Attempt reports in attempt order; gaps in the numbering become report-less attempts."""
    if not instance_dir.is_dir():
        return []
    numbered: dict[int, Path] = {}
    for child in instance_dir.iterdir():
        match = _ATTEMPT_DIR.fullmatch(child.name)
        if match and child.is_dir():
            number = int(match.group(1))
            if number < 1:
                raise InputError("attempt numbers start at 1", source=str(child), record=instance_id, field="attempt")
            numbered[number] = child / "report.json"
    if not numbered:
        return []
    result: list[tuple[int, Path, dict | None]] = []
    for number in range(1, max(numbered) + 1):
        path = numbered.get(number, instance_dir / f"attempt-{number}" / "report.json")
        fields = _parse_report(path, instance_id) if path.is_file() else None
        if fields is not None and fields["attempt"] is not None and fields["attempt"] != number:
            raise InputError(f"is {fields['attempt']}, but the report lives in attempt-{number}/",
                             source=str(path), record=instance_id, field="attempt")
        result.append((number, path, fields))
    return result


def load_run(run_dir: str | os.PathLike[str]) -> RunData:
    """Read ``summary.json`` and every per-instance report of one run directory.

    The run's instance universe is the union of the summary's id lists.  Verdicts:

    * flat layout (``<id>/report.json``): resolved only if the report says
      ``resolved: true`` *and* the summary lists the id in ``resolved_ids``; a
      disagreement counts as unresolved with note ``summary_report_mismatch``;
    * attempts layout (``<id>/attempt-<n>/report.json``): the main verdict is the first
      attempt's (a root ``<id>/report.json``, if also present, takes precedence), and all
      attempts feed the repeated-attempt statistics;
    * no report at all: unresolved, reason ``no_report``.

    Raises:
        InputError (ValueError): the directory or summary is missing, any JSON is
            malformed, or a required field is missing or mistyped (message names the
            file and the field).
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise InputError("run directory not found", source=str(root))
    summary_path = root / "summary.json"
    summary = _expect_dict(_read_json(summary_path, "run summary"), summary_path, None, "summary")
    lists = {key: _id_list(summary, key, summary_path, required=True) for key in _REQUIRED_ID_LISTS}
    lists.update({key: _id_list(summary, key, summary_path, required=False) for key in _OPTIONAL_ID_LISTS})
    resolved_ids = set(lists["resolved_ids"])
    for key in ("unresolved_ids", "empty_patch_ids", "error_ids", "invalid_ids"):
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

    universe = sorted(set().union(*(set(ids) for ids in lists.values())))
    warnings: list[str] = []
    total = summary.get("total_instances")
    if isinstance(total, int) and not isinstance(total, bool) and total != len(universe):
        warnings.append(f"summary.json says total_instances={total} but lists {len(universe)} instance ids; "
                        "only the listed ids are compared")

    outcomes: dict[str, InstanceOutcome] = {}
    has_attempts = False
    for instance_id in universe:
        if not _SAFE_ID.fullmatch(instance_id):
            raise InputError(f"instance id {instance_id!r} is not a safe directory name",
                             source=str(summary_path), field="resolved_ids/unresolved_ids/...")
        instance_dir = root / instance_id
        attempts = _read_attempts(instance_dir, instance_id)
        has_attempts = has_attempts or bool(attempts)
        root_report = instance_dir / "report.json"
        main_path: Path | None
        main_fields: dict | None
        from_attempt = False
        if root_report.is_file():
            main_path, main_fields = root_report, _parse_report(root_report, instance_id)
        elif attempts:
            _, main_path, main_fields = attempts[0]
            from_attempt = True
        else:
            main_path, main_fields = None, None
        notes: list[str] = []
        fallback = error_reasons.get(instance_id) if isinstance(error_reasons.get(instance_id), str) else None
        if main_fields is None:
            notes.append("no_report")
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
        outcomes[instance_id] = InstanceOutcome(
            instance_id=instance_id,
            repo=repo_of(instance_id, main_fields["repo"] if main_fields else None),
            resolved=resolved,
            evidence=_evidence(main_path, main_fields, notes, fallback),
            attempts=outcome_attempts,
        )
        if model is None and main_fields is not None:
            model = main_fields["model_name_or_path"]

    # A report outside the summary's universe is suspicious (stale directory, wrong
    # summary); it is not counted, but it is mentioned.
    listed = set(universe)
    for child in sorted(root.iterdir()):
        if child.is_dir() and child.name not in listed and (child / "report.json").is_file():
            warnings.append(f"{child.name}: has report.json but is not listed in summary.json; ignored")

    return RunData(run_id=run_id or root.name, path=str(root), model_name_or_path=model if isinstance(model, str) else None,
                   outcomes=outcomes, has_attempts=has_attempts, warnings=tuple(warnings))


@dataclass(frozen=True)
class Claims:
    """A vendor's claimed verdicts (``vendor-*.results.json`` shape)."""

    path: str
    submission: str | None
    resolved: frozenset[str]
    unresolved: frozenset[str]
    no_prediction: frozenset[str]
    per_instance: Mapping[str, Mapping[str, Any]]

    @property
    def universe(self) -> tuple[str, ...]:
        """Every instance the claim speaks about: the denominator of both rates."""
        return tuple(sorted(self.resolved | self.unresolved | self.no_prediction))


def load_claims(claims_path: str | os.PathLike[str]) -> Claims:
    """Read a claim file with required lists ``resolved``, ``unresolved``, ``no_prediction``.

    ``per_instance`` (optional) supplies per-instance claim details shown next to
    discordant instances.  An id may appear in only one list.

    Raises:
        InputError (ValueError): file missing, malformed JSON, a list missing or not a
            list of strings, an id in two lists, or an empty universe.
    """
    path = Path(claims_path)
    data = _expect_dict(_read_json(path, "claims file"), path, None, "claims file")
    resolved = _id_list(data, "resolved", path, required=True)
    unresolved = _id_list(data, "unresolved", path, required=True)
    no_prediction = _id_list(data, "no_prediction", path, required=True)
    for first, second, a, b in (("resolved", "unresolved", resolved, unresolved),
                                ("resolved", "no_prediction", resolved, no_prediction),
                                ("unresolved", "no_prediction", unresolved, no_prediction)):
        both = sorted(set(a) & set(b))
        if both:
            raise InputError(f"ids also listed in {first!r}: {', '.join(both)}", source=str(path), field=second)
    if not (resolved or unresolved or no_prediction):
        raise InputError("claims list no instances at all", source=str(path), field="resolved/unresolved/no_prediction")
    per_instance = data.get("per_instance") or {}
    if not isinstance(per_instance, dict) or not all(isinstance(v, dict) for v in per_instance.values()):
        raise InputError("must be an object {instance_id: {...}}", source=str(path), field="per_instance")
    submission = data.get("submission")
    return Claims(path=str(path), submission=submission if isinstance(submission, str) else None,
                  resolved=frozenset(resolved), unresolved=frozenset(unresolved),
                  no_prediction=frozenset(no_prediction), per_instance=per_instance)


def load_validity(validity_path: str | os.PathLike[str]) -> dict[str, bool]:
    """Read a validity report ``{"instances": {id: {"reference_full": bool, ...}}}``.

    Returns ``{instance_id: reference_full}``.

    Raises:
        InputError (ValueError): file missing, malformed JSON, ``instances`` missing or
            not an object, or an entry without a boolean ``reference_full``.
    """
    path = Path(validity_path)
    data = _expect_dict(_read_json(path, "validity report"), path, None, "validity report")
    if "instances" not in data:
        raise InputError("required field is missing", source=str(path), field="instances")
    instances = _expect_dict(data["instances"], path, "instances", "instances")
    result: dict[str, bool] = {}
    for instance_id, entry in instances.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("reference_full"), bool):
            raise InputError("must be an object with a boolean reference_full", source=str(path),
                             field=f"instances.{instance_id}.reference_full")
        result[instance_id] = entry["reference_full"]
    return result


# =========================================================================== results


@dataclass(frozen=True)
class RateWithInterval:
    """``successes / denominator`` with a Wilson interval; ``denominator_note`` says what was counted."""

    label: str
    successes: int
    denominator: int
    rate: float
    ci_low: float
    ci_high: float
    confidence: float
    denominator_note: str


def _rate(label: str, successes: int, denominator: int, note: str) -> RateWithInterval:
    low, high = stats.wilson_interval(successes, denominator, CONFIDENCE)
    return RateWithInterval(label=label, successes=successes, denominator=denominator,
                            rate=successes / denominator, ci_low=low, ci_high=high,
                            confidence=CONFIDENCE, denominator_note=note)


@dataclass(frozen=True)
class AgreementTable:
    """Paired 2x2 table over the same instances.

    ``first_only`` (b) and ``second_only`` (c) are the discordant cells used by McNemar.
    """

    first_label: str
    second_label: str
    both_resolved: int
    first_only: int
    second_only: int
    neither: int
    total: int


def _agreement(first_label: str, second_label: str, first: Mapping[str, bool], second: Mapping[str, bool],
               ids: Sequence[str]) -> AgreementTable:
    both = sum(1 for i in ids if first[i] and second[i])
    first_only = sum(1 for i in ids if first[i] and not second[i])
    second_only = sum(1 for i in ids if second[i] and not first[i])
    return AgreementTable(first_label=first_label, second_label=second_label, both_resolved=both,
                          first_only=first_only, second_only=second_only,
                          neither=len(ids) - both - first_only - second_only, total=len(ids))


@dataclass(frozen=True)
class DiscordantInstance:
    """An instance where the claim and our run disagree, with the harness's reason."""

    instance_id: str
    repo: str
    claimed_resolved: bool
    reproduced_resolved: bool
    claim_list: str  # "resolved" | "unresolved" | "no_prediction"
    claim_detail: Mapping[str, Any]
    reason: str
    evidence: InstanceEvidence | None  # None when the instance is absent from the run
    reference_control: str | None  # "passed" | "failed" | "unknown"; None without a validity report


@dataclass(frozen=True)
class ReferenceControlFailure:
    """An instance whose reference patch did not fully pass: listed apart, still in the denominator."""

    instance_id: str
    claimed_resolved: bool
    reproduced_resolved: bool


@dataclass(frozen=True)
class ClaimsComparison:
    """Our run against a vendor's claimed verdicts over the claim file's universe."""

    kind: str
    run_id: str
    run_dir: str
    claims_path: str
    submission: str | None
    validity_path: str | None
    denominator: int
    denominator_note: str
    claimed: RateWithInterval
    reproduced: RateWithInterval
    agreement: AgreementTable
    mcnemar_p: float
    discordant: tuple[DiscordantInstance, ...]
    claimed_no_prediction: tuple[str, ...]
    not_in_run: tuple[str, ...]
    extra_in_run: tuple[str, ...]
    reference_control_failed: tuple[ReferenceControlFailure, ...]
    reference_control_unknown: tuple[str, ...]
    attempts: stats.AttemptSummary | None
    warnings: tuple[str, ...]


def _claim_list(claims: Claims, instance_id: str) -> str:
    if instance_id in claims.resolved:
        return "resolved"
    return "unresolved" if instance_id in claims.unresolved else "no_prediction"


def _attempt_summary(run: RunData, ids: Sequence[str], max_attempts: int | None,
                     max_calls: int | None) -> stats.AttemptSummary | None:
    if not run.has_attempts or not ids:
        return None
    # Instances absent from the run stay in with zero attempts: they count against the
    # first-attempt and budget rates (denominator = every compared instance).
    return stats.summarize_attempts(
        {i: (run.outcomes[i].attempts if i in run.outcomes else ()) for i in ids},
        max_attempts=max_attempts, max_calls=max_calls)


def compare_with_claims(run_dir: str | os.PathLike[str], claims_path: str | os.PathLike[str],
                        validity_path: str | os.PathLike[str] | None = None, *,
                        max_attempts: int | None = None, max_calls: int | None = None) -> ClaimsComparison:
    """Compare a run's verdicts with a vendor's claimed verdicts.

    Denominator of both rates: every instance in the claim file's universe
    (``resolved + unresolved + no_prediction``).  Claimed no-prediction instances count
    as claimed-unresolved; universe instances missing from the run count as
    reproduced-unresolved; none are dropped.  Run instances outside the universe are
    listed in ``extra_in_run`` and not counted.  McNemar's exact p is over the
    discordant instances (b = claimed only, c = reproduced only).  With a validity
    report, instances whose ``reference_full`` is false are listed in
    ``reference_control_failed`` and stay in the denominator.

    ``max_attempts`` / ``max_calls`` set the budget for the repeated-attempt section
    (``None``: all recorded attempts, no call cap).

    Raises:
        InputError (ValueError): any input file is missing, malformed or lacks a field.
    """
    run = load_run(run_dir)
    claims = load_claims(claims_path)
    validity = load_validity(validity_path) if validity_path is not None else None
    universe = claims.universe
    claimed = {i: i in claims.resolved for i in universe}
    reproduced = {i: (i in run.outcomes and run.outcomes[i].resolved) for i in universe}
    note = (f"all {len(universe)} instances in the claim file's universe "
            f"({len(claims.resolved)} resolved + {len(claims.unresolved)} unresolved + "
            f"{len(claims.no_prediction)} no_prediction); no-prediction and missing instances count as unresolved")

    def control(instance_id: str) -> str | None:
        if validity is None:
            return None
        if instance_id not in validity:
            return "unknown"
        return "passed" if validity[instance_id] else "failed"

    discordant = []
    for instance_id in universe:
        if claimed[instance_id] == reproduced[instance_id]:
            continue
        outcome = run.outcomes.get(instance_id)
        if outcome is None:
            reason = "not in run (no verdict; counted unresolved)"
        elif outcome.resolved:
            reason = f"harness resolved it ({outcome.evidence.status or 'FULL'})"
        else:
            reason = outcome.evidence.reason(limit=5)
        discordant.append(DiscordantInstance(
            instance_id=instance_id,
            repo=outcome.repo if outcome else repo_of(instance_id),
            claimed_resolved=claimed[instance_id], reproduced_resolved=reproduced[instance_id],
            claim_list=_claim_list(claims, instance_id),
            claim_detail=dict(claims.per_instance.get(instance_id, {})),
            reason=reason, evidence=outcome.evidence if outcome else None,
            reference_control=control(instance_id)))

    warnings = list(run.warnings)
    for instance_id, detail in sorted(claims.per_instance.items()):
        if isinstance(detail.get("resolved"), bool) and instance_id in universe \
                and detail["resolved"] != claimed[instance_id]:
            warnings.append(f"{instance_id}: claims per_instance.resolved={detail['resolved']} contradicts the "
                            f"{_claim_list(claims, instance_id)!r} list; the lists are used")

    return ClaimsComparison(
        kind="claims_comparison", run_id=run.run_id, run_dir=run.path, claims_path=claims.path,
        submission=claims.submission, validity_path=str(validity_path) if validity_path is not None else None,
        denominator=len(universe), denominator_note=note,
        claimed=_rate("claimed", sum(claimed.values()), len(universe), note),
        reproduced=_rate("reproduced", sum(reproduced.values()), len(universe), note),
        agreement=_agreement("claimed", "reproduced", claimed, reproduced, universe),
        mcnemar_p=stats.mcnemar_exact(
            sum(1 for i in universe if claimed[i] and not reproduced[i]),
            sum(1 for i in universe if reproduced[i] and not claimed[i])),
        discordant=tuple(discordant),
        claimed_no_prediction=tuple(sorted(claims.no_prediction)),
        not_in_run=tuple(i for i in universe if i not in run.outcomes),
        extra_in_run=tuple(sorted(set(run.outcomes) - set(universe))),
        reference_control_failed=tuple(
            ReferenceControlFailure(i, claimed[i], reproduced[i]) for i in universe if control(i) == "failed"),
        reference_control_unknown=tuple(i for i in universe if control(i) == "unknown"),
        attempts=_attempt_summary(run, universe, max_attempts, max_calls),
        warnings=tuple(warnings),
    )


@dataclass(frozen=True)
class BootstrapDifference:
    """Paired bootstrap of ``rate_b - rate_a`` over shared instances (resampling instances)."""

    definition: str
    difference: float
    ci_low: float
    ci_high: float
    confidence: float
    iterations: int
    seed: int


@dataclass(frozen=True)
class Flip:
    """An instance whose verdict differs between the runs, with both runs' reasons."""

    instance_id: str
    repo: str
    direction: str  # "fixed_in_b" (A unresolved -> B resolved) | "broken_in_b" (A resolved -> B unresolved)
    reason_a: str
    reason_b: str


@dataclass(frozen=True)
class RepoSlice:
    """One repository's shared instances; rates are over ``instances`` of this repo."""

    repo: str
    instances: int
    resolved_a: int
    resolved_b: int
    rate_a: float
    rate_b: float
    difference: float
    fixed_in_b: int
    broken_in_b: int


@dataclass(frozen=True)
class SliceAverages:
    """``macro``: mean of per-repository rates (each repository weighs the same).
    ``micro``: pooled over instances (each instance weighs the same; equals the overall rates)."""

    kind: str
    denominator_note: str
    rate_a: float
    rate_b: float
    difference: float


@dataclass(frozen=True)
class RunRef:
    run_id: str
    run_dir: str
    model_name_or_path: str | None
    instances: int


@dataclass(frozen=True)
class RunsComparison:
    """Run B against run A on the instances both were assigned (paired)."""

    kind: str
    run_a: RunRef
    run_b: RunRef
    shared: int
    denominator_note: str
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    rate_a: RateWithInterval
    rate_b: RateWithInterval
    agreement: AgreementTable
    mcnemar_p: float
    difference: BootstrapDifference
    fixed_in_b: int
    broken_in_b: int
    flip_rate: float
    net_flip_rate: float
    flips: tuple[Flip, ...]
    repo_slices: tuple[RepoSlice, ...]
    macro_average: SliceAverages
    micro_average: SliceAverages
    attempts_a: stats.AttemptSummary | None
    attempts_b: stats.AttemptSummary | None
    warnings: tuple[str, ...]


def _outcome_reason(outcome: InstanceOutcome) -> str:
    if outcome.resolved:
        return f"resolved ({outcome.evidence.status or 'FULL'})"
    return outcome.evidence.reason(limit=5)  # the full lists stay in the run's reports


def compare_runs(run_a: str | os.PathLike[str], run_b: str | os.PathLike[str], seed: int = 0, *,
                 iterations: int = BOOTSTRAP_ITERATIONS, max_attempts: int | None = None,
                 max_calls: int | None = None) -> RunsComparison:
    """Paired comparison of run B against run A on their shared instance ids.

    Denominator of every rate: the instances both runs were assigned (``shared``);
    instances in only one run are listed, not counted.  McNemar's exact p uses
    b = resolved only in A, c = resolved only in B.  The bootstrap CI is for
    ``rate_b - rate_a`` (``iterations`` resamples of instances, ``seed``).
    ``flip_rate = (fixed_in_b + broken_in_b) / shared``;
    ``net_flip_rate = (fixed_in_b - broken_in_b) / shared``.  Per-repository slices use
    :func:`repo_of`; the macro average weighs repositories equally, the micro average
    weighs instances equally.

    Raises:
        InputError (ValueError): a run directory or file is missing/malformed, or the
            runs share no instance.
    """
    a, b = load_run(run_a), load_run(run_b)
    shared = sorted(set(a.outcomes) & set(b.outcomes))
    if not shared:
        raise InputError("the two runs share no instance id; nothing to compare",
                         source=f"{a.path} vs {b.path}", field="resolved_ids/unresolved_ids/...")
    res_a = {i: a.outcomes[i].resolved for i in shared}
    res_b = {i: b.outcomes[i].resolved for i in shared}
    n = len(shared)
    note = f"{n} instance ids present in both runs"
    fixed = [i for i in shared if res_b[i] and not res_a[i]]
    broken = [i for i in shared if res_a[i] and not res_b[i]]
    diff, low, high = stats.paired_bootstrap_diff([res_a[i] for i in shared], [res_b[i] for i in shared],
                                                  iterations=iterations, seed=seed, confidence=CONFIDENCE)

    by_repo: dict[str, list[str]] = {}
    for i in shared:
        by_repo.setdefault(a.outcomes[i].repo, []).append(i)
    fixed_set, broken_set = set(fixed), set(broken)
    slices = []
    for repo in sorted(by_repo):
        ids = by_repo[repo]
        ra, rb = sum(res_a[i] for i in ids), sum(res_b[i] for i in ids)
        slices.append(RepoSlice(repo=repo, instances=len(ids), resolved_a=ra, resolved_b=rb,
                                rate_a=ra / len(ids), rate_b=rb / len(ids), difference=(rb - ra) / len(ids),
                                fixed_in_b=sum(1 for i in ids if i in fixed_set),
                                broken_in_b=sum(1 for i in ids if i in broken_set)))
    macro_a = sum(s.rate_a for s in slices) / len(slices)
    macro_b = sum(s.rate_b for s in slices) / len(slices)
    micro_a, micro_b = sum(res_a.values()) / n, sum(res_b.values()) / n

    flips = [Flip(instance_id=i, repo=a.outcomes[i].repo,
                  direction="fixed_in_b" if i in fixed_set else "broken_in_b",
                  reason_a=_outcome_reason(a.outcomes[i]), reason_b=_outcome_reason(b.outcomes[i]))
             for i in shared if res_a[i] != res_b[i]]

    return RunsComparison(
        kind="runs_comparison",
        run_a=RunRef(a.run_id, a.path, a.model_name_or_path, len(a.outcomes)),
        run_b=RunRef(b.run_id, b.path, b.model_name_or_path, len(b.outcomes)),
        shared=n, denominator_note=note,
        only_in_a=tuple(sorted(set(a.outcomes) - set(shared))),
        only_in_b=tuple(sorted(set(b.outcomes) - set(shared))),
        rate_a=_rate(f"A ({a.run_id})", sum(res_a.values()), n, note),
        rate_b=_rate(f"B ({b.run_id})", sum(res_b.values()), n, note),
        agreement=_agreement("A", "B", res_a, res_b, shared),
        mcnemar_p=stats.mcnemar_exact(len(broken), len(fixed)),
        difference=BootstrapDifference(definition="rate_b - rate_a", difference=diff, ci_low=low, ci_high=high,
                                       confidence=CONFIDENCE, iterations=iterations, seed=seed),
        fixed_in_b=len(fixed), broken_in_b=len(broken),
        flip_rate=(len(fixed) + len(broken)) / n, net_flip_rate=(len(fixed) - len(broken)) / n,
        flips=tuple(flips), repo_slices=tuple(slices),
        macro_average=SliceAverages("macro", f"mean of {len(slices)} per-repository rates (repositories weigh equally)",
                                    macro_a, macro_b, macro_b - macro_a),
        micro_average=SliceAverages("micro", f"pooled over {n} shared instances (instances weigh equally)",
                                    micro_a, micro_b, micro_b - micro_a),
        attempts_a=_attempt_summary(a, shared, max_attempts, max_calls),
        attempts_b=_attempt_summary(b, shared, max_attempts, max_calls),
        warnings=tuple([f"A: {w}" for w in a.warnings] + [f"B: {w}" for w in b.warnings]),
    )


# =========================================================================== output


Result = ClaimsComparison | RunsComparison


def to_dict(result: Result) -> dict[str, Any]:
    """JSON-ready dict of a comparison result (tuples become lists, dataclasses objects)."""
    return json.loads(json.dumps(dataclasses.asdict(result)))


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def _pp(value: float) -> str:
    return f"{value * 100:+.1f} pp"


def _cell(text: object) -> str:
    # Test ids routinely contain "|" (pytest parametrisation); escape it for tables.
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _rate_line(rate: RateWithInterval) -> str:
    return (f"{rate.successes}/{rate.denominator} = {_pct(rate.rate)} "
            f"(95% Wilson CI {_pct(rate.ci_low)}–{_pct(rate.ci_high)})")


def _p(value: float) -> str:
    return f"{value:.4g}"


def _attempts_md(title: str, summary: stats.AttemptSummary | None) -> list[str]:
    if summary is None:
        return []
    budget, costs = summary.budget, summary.costs
    lines = [f"### Repeated attempts — {title}", "",
             f"{summary.attempts} attempts over {summary.instances} instances "
             f"(at most {summary.max_attempts_observed} per instance); "
             f"{summary.infra_error_attempts} infra-error attempts (counted as failed tries, listed apart).", "",
             f"- First-attempt rate: {_pct(summary.first_attempt_rate)} of {summary.instances} instances",
             f"- Success within budget (attempts ≤ {budget.max_attempts or 'all'}, "
             f"calls ≤ {budget.max_calls if budget.max_calls is not None else 'unlimited'}): "
             f"{budget.successes}/{budget.assigned_instances} = {_pct(budget.rate)}; "
             f"over-budget attempts {budget.over_budget_attempts} "
             f"({budget.over_budget_successes} successes not counted); "
             f"unverifiable spend {budget.unknown_calls_attempts}",
             f"- Conditional on ≥1 non-infra attempt: {budget.successes}/{budget.executed_instances} = "
             f"{_pct(budget.conditional_rate)} (secondary)", ""]
    if summary.pass_k:
        lines += ["| k | instances with n ≥ k | mean pass@k | mean pass^k |", "|---:|---:|---:|---:|"]
        lines += [f"| {row.k} | {row.instances} | {_pct(row.pass_at_k)} | {_pct(row.pass_hat_k)} |"
                  for row in summary.pass_k]
        lines.append("")
    cost_note = "" if costs.cost_complete else f" (cost known for {costs.attempts_with_cost}/{costs.attempts} attempts)"
    per_attempt = "n/a" if costs.cost_per_attempt is None else f"{costs.cost_per_attempt:.4g}"
    per_solved = "n/a" if costs.cost_per_solved_instance is None else f"{costs.cost_per_solved_instance:.4g}"
    total = "n/a" if costs.total_cost is None else f"{costs.total_cost:.4g}"
    lines += [f"- Cost: total {total}{cost_note}; per attempt {per_attempt}; "
              f"per solved instance {per_solved} ({costs.solved_instances} solved by any attempt)",
              f"- Calls: total {costs.total_calls}" + ("" if costs.calls_complete else " (some attempts did not report calls)"),
              ""]
    return lines


def _claims_md(result: ClaimsComparison) -> list[str]:
    t = result.agreement
    lines = [f"# Claims vs reproduction: {result.run_id}", "",
             f"- Run: `{result.run_dir}`",
             f"- Claims: `{result.claims_path}`" + (f" — {result.submission}" if result.submission else ""),
             f"- Denominator: {result.denominator_note}", "",
             "| | resolved | rate (95% Wilson CI) |", "|---|---:|---|",
             f"| claimed | {result.claimed.successes}/{result.denominator} | {_rate_line(result.claimed)} |",
             f"| reproduced | {result.reproduced.successes}/{result.denominator} | {_rate_line(result.reproduced)} |", "",
             "## Agreement", "",
             "| | reproduced resolved | reproduced unresolved |", "|---|---:|---:|",
             f"| claimed resolved | {t.both_resolved} | {t.first_only} |",
             f"| claimed unresolved | {t.second_only} | {t.neither} |", "",
             f"McNemar exact p = {_p(result.mcnemar_p)} (discordant: {t.first_only} claimed only, "
             f"{t.second_only} reproduced only)", ""]
    lines += [f"## Discordant instances ({len(result.discordant)})", ""]
    if result.discordant:
        header = "| instance | claimed | reproduced | claim detail |"
        rule = "|---|---|---|---|"
        if result.validity_path:
            header += " reference control |"
            rule += "---|"
        lines += [header + " harness reason |", rule + "---|"]
        for d in result.discordant:
            detail = ", ".join(f"{k}={v}" for k, v in sorted(d.claim_detail.items()) if k != "resolved") or d.claim_list
            row = (f"| {_cell(d.instance_id)} | {'resolved' if d.claimed_resolved else d.claim_list} | "
                   f"{'resolved' if d.reproduced_resolved else 'unresolved'} | {_cell(detail)} |")
            if result.validity_path:
                row += f" {d.reference_control} |"
            reason = d.evidence.reason(limit=5) if (d.evidence and not d.reproduced_resolved) else d.reason
            lines.append(row + f" {_cell(reason)} |")
        lines.append("")
    else:
        lines += ["None.", ""]
    if result.validity_path:
        lines += [f"## Reference control failed ({len(result.reference_control_failed)}) — still in the denominator", ""]
        lines += [f"- {_cell(f.instance_id)}: claimed {'resolved' if f.claimed_resolved else 'unresolved'}, "
                  f"reproduced {'resolved' if f.reproduced_resolved else 'unresolved'}"
                  for f in result.reference_control_failed] or ["None."]
        if result.reference_control_unknown:
            lines.append(f"- No validity entry for: {', '.join(result.reference_control_unknown)}")
        lines.append("")
    if result.not_in_run:
        lines += [f"Not in the run (counted unresolved): {', '.join(result.not_in_run)}", ""]
    if result.claimed_no_prediction:
        lines += [f"Vendor had no prediction (counted claimed-unresolved): {', '.join(result.claimed_no_prediction)}", ""]
    if result.extra_in_run:
        lines += [f"In the run but outside the claim universe (not counted): {', '.join(result.extra_in_run)}", ""]
    lines += _attempts_md(result.run_id, result.attempts)
    return lines


def _runs_md(result: RunsComparison) -> list[str]:
    t = result.agreement
    d = result.difference
    lines = [f"# Run comparison: {result.run_a.run_id} (A) vs {result.run_b.run_id} (B)", "",
             f"- A: `{result.run_a.run_dir}`" + (f" — {result.run_a.model_name_or_path}" if result.run_a.model_name_or_path else ""),
             f"- B: `{result.run_b.run_dir}`" + (f" — {result.run_b.model_name_or_path}" if result.run_b.model_name_or_path else ""),
             f"- Denominator: {result.denominator_note}"
             + (f"; only in A (not counted): {len(result.only_in_a)}" if result.only_in_a else "")
             + (f"; only in B (not counted): {len(result.only_in_b)}" if result.only_in_b else ""), "",
             "| run | resolved | rate (95% Wilson CI) |", "|---|---:|---|",
             f"| A | {result.rate_a.successes}/{result.shared} | {_rate_line(result.rate_a)} |",
             f"| B | {result.rate_b.successes}/{result.shared} | {_rate_line(result.rate_b)} |", "",
             f"- Difference B − A: {_pp(d.difference)} (paired bootstrap 95% CI {_pp(d.ci_low)} to {_pp(d.ci_high)}; "
             f"{d.iterations} resamples of instances, seed {d.seed})",
             f"- McNemar exact p = {_p(result.mcnemar_p)}",
             f"- Flips: {result.fixed_in_b} fixed in B, {result.broken_in_b} broken in B; "
             f"flip rate {_pct(result.flip_rate)} of {result.shared}; net flip rate {_pp(result.net_flip_rate)}", "",
             "## Agreement", "",
             "| | B resolved | B unresolved |", "|---|---:|---:|",
             f"| A resolved | {t.both_resolved} | {t.first_only} |",
             f"| A unresolved | {t.second_only} | {t.neither} |", "",
             f"## Flipped instances ({len(result.flips)})", ""]
    if result.flips:
        lines += ["| instance | direction | A | B |", "|---|---|---|---|"]
        for flip in result.flips:
            lines.append(f"| {_cell(flip.instance_id)} | {flip.direction} | {_cell(flip.reason_a)} | {_cell(flip.reason_b)} |")
        lines.append("")
    else:
        lines += ["None.", ""]
    lines += ["## Per repository", "",
              "| repository | instances | A | B | B − A | fixed | broken |", "|---|---:|---:|---:|---:|---:|---:|"]
    for s in result.repo_slices:
        lines.append(f"| {_cell(s.repo)} | {s.instances} | {s.resolved_a} ({_pct(s.rate_a)}) | "
                     f"{s.resolved_b} ({_pct(s.rate_b)}) | {_pp(s.difference)} | {s.fixed_in_b} | {s.broken_in_b} |")
    for avg in (result.macro_average, result.micro_average):
        lines.append(f"| **{avg.kind} average** — {_cell(avg.denominator_note)} | | {_pct(avg.rate_a)} | "
                     f"{_pct(avg.rate_b)} | {_pp(avg.difference)} | | |")
    lines.append("")
    lines += _attempts_md(f"A ({result.run_a.run_id})", result.attempts_a)
    lines += _attempts_md(f"B ({result.run_b.run_id})", result.attempts_b)
    return lines


def render_markdown(result: Result) -> str:
    """Markdown report of a comparison (same numbers as :func:`to_dict`)."""
    if isinstance(result, ClaimsComparison):
        lines = _claims_md(result)
    elif isinstance(result, RunsComparison):
        lines = _runs_md(result)
    else:
        raise TypeError(f"render_markdown: unsupported result {type(result).__name__}")
    if result.warnings:
        lines += ["## Warnings", ""] + [f"- {_cell(w)}" for w in result.warnings] + [""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _atomic_write(path: Path, text: str) -> None:
    # Temp file in the same directory so os.replace is an atomic rename on one filesystem.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_outputs(result: Result, out_dir: str | os.PathLike[str], stem: str) -> tuple[Path, Path]:
    """Write ``<stem>.json`` and ``<stem>.md`` into ``out_dir`` atomically; return both paths.

    Raises:
        InputError (ValueError): ``stem`` contains a path separator.
        OSError: the directory cannot be created or written.
    """
    if not stem or "/" in stem or "\\" in stem or stem in (".", ".."):
        raise InputError(f"output stem {stem!r} must be a plain file name", field="stem")
    directory = Path(out_dir)
    directory.mkdir(parents=True, exist_ok=True)
    json_path, md_path = directory / f"{stem}.json", directory / f"{stem}.md"
    _atomic_write(json_path, json.dumps(to_dict(result), indent=2, sort_keys=True) + "\n")
    _atomic_write(md_path, render_markdown(result))
    return json_path, md_path


# =========================================================================== CLI


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "run"


def add_compare_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``compare`` subcommand to an ``argparse`` subparsers object.

    Sets ``func=run_compare`` as the parser default, so a top-level CLI can dispatch with
    ``return args.func(args)``.
    """
    parser = subparsers.add_parser(
        "compare", help="compare a run with another run or with claimed verdicts",
        description="Compare saved run directories (no Docker needed). With RUN_B: paired comparison of B "
                    "against RUN. With --claimed: RUN against a vendor's claimed verdicts. Results are "
                    "written as <stem>.json and <stem>.md into RUN (or --output-dir) and printed.")
    parser.add_argument("run", metavar="RUN", help="run directory (runs/<run_id>)")
    parser.add_argument("run_b", metavar="RUN_B", nargs="?", help="second run directory to compare against RUN")
    parser.add_argument("--claimed", metavar="FILE", help="claimed verdicts (vendor-*.results.json shape)")
    parser.add_argument("--validity", metavar="FILE",
                        help="validity report with instances.<id>.reference_full (needs --claimed)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--output-dir", metavar="DIR", help="where to write outputs (default: RUN)")
    parser.add_argument("--budget-attempts", type=int, metavar="K",
                        help="repeated attempts: count successes only within the first K attempts")
    parser.add_argument("--budget-calls", type=int, metavar="B",
                        help="repeated attempts: count successes only while cumulative calls stay <= B")
    parser.set_defaults(func=run_compare)
    return parser


def run_compare(args: argparse.Namespace) -> int:
    """Handler for ``harness compare``: returns 0 on success, 2 on bad input (message on stderr)."""
    try:
        if args.run_b is None and args.claimed is None:
            raise InputError("give RUN_B (run comparison) or --claimed FILE (claims comparison)", field="RUN_B/--claimed")
        if args.validity is not None and args.claimed is None:
            raise InputError("--validity only applies together with --claimed", field="--validity")
        budget = {"max_attempts": getattr(args, "budget_attempts", None),
                  "max_calls": getattr(args, "budget_calls", None)}
        out_dir = Path(args.output_dir) if args.output_dir else Path(args.run)
        outputs: list[tuple[Result, str]] = []
        if args.claimed is not None:
            result = compare_with_claims(args.run, args.claimed, args.validity, **budget)
            claims_name = Path(args.claimed).name.removesuffix(".json").removesuffix(".results")
            outputs.append((result, f"compare-claims-{_slug(claims_name)}"))
        if args.run_b is not None:
            result = compare_runs(args.run, args.run_b, seed=args.seed, **budget)
            outputs.append((result, f"compare-{_slug(result.run_a.run_id)}-vs-{_slug(result.run_b.run_id)}"))
        for result, stem in outputs:
            json_path, md_path = write_outputs(result, out_dir, stem)
            print(render_markdown(result))
            print(f"wrote {json_path} and {md_path}")
    except ValueError as exc:
        print(f"harness compare: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"harness compare: cannot write outputs: {exc}", file=sys.stderr)
        return 1
    return 0
