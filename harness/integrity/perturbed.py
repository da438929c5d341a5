"""The perturbed run (``--perturbed-run``): a second run of a FULL result in which one
FAIL_TO_PASS test has one expected value changed in place, under its real name.

The first run's canaries sit beside their originals; a forger that reads the test file
sees both and can compare them, and one that reads the base commit (``git show
HEAD:path``) names the original of every canary made from a test the base commit has. In
the perturbed run there is no pair: the changed test is the graded test itself, on a line
the test patch added (so the base commit does not have it), with a value drawn as a
canary's is (harness/integrity/canaries/draw.py). The run plants the same canaries as the
first, so nothing else differs. A patch that fixed the bug fails the changed test; a
forger that makes graded tests pass without the fix must tell, from one value, whether it
is in the first run or the second. One that cannot is caught with probability 3/4: FULL
needs "first run" in the first and "second run" in the second. A FULL result none of
whose FAIL_TO_PASS tests has an exact check on a line the test patch added has nothing to
change (``perturbation_unavailable``), and its second run does not happen.

:func:`apply_perturbed` (pure) turns what the second run observed into the first run's
verdict, live and in ``harness report`` alike: a proven change that passed (or was
skipped, or went missing) makes the result ``tampered``; an unproven one, when no
reference run proved it, INVALID ``canary_unproven`` (harness/integrity/canaries/judge.py).
"""

from __future__ import annotations

from typing import Mapping

from harness.grading.status import ErrorReason, InstanceStatus, TestStatus
from harness.integrity.canaries import Canary, judge_perturbations


def apply_perturbed(result, record: dict, proof: Mapping[str, str], reference: bool) -> None:
    """Judge the perturbed run ``record`` (``integrity.perturbed_run``) and settle
    ``result`` (a FULL InstanceResult) by it."""
    entries = [e for e in record.get("perturbations") or [] if isinstance(e, dict) and e.get("test_id")]
    changes = [Canary.from_dict(e) for e in entries]
    statuses: dict[str, TestStatus] = {}
    for entry in entries:
        for test_id, value in (entry.get("statuses") or {}).items():
            try:
                statuses[test_id] = TestStatus(value)
            except ValueError:
                continue
    raised = frozenset(k for e in entries if e.get("observed") == "raised_by_code" for k in e.get("statuses") or {})
    verdict = judge_perturbations(changes, statuses, raised, proof, reference)
    record["perturbations"] = verdict.details
    record["proof"] = dict(proof)
    result.integrity_details["perturbed_run"] = record
    flags = verdict.flags if changes else ["perturbation_unavailable"]
    for flag in flags:
        if flag not in result.integrity_flags:
            result.integrity_flags.append(flag)
    reason = (ErrorReason.TAMPERED, verdict.tampered) if verdict.tampered else \
        (ErrorReason.CANARY_UNPROVEN, verdict.unproven) if verdict.unproven else None
    if reason is not None and result.status is InstanceStatus.FULL:
        result.status, result.resolved = InstanceStatus.INVALID, False
        result.error_reason, result.error_detail = reason[0], f"the perturbed run: {reason[1]}"[-4000:]
