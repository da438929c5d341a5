"""Claims vs run: a vendor's claimed verdicts against a run of ours (pure analysis).

Denominators are fixed before outcomes are looked at: the claim file's universe when it
enumerates one, the run's instance set when it does not (see
:mod:`harness.results.claims`).  Instances the vendor did not predict, or that are
missing from our run, count as unresolved and are never dropped.  Controls are shown,
not subtracted: instances whose reference patch failed the validity control are listed
apart but stay in the denominator.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from harness.results import stats
from harness.results._io import read_json
from harness.results.claims import Claims, load_claims, load_validity
from harness.results.comparison import (ClaimsComparison, DiscordantInstance, ReferenceControlFailure,
                                        RepoDisagreement, agreement, rate_with_interval)
from harness.results.run_data import RunData, load_run, repo_of
from harness.results.vendor_tests import SideOutcomes, explain, load_defects, outcomes_of

__all__ = ["compare_with_claims", "attempt_summary"]


def attempt_summary(run: RunData, ids: Sequence[str], max_attempts: int | None,
                    max_calls: int | None) -> stats.AttemptSummary | None:
    """Repeated-attempt statistics over ``ids`` (None for a run without attempts)."""
    if not run.has_attempts or not ids:
        return None
    # Instances absent from the run stay in with zero attempts: they count against the
    # first-attempt and budget rates (denominator = every compared instance).
    return stats.summarize_attempts(
        {i: (run.outcomes[i].attempts if i in run.outcomes else ()) for i in ids},
        max_attempts=max_attempts, max_calls=max_calls)


def _universe(claims: Claims, run: RunData) -> tuple[tuple[str, ...], str, tuple[str, ...]]:
    """(universe, denominator note, claimed ids outside the universe)."""
    if claims.universe_explicit:
        universe = claims.universe
        note = (f"all {len(universe)} instances in the claim file's universe "
                f"({len(claims.resolved)} resolved + {len(claims.unresolved)} unresolved + "
                f"{len(claims.no_prediction)} no_prediction); no-prediction and missing instances count as unresolved")
        return universe, note, ()
    universe = tuple(sorted(run.outcomes))
    outside = tuple(sorted(set(claims.universe) - set(universe)))
    note = (f"the run's {len(universe)} instances: the claim file ({claims.format}) does not list every "
            f"unresolved instance, so each run instance it does not list as resolved counts as claimed unresolved"
            + (f"; {len(outside)} ids it names outside the run are not counted" if outside else ""))
    return universe, note, outside


def _side(run: RunData | None, instance_id: str) -> SideOutcomes | None:
    """One run's report of an instance, read for the per-test explanation."""
    outcome = run.outcomes.get(instance_id) if run else None
    if outcome is None or outcome.evidence.report_path is None:
        return None
    return outcomes_of(read_json(Path(outcome.evidence.report_path), "instance report"))


