"""The run report: everything the run's page shows, as one typed value.

:func:`build_run_report` turns a loaded :class:`~harness.results.run_data.RunData` into a
:class:`RunReport`; the JSON, Markdown and HTML views render that value and compute no
figure of their own.  Denominators:

* the resolved rate is over **every instance of the run** (``summary.json``'s
  ``total_instances``: instances without a prediction, and errors, included), with a
  Wilson interval;
* each repository's rate is over that repository's instances of the run;
* phase statistics are over the instances whose report recorded that phase;
* an agent run's metric vector (``agent``) is :mod:`harness.results.agent_metrics`'s, over
  every instance of the run (the same figures as ``summary.json``'s ``agent`` block).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.results import stats
from harness.results.agent_metrics import AgentMetrics, agent_metrics
from harness.results.claims_vs_run import attempt_summary
from harness.results.comparison import RateWithInterval, rate_with_interval
from harness.results.flag_meanings import flag_meaning, is_note, split_flags
from harness.results.run_data import UNREADABLE, InstanceOutcome, RunData, load_run, repo_of

__all__ = ["STATUS_ORDER", "RepoRow", "OriginRow", "FlagRow", "PhaseStats", "InstanceRow", "RunReport",
           "build_run_report", "load_run_report", "instance_status", "run_agent_metrics"]

#: Verdicts first, then the states of instances that have no verdict.
STATUS_ORDER = ("FULL", "PARTIAL", "NO", "INVALID", "UNREADABLE", "NO_REPORT", "NO_PREDICTION")
_ORIGIN_ORDER = ("model", "instance", "harness", "unknown")
# Timings that are sums of the phases, not phases.
_TOTALS = ("total", "wall")


@dataclass(frozen=True)
class RepoRow:
    """One repository: its rate (over its instances of the run) and status counts."""

    repo: str
    rate: RateWithInterval
    status_counts: Mapping[str, int]
    errors: int
    flagged: int   # instances with a flag (notes not counted: harness/results/flag_meanings.py)


@dataclass(frozen=True)
class OriginRow:
    """Instances with an error reason of one origin (model, instance, harness), by reason."""

    origin: str
    instances: int
    reasons: Mapping[str, int]


@dataclass(frozen=True)
class FlagRow:
    """An integrity flag and the instances that carry it; ``note``: it is a note (what
    happened on an honest path, nothing against the run), not a flag."""

    flag: str
    instance_ids: tuple[str, ...]
    note: bool = False
    meaning: str = ""


@dataclass(frozen=True)
class PhaseStats:
    """Seconds spent in one phase over the ``instances`` whose report recorded it
    (quartiles by linear interpolation)."""

    phase: str
    instances: int
    total: float
    minimum: float
    q1: float
    median: float
    q3: float
    maximum: float


@dataclass(frozen=True)
class InstanceRow:
    """One line of the instance table (the main report: the first attempt when there are several)."""

    instance_id: str
    repo: str
    status: str
    resolved: bool
    error_reason: str | None
    error_origin: str | None
    reason: str
    f2p_passed: int
    f2p_total: int
    p2p_passed: int
    p2p_total: int
    missing: int
    flags: tuple[str, ...]        # the report's integrity flags that are flags ...
    notes: tuple[str, ...]        # ... and those that are notes (harness/results/flag_meanings.py)
    seconds: float | None
    attempts: int
    attempts_resolved: int
    page: str | None  # URL path relative to the run directory


@dataclass(frozen=True)
class RunReport:
    """A run as its page shows it (``kind`` = ``run_report``)."""

    kind: str
    run_id: str
    run_dir: str
    model_name_or_path: str | None
    instances_file: str | None
    predictions: str | None
    harness_version: str | None
    resolved: RateWithInterval
    counts: Mapping[str, int]
    status_counts: Mapping[str, int]
    repos: tuple[RepoRow, ...]
    origins: tuple[OriginRow, ...]
    integrity: tuple[FlagRow, ...]
    phases: tuple[PhaseStats, ...]
    instances: tuple[InstanceRow, ...]
    input_errors: Mapping[str, str]
    attempts: stats.AttemptSummary | None
    warnings: tuple[str, ...]
    #: the agent run's metric vector (None: no agent field and no repeated attempt)
    agent: AgentMetrics | None = None


def run_agent_metrics(run: RunData, ids: Sequence[str]) -> AgentMetrics | None:
    """The metric vector of ``run`` over the instances ``ids`` (every instance of the run
    for its page, the shared ones for a comparison); an id the run lacks has no attempt."""
    numbered = {i: dict(enumerate(run.outcomes[i].attempts, start=1)) for i in ids if i in run.outcomes}
    repos = {i: run.outcomes[i].repo if i in run.outcomes else repo_of(i) for i in ids}
    return agent_metrics(numbered, ids, repos, has_attempts=run.has_attempts)


def instance_status(outcome: InstanceOutcome) -> str:
    """The verdict, or ``NO_PREDICTION`` / ``NO_REPORT`` for an instance without a report."""
    if outcome.evidence.status:
        return outcome.evidence.status
    if any(note.startswith(UNREADABLE) for note in outcome.evidence.notes):
        return "UNREADABLE"
    return "NO_PREDICTION" if "no_prediction" in outcome.evidence.notes else "NO_REPORT"


def _ordered_counts(values: Sequence[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    known = [s for s in STATUS_ORDER if s in counts]
    return {s: counts[s] for s in known + sorted(set(counts) - set(known))}


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def _phases(outcomes: Sequence[InstanceOutcome]) -> tuple[PhaseStats, ...]:
    samples: dict[str, list[float]] = {}
    for outcome in outcomes:
        if outcome.figures is None:
            continue
        for phase, seconds in outcome.figures.timings:
            if phase != "wall":
                samples.setdefault(phase, []).append(seconds)
    # Phases in the order reports record them, the total last.
    order = [p for p in samples if p not in _TOTALS] + [p for p in _TOTALS if p in samples]
    rows = []
    for phase in order:
        values = sorted(samples[phase])
        rows.append(PhaseStats(phase=phase, instances=len(values), total=math.fsum(values), minimum=values[0],
                               q1=_quantile(values, 0.25), median=_quantile(values, 0.5),
                               q3=_quantile(values, 0.75), maximum=values[-1]))
    return tuple(rows)


def _origin_of(instance_id: str, outcome: InstanceOutcome, by_origin: Mapping[str, object]) -> str:
    if outcome.evidence.error_origin:
        return outcome.evidence.error_origin
    for origin, ids in by_origin.items():
        if isinstance(ids, list) and instance_id in ids:
            return str(origin)
    return "unknown"


def _row(outcome: InstanceOutcome, status: str, origin: str | None) -> InstanceRow:
    figures = outcome.figures
    flags, notes = split_flags(outcome.evidence.integrity_flags)
    return InstanceRow(
        instance_id=outcome.instance_id, repo=outcome.repo, status=status, resolved=outcome.resolved,
        error_reason=outcome.evidence.error_reason, error_origin=origin,
        reason="" if outcome.resolved else outcome.evidence.reason(limit=3),
        f2p_passed=figures.f2p_passed if figures else 0, f2p_total=figures.f2p_total if figures else 0,
        p2p_passed=figures.p2p_passed if figures else 0, p2p_total=figures.p2p_total if figures else 0,
        missing=len(outcome.evidence.missing), flags=flags, notes=notes,
        seconds=figures.seconds if figures else None, attempts=len(outcome.attempts) if figures else 0,
        attempts_resolved=sum(a.success for a in outcome.attempts) if figures else 0, page=outcome.page)


def build_run_report(run: RunData) -> RunReport:
    """The run report of a loaded run (pure)."""
    summary = run.summary
    outcomes = [run.outcomes[i] for i in sorted(run.outcomes)]
    by_origin = summary.get("errors_by_origin") if isinstance(summary.get("errors_by_origin"), dict) else {}
    statuses = {o.instance_id: instance_status(o) for o in outcomes}
    origins_of = {o.instance_id: _origin_of(o.instance_id, o, by_origin) for o in outcomes if o.evidence.error_reason}
    rows = tuple(_row(o, statuses[o.instance_id], origins_of.get(o.instance_id)) for o in outcomes)

    total = summary.get("total_instances")
    if not isinstance(total, int) or isinstance(total, bool) or total < len(outcomes):
        total = len(outcomes)
    resolved = sum(o.resolved for o in outcomes)
    note = (f"all {total} instances of the run (instances without a prediction, and errors, count as "
            "unresolved)")

    def listed(key: str) -> int:
        value = summary.get(key)
        return len(value) if isinstance(value, list) else 0

    counts = {"total": total, "submitted": listed("submitted_ids"), "completed": listed("completed_ids"),
              "resolved": resolved,
              # A summary/report disagreement (warned about) moves an id from resolved to unresolved.
              "unresolved": listed("unresolved_ids") + max(0, listed("resolved_ids") - resolved),
              "error": listed("error_ids"), "empty_patch": listed("empty_patch_ids"),
              "no_prediction": listed("no_prediction_ids"), "invalid": listed("invalid_ids")}

    by_repo: dict[str, list[InstanceOutcome]] = {}
    for outcome in outcomes:
        by_repo.setdefault(outcome.repo, []).append(outcome)
    error_ids = set(summary.get("error_ids") or [])
    repos = tuple(RepoRow(
        repo=repo,
        rate=rate_with_interval(repo, sum(o.resolved for o in members), len(members),
                                f"the {len(members)} instances of {repo} in the run"),
        status_counts=_ordered_counts([statuses[o.instance_id] for o in members]),
        errors=sum(1 for o in members if o.instance_id in error_ids),
        flagged=sum(1 for o in members if not all(map(is_note, o.evidence.integrity_flags)))) for repo, members in sorted(by_repo.items()))

    origin_reasons: dict[str, dict[str, int]] = {}
    for instance_id, origin in origins_of.items():
        reason = run.outcomes[instance_id].evidence.error_reason or "unknown"
        bucket = origin_reasons.setdefault(origin, {})
        bucket[reason] = bucket.get(reason, 0) + 1
    origins = tuple(OriginRow(origin=o, instances=sum(origin_reasons[o].values()),
                              reasons=dict(sorted(origin_reasons[o].items())))
                    for o in [*_ORIGIN_ORDER, *sorted(set(origin_reasons) - set(_ORIGIN_ORDER))]
                    if o in origin_reasons)

    flags: dict[str, list[str]] = {}
    for outcome in outcomes:
        for flag in outcome.evidence.integrity_flags:
            flags.setdefault(flag, []).append(outcome.instance_id)
    input_errors = summary.get("input_errors") if isinstance(summary.get("input_errors"), dict) else {}

    def text(key: str) -> str | None:
        value = summary.get(key)
        return value if isinstance(value, str) else None

    return RunReport(
        kind="run_report", run_id=run.run_id, run_dir=run.path, model_name_or_path=run.model_name_or_path,
        instances_file=text("instances_file"), predictions=text("predictions"),
        harness_version=text("harness_version"),
        resolved=rate_with_interval("resolved", resolved, total, note) if total else
        rate_with_interval("resolved", 0, 0, "the run has no instance"),
        counts=counts, status_counts=_ordered_counts(list(statuses.values())), repos=repos, origins=origins,
        integrity=tuple(FlagRow(flag, tuple(ids), is_note(flag), flag_meaning(flag))
                        for flag, ids in sorted(flags.items(), key=lambda item: (is_note(item[0]), item[0]))),
        phases=_phases(outcomes), instances=rows,
        input_errors={str(k): str(v) for k, v in input_errors.items()},
        attempts=attempt_summary(run, sorted(run.outcomes), None, None),
        warnings=run.warnings, agent=run_agent_metrics(run, sorted(run.outcomes)))


def load_run_report(run_dir: str | os.PathLike[str]) -> RunReport:
    """Read a run directory and build its report (a malformed instance report is shown
    as ``UNREADABLE`` with its reason, not fatal).

    Raises:
        InputError (ValueError): as :func:`~harness.results.run_data.load_run`.
    """
    return build_run_report(load_run(run_dir, strict=False))
