"""Every test's outcome in one evaluated instance, read back from its saved artefacts
(``harness instances derive``: harness/run/derive.py). No containers.

The run was graded by the one evaluation path (harness/evaluation/evaluator.py); this reads
its ``report.json``, ``instance.json``, ``test_output.txt`` and ``results.xml`` with the
same parser and id convention grading used (recorded in the report), keys each test by
the id the dataset spells it with (the convention's own form: a pytest id cut at its
first space, a sympy function's name, Django's printed label), and leaves out the
canaries the run planted. When several tests share one dataset id the worst status
stands, as in grading.

A run that is not evidence gives :class:`~harness.results.derivation.RunOutcomes` with
``invalid`` set, except the one INVALID run a derivation expects: without the fix, a test
module that does not import (the test patch uses what the fix adds) leaves its tests
uncollected, and those tests count as failing.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.evaluation.setup import test_files_of
from harness.grading.conventions import IdKind, get_convention
from harness.grading.parsers import ResultsTooLarge, RunArtefacts, get_parser
from harness.grading.reporter_parsers import junit_collection_errors, sympy_xpassed
from harness.grading.status import ErrorReason, InstanceStatus, TestStatus
from harness.inputs.instances import parse_instance
from harness.patches import patch_files
from harness.paths import InstanceFiles
from harness.results.derivation import RunOutcomes
from harness.results.report import InstanceResult

#: INVALID reasons a run without the fix may have and still be evidence, when collection
#: failed: nothing or not everything ran because a test module did not import
_UNCOLLECTED = frozenset({ErrorReason.SUITE_DID_NOT_RUN, ErrorReason.COLLECTION_ERROR})


def run_outcomes(instance_dir: Path, *, without_fix: bool) -> RunOutcomes:
    """Every test's outcome in the evaluated instance at ``instance_dir``."""
    files = InstanceFiles(Path(instance_dir))
    if not files.report.is_file():
        return RunOutcomes(invalid=f"no report at {files.report}")
    result = InstanceResult.from_report(json.loads(files.report.read_text(encoding="utf-8")))
    if result.status is InstanceStatus.INVALID and not (without_fix and result.error_reason in _UNCOLLECTED):
        return RunOutcomes(invalid=_why(result))
    if not files.instance_record.is_file():
        return RunOutcomes(invalid=f"no instance record at {files.instance_record}")
    instance = parse_instance(json.loads(files.instance_record.read_text(encoding="utf-8")),
                              source=str(files.instance_record), lists_required=False)
    output = files.test_output.read_bytes().decode("utf-8", "replace") if files.test_output.is_file() else ""
    junit = files.results_xml.read_bytes() if files.results_xml.is_file() else None
    test_files = test_files_of(patch_files(instance.test_patch), result.runner or "pytest")
    try:
        parsed = get_parser(result.parser or "pytest")(RunArtefacts(output=output, junit_xml=junit,
                                                                     known_files=tuple(test_files)))
    except ResultsTooLarge as exc:
        return RunOutcomes(invalid=f"results_over_limit: {exc}")
    if result.status is InstanceStatus.INVALID and not (parsed.collection_errors or junit_collection_errors(junit)):
        return RunOutcomes(invalid=_why(result))  # nothing ran, and not for want of an import
    convention = get_convention(result.id_convention or "pytest")
    canaries = {str(c.get("test_id")) for c in (result.integrity_details.get("canaries") or [])
                if isinstance(c, dict)}
    statuses: dict[str, TestStatus] = {}
    conflicts: set[str] = set()
    xpassed_natives = _xpassed(output) | (sympy_xpassed(output) if result.parser == "sympy" else set())
    xpassed: set[str] = set()
    for native, status in parsed.statuses.items():
        if native in canaries or native.split("[", 1)[0] in canaries:
            continue  # a canary, or one parametrisation of a canary cloned from a parametrised test
        spelled = convention.to_dataset(native, parsed.labels.get(native))
        if not spelled:
            continue
        test_id = spelled[-1]  # the convention's own form (the native id when it is kept whole)
        if convention.classify(test_id) is not IdKind.TEST:
            continue  # a module that did not collect (``tests.test_a``), no test: what it held failed
        statuses[test_id] = TestStatus.worst(statuses[test_id], status) if test_id in statuses else status
        if native in parsed.conflicts:
            conflicts.add(test_id)
        if (native.split() or [""])[0] in xpassed_natives:
            xpassed.add(test_id)
    return RunOutcomes(statuses, conflicts=tuple(sorted(conflicts)), xpassed=tuple(sorted(xpassed)))


def _xpassed(output: str) -> set[str]:
    """The ids pytest's ``-rA`` summary names ``XPASS`` (a test marked xfail that passed:
    PASSED to the parsers and to grading; SWE-bench's log parsers keep no status for it).
    The id is the summary line's first token after ``XPASS``, cut at a space as pytest's
    line is."""
    found: set[str] = set()
    for line in output.splitlines():
        if line.startswith("XPASS "):
            parts = line.split()
            if len(parts) > 1:
                found.add(parts[1])
    return found


def _why(result: InstanceResult) -> str:
    reason = result.error_reason.value if result.error_reason else result.status.value
    detail = result.error_detail.strip().splitlines()
    return f"{reason}" + (f": {detail[-1][:300]}" if detail else "")