def compare_with_claims(run_dir: str | os.PathLike[str], claims_path: str | os.PathLike[str],
                        validity_path: str | os.PathLike[str] | None = None, *,
                        max_attempts: int | None = None, max_calls: int | None = None,
                        control_dir: str | os.PathLike[str] | None = None,
                        defects_path: str | os.PathLike[str] | None = None) -> ClaimsComparison:
    """Compare a run's verdicts with a vendor's claimed verdicts.

    Denominator of both rates: every instance of the universe (see the module
    docstring).  Claimed no-prediction instances count as claimed-unresolved; universe
    instances missing from the run count as reproduced-unresolved; none are dropped.  Run
    instances outside the universe are listed in ``extra_in_run`` and not counted.
    McNemar's exact p is over the discordant instances (b = claimed only, c = reproduced
    only).  With a validity report, instances whose ``reference_full`` is false are
    listed in ``reference_control_failed`` and stay in the denominator.

    ``max_attempts`` / ``max_calls`` set the budget for the repeated-attempt section
    (``None``: all recorded attempts, no call cap).

    Every discordant instance is explained test by test (:mod:`harness.results.vendor_tests`):
    the vendor's per-instance ``tests_status`` when the claims carry it (SWE-bench's
    per-instance reports), ours, and ``control_dir``'s (a run of the reference patches) when
    given; ``defects_path`` is the dataset-defects file (None: no recorded defect counts).

    Raises:
        InputError (ValueError): any input file is missing, malformed or lacks a field.
    """
    run = load_run(run_dir)
    claims = load_claims(claims_path)
    validity = load_validity(validity_path) if validity_path is not None else None
    control_run = load_run(control_dir, strict=False) if control_dir is not None else None
    defects = load_defects(defects_path)
    universe, note, outside = _universe(claims, run)
    claimed = {i: i in claims.resolved for i in universe}
    reproduced = {i: (i in run.outcomes and run.outcomes[i].resolved) for i in universe}

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
        why = explain(claimed[instance_id], outcomes_of(claims.per_instance.get(instance_id)),
                      _side(run, instance_id), _side(control_run, instance_id), defects.get(instance_id))
        discordant.append(DiscordantInstance(
            instance_id=instance_id,
            repo=outcome.repo if outcome else repo_of(instance_id),
            claimed_resolved=claimed[instance_id], reproduced_resolved=reproduced[instance_id],
            claim_list=claims.claim_list(instance_id),
            claim_detail=_brief(claims.per_instance.get(instance_id, {})),
            reason=reason, evidence=outcome.evidence if outcome else None,
            reference_control=control(instance_id), page=outcome.page if outcome else None,
            reason_class=why.reason_class, reason_classes=why.classes, explanation=why.explanation,
            tests=why.tests))
    agreeing = tuple(i for i in universe if claimed[i] == reproduced[i] and _tests_differ(
        outcomes_of(claims.per_instance.get(i)), _side(run, i))) if claims.format == "swebench_instance_reports" \
        else ()

    warnings = list(run.warnings) + list(claims.warnings)
    for instance_id, detail in sorted(claims.per_instance.items()):
        if isinstance(detail.get("resolved"), bool) and instance_id in claimed \
                and detail["resolved"] != claimed[instance_id]:
            warnings.append(f"{instance_id}: claims per_instance.resolved={detail['resolved']} contradicts the "
                            f"{claims.claim_list(instance_id)!r} list; the lists are used")

    by_repo: dict[str, list[str]] = {}
    for instance_id in universe:
        outcome = run.outcomes.get(instance_id)
        by_repo.setdefault(outcome.repo if outcome else repo_of(instance_id), []).append(instance_id)
    repos = tuple(RepoDisagreement(
        repo=repo, instances=len(ids), claimed_resolved=sum(claimed[i] for i in ids),
        reproduced_resolved=sum(reproduced[i] for i in ids),
        claimed_only=sum(1 for i in ids if claimed[i] and not reproduced[i]),
        reproduced_only=sum(1 for i in ids if reproduced[i] and not claimed[i])) for repo, ids in sorted(by_repo.items()))

    return ClaimsComparison(
        kind="claims_comparison", run_id=run.run_id, run_dir=run.path, claims_path=claims.path,
        submission=claims.submission, validity_path=str(validity_path) if validity_path is not None else None,
        denominator=len(universe), denominator_note=note,
        claimed=rate_with_interval("claimed", sum(claimed.values()), len(universe), note),
        reproduced=rate_with_interval("reproduced", sum(reproduced.values()), len(universe), note),
        agreement=agreement("claimed", "reproduced", claimed, reproduced, universe),
        mcnemar_p=stats.mcnemar_exact(
            sum(1 for i in universe if claimed[i] and not reproduced[i]),
            sum(1 for i in universe if reproduced[i] and not claimed[i])),
        discordant=tuple(discordant),
        claimed_no_prediction=tuple(sorted(claims.no_prediction & set(universe))),
        not_in_run=tuple(i for i in universe if i not in run.outcomes),
        extra_in_run=tuple(sorted(set(run.outcomes) - set(universe))),
        reference_control_failed=tuple(
            ReferenceControlFailure(i, claimed[i], reproduced[i]) for i in universe if control(i) == "failed"),
        reference_control_unknown=tuple(i for i in universe if control(i) == "unknown"),
        attempts=attempt_summary(run, universe, max_attempts, max_calls),
        warnings=tuple(warnings),
        claims_format=claims.format, claimed_outside_run=outside, repos=repos,
        reason_counts={c: sum(d.reason_class == c for d in discordant) for c in
                       dict.fromkeys(d.reason_class for d in discordant)},
        control_dir=str(control_dir) if control_dir is not None else None,
        defects_path=str(defects_path) if defects_path is not None else None,
        agreeing_with_test_differences=agreeing,
    )


def _brief(detail) -> dict:
    """A claim's details without the per-test lists (they are in ``tests``, compared)."""
    return {k: v for k, v in dict(detail).items() if k != "tests_status"}


def _tests_differ(vendor: SideOutcomes | None, ours: SideOutcomes | None) -> bool:
    return bool(vendor and ours and vendor.per_test and ours.per_test and vendor.tests != ours.tests)
