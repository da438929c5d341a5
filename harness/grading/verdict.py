"""The final verdict from the evidence, for the live run and ``harness report`` alike.

Once a run's results are judged (:func:`harness.integrity.judge.judge_run`), two rules
remain, and both callers apply them through :func:`final_verdict` in the same order:

* **origin**: an INVALID result is charged by the evidence, not by its reason alone
  (:func:`settle_origin`, :mod:`harness.grading.origins`): a run of the reference patch
  has no model behind it;
* **control**: what the reference-patch control of the same instance showed
  (:func:`apply_control`, facts from :mod:`harness.results.control`): a model run that failed the
  way the control failed is not charged to the model (``failed_like_control``); one that
  collected fewer graded tests than the control is flagged (``collected_fewer_than_control``).

The live run settles the origin as each evaluation ends (:mod:`harness.evaluation.evaluator`) and
calls :func:`final_verdict` when the driver records the result (:mod:`harness.run.batch`),
with the control's facts; ``harness report`` (:mod:`harness.evaluation.regrade`) calls it with the
facts the report recorded. Pure: it reads and changes the result only, through the
fields :class:`Judged` names (:class:`harness.results.report.InstanceResult` has them), so the
rules need nothing from the layers that build or store results.
"""

from __future__ import annotations

from typing import Any, Protocol

from harness.grading.origins import evidence_origin, same_failure_as_control
from harness.grading.status import ErrorReason, InstanceStatus

#: flags and details apply_control decides (cleared before it decides them again)
CONTROL_FLAGS = ("failed_like_control", "collected_fewer_than_control")
CONTROL_DETAILS = ("control_error_reason", "control_collected", "not_collected_but_in_control")


class Judged(Protocol):
    """The fields of a judged result the two rules read and set."""

    status: InstanceStatus
    error_reason: ErrorReason | None
    origin: str | None
    collected: list[str]
    integrity_flags: list[str]
    integrity_details: dict[str, Any]


def final_verdict(result: Judged, *, reference: bool, control: dict | None) -> None:
    """Settle ``result``'s origin by the evidence, then judge it against its control's
    facts (when it has a control)."""
    settle_origin(result, reference)
    if control is not None:
        apply_control(result, control)


def settle_origin(result: Judged, reference_patch: bool) -> None:
    """Charge an INVALID result by the evidence (:mod:`harness.grading.origins`)."""
    origin = evidence_origin(result.error_reason, reference_patch=reference_patch)
    result.origin = origin if result.error_reason and origin != result.error_reason.origin else None


def apply_control(result: Judged, facts: dict) -> None:
    """Flag ``result`` and settle its origin against the control's ``facts`` (see the module docstring)."""
    result.integrity_flags = [f for f in result.integrity_flags if f not in CONTROL_FLAGS]
    for key in CONTROL_DETAILS:
        result.integrity_details.pop(key, None)
    try:
        control_reason = ErrorReason(facts["error_reason"]) if facts.get("error_reason") else None
    except ValueError:
        control_reason = None
    if same_failure_as_control(result.error_reason, control_reason,
                               result.integrity_details.get("collection_errors", []),
                               facts.get("collection_errors") or []):
        failed = result.error_reason  # same_failure_as_control holds only for one shared, non-None reason
        assert failed is not None and control_reason is not None
        result.origin = "harness" if failed.origin != "harness" else None
        result.integrity_flags.append("failed_like_control")
        result.integrity_details["control_error_reason"] = control_reason.value
        return
    # an INVALID run's collected list means nothing, except when the reason is that graded
    # tests were never collected (a test module stopped importing): compare that one too
    collection_error = result.error_reason is ErrorReason.COLLECTION_ERROR
    if not facts.get("collected_any") or (result.status is InstanceStatus.INVALID and not collection_error):
        return
    collected = set(facts.get("collected") or ())
    lost = sorted(collected - set(result.collected))
    result.integrity_details["control_collected"] = len(collected)
    if lost:
        result.integrity_flags.append("collected_fewer_than_control")
        result.integrity_details["not_collected_but_in_control"] = lost[:50]
