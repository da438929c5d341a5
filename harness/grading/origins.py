"""Who an INVALID run is charged to, from the evidence rather than the reason alone.

Each :class:`~harness.grading.status.ErrorReason` has a default origin (``model``,
``instance`` or ``harness``). Evidence overrides the ``model`` default:

* the **reference patch** (a prediction byte-identical to the instance's own patch) has no
  model behind it: a patch that does not apply or is rejected is the instance's fault;
  anything else (no results, nothing collected, a collection error, a timeout, ...) is the
  environment's, i.e. the harness's;
* with a **reference control** (``--control``), a model run that fails the same way as the
  control did (same reason; for collection errors, no file the control collected) is the
  environment's too, not the model's.

Pure.
"""

from __future__ import annotations

from typing import Iterable

from harness.grading.status import ErrorReason

#: Reasons a broken environment produces as readily as a broken patch.
ENVIRONMENT_SUSPECT = frozenset({ErrorReason.SUITE_DID_NOT_RUN, ErrorReason.COLLECTION_ERROR,
                                 ErrorReason.TIMEOUT, ErrorReason.OUTPUT_LIMIT_EXCEEDED})


def evidence_origin(reason: ErrorReason | None, *, reference_patch: bool = False) -> str | None:
    """The origin of ``reason`` for a run of the reference patch or of a model's patch."""
    if reason is None:
        return None
    if reason.origin != "model" or not reference_patch:
        return reason.origin
    if reason in (ErrorReason.PATCH_REJECTED, ErrorReason.PATCH_APPLY_FAILED):
        return "instance"
    return "harness"


def same_failure_as_control(reason: ErrorReason | None, control_reason: ErrorReason | None,
                            collection_errors: Iterable[str] = (),
                            control_collection_errors: Iterable[str] = ()) -> bool:
    """Whether a model run failed the way its reference control failed (so the failure
    says nothing about the model)."""
    if reason is None or reason is not control_reason or reason not in ENVIRONMENT_SUSPECT:
        return False
    if reason is ErrorReason.COLLECTION_ERROR:
        return set(collection_errors) <= set(control_collection_errors)
    return True
