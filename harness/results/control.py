"""What a run takes from its reference-patch control (``harness run --control RUN_DIR``).

The control's report is read once, when the run records an instance (:func:`control_facts`);
the facts grading needs are kept in the run's own report (``integrity.control``), so that
``harness report`` re-grades with exactly what the run saw, even when the control
directory has moved or been re-graded since. :func:`harness.grading.verdict.apply_control`
is the one place that turns those facts into flags and an origin, for the live run and the
re-grade alike:

* a model run that failed the way the control failed is not charged to the model
  (:func:`harness.grading.origins.same_failure_as_control`): flag ``failed_like_control``;
* a run that collected fewer graded tests than the control did is flagged
  (``collected_fewer_than_control``);
* the graded tests the control skipped (``skipped``) are what grading may keep as
  SKIPPED even when the code under test raised the skip (harness/grading/grade.py);
* the graded tests the control showed with an outcome their pristine source does not
  declare (``undeclared``, only from a finished run of the reference patch): the same
  outcome in the run is the environment's (harness/integrity/judge.py);
* the control's canary seed and what it proved of each canary (``canaries``): the run
  plants the same canaries and drops those the control disproved
  (harness/integrity/canaries/judge.py). Only a run of the instance's own reference patch
  proves anything: a control whose patch is another is ignored for canaries.
"""

from __future__ import annotations

from pathlib import Path

from harness.integrity.canaries import proof_from
from harness.inputs.instances import Instance
from harness.paths import InstanceFiles
from harness.results.report import InstanceResult, load_report



def control_facts(instance: Instance, control_dir: Path) -> dict | None:
    """The facts of the control's report of ``instance`` that grading uses, or None when
    the control has no (readable) report for it. Bounded by the instance's test lists."""
    files = InstanceFiles(Path(control_dir) / instance.instance_id)
    control = load_report(files.report)
    if control is None:
        return None
    graded = {*instance.fail_to_pass, *instance.pass_to_pass}
    outcomes = control.integrity_details.get("skipped_or_xfailed") or {}
    skipped = sorted(t for t, s in outcomes.items() if s == "SKIPPED") if isinstance(outcomes, dict) else []
    return {"run_dir": str(control_dir), "error_reason": control.error_reason.value if control.error_reason else None,
            "collection_errors": list(control.integrity_details.get("collection_errors") or [])[:50],
            "skipped": skipped, "collected_any": bool(control.collected),
            "collected": sorted(graded & set(control.collected)), "canaries": _canary_facts(control, files, instance),
            "undeclared": _undeclared_facts(control, files, instance, graded)}


def _undeclared_facts(control: InstanceResult, files: InstanceFiles, instance: Instance,
                      graded: set[str]) -> dict[str, str] | None:
    """The graded tests the control showed with an outcome their pristine source does not
    declare (harness/integrity/judge.py), when the control ran the reference patch to the
    end and read the declarations; None otherwise (nothing known)."""
    shown = control.integrity_details.get("outcome_undeclared")
    if control.error_reason is not None or "declared" not in control.integrity_details and shown is None:
        return None
    try:
        reference = files.patch.read_text(encoding="utf-8", errors="surrogateescape") == instance.patch
    except OSError:
        reference = False
    if not reference:
        return None
    return {str(k): str(v) for k, v in (shown or {}).items() if k in graded} if isinstance(shown or {}, dict) else None


def _canary_facts(control: InstanceResult, files: InstanceFiles, instance: Instance) -> dict | None:
    """The control's canary seed and proofs, when the control ran the reference patch."""
    seed = control.integrity_details.get("canary_seed")
    patch = files.patch
    try:
        reference = patch.read_text(encoding="utf-8", errors="surrogateescape") == instance.patch
    except OSError:
        reference = False
    if not reference or not isinstance(seed, int) or isinstance(seed, bool):
        return None
    perturbed = control.integrity_details.get("perturbed_run")
    return {"seed": seed, "proof": proof_from(control.integrity_details.get("canaries") or []),
            "perturbations": proof_from((perturbed or {}).get("perturbations") or [])
            if isinstance(perturbed, dict) else {}}


def recorded_facts(result: InstanceResult) -> dict | None:
    """The control facts a report carries. Reports written before the facts were recorded
    keep what they can: the control's reason, when the run was found to fail like it."""
    facts = result.integrity_details.get("control")
    if isinstance(facts, dict):
        return facts
    if "failed_like_control" in result.integrity_flags and result.integrity_details.get("control_error_reason"):
        return {"error_reason": result.integrity_details["control_error_reason"],
                "collection_errors": list(result.integrity_details.get("collection_errors") or [])}
    return None


def record_control(result: InstanceResult, instance: Instance, control_dir: Path) -> dict | None:
    """The control's facts of ``instance``, recorded in ``result`` (``integrity.control``)
    for the final verdict and any re-grade; None when the control has no report of it."""
    facts = control_facts(instance, control_dir)
    if facts is not None:
        result.integrity_details["control"] = facts
    return facts
