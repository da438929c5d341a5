"""From a finished run's artefacts to a verdict (pure; the live evaluation and
``harness report`` both call :func:`judge_run`).

In order: parse the results (bounded: over a cap the run is INVALID, the model's doing),
judge the canaries, the results' consistency (JUnit against the text summary and against
the runner's own reports), the runtime evidence (seal, provenance, monitor), work out
which skips and xfails the code under test raised, then apply the rulebook
(:func:`harness.grading.grade.grade`). The first reason found decides the INVALID
verdict; every finding is kept as a flag.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.grading.grade import Grade, TestLists, grade
from harness.grading.parsers import ResultsTooLarge, RunArtefacts, get_parser
from harness.grading.status import ErrorReason, TestStatus
from harness.instances import Instance
from harness.integrity.canaries import Canary, judge_canaries
from harness.integrity.evidence import Evidence, code_raised, judge_evidence


@dataclass
class Judgement:
    """Everything grading concluded from one run's artefacts (pure data)."""

    verdict: Grade
    reason: ErrorReason | None
    detail: str
    flags: list[str]
    details: dict
    parse_source: str
    parse_notes: list[str]
    collected: list[str]
    infrastructure: str | None = None


@dataclass
class RunContext:
    """What the judgement needs besides the artefacts (all recorded in report.json)."""

    test_files: tuple[str, ...] = ()
    canaries: tuple[Canary, ...] = ()
    model_files: frozenset[str] = frozenset()
    runner_project: bool = False
    plugin_expected: bool = False
    control_skipped: frozenset[str] = frozenset()
    evidence: Evidence | None = None
    extra_flags: list[str] = field(default_factory=list)


def judge_run(instance: Instance, parser_name: str, output: str, junit_xml: bytes | None,
              exit_code: int | None, ctx: RunContext) -> Judgement:
    parser = get_parser(parser_name)
    tests, ignored = gradable_tests(instance)
    graded = (*tests.fail_to_pass, *tests.pass_to_pass)
    flags: list[str] = []
    details: dict = {}
    try:
        parsed = parser(RunArtefacts(output=output, junit_xml=junit_xml, known_files=ctx.test_files,
                                     graded_ids=graded))
    except ResultsTooLarge as exc:
        flags.append("results_over_limit")
        return Judgement(grade(tests, {}, ErrorReason.RESULTS_OVER_LIMIT), ErrorReason.RESULTS_OVER_LIMIT,
                         str(exc), flags, details, "none", [str(exc)], [])
    statuses = dict(parsed.statuses)
    ev = ctx.evidence
    raised_by_code = code_raised(ev, ctx.model_files) if ev is not None else frozenset()

    reasons: list[tuple[ErrorReason, str]] = []
    if ctx.canaries:
        verdict = judge_canaries(list(ctx.canaries), statuses, raised_by_code)
        flags += verdict.flags
        details["canaries"] = verdict.details
        if verdict.tampered:
            reasons.append((ErrorReason.TAMPERED, verdict.tampered))
        elif verdict.any_failed and exit_code == 0:
            flags.append("exit_code_mismatch")
            reasons.append((ErrorReason.TAMPERED, "the test runner exited 0 although a must-fail canary failed"))
    infrastructure = None
    if ev is not None:
        runtime = judge_evidence(ev, statuses, graded, ctx.model_files, True, ctx.runner_project,
                                 ctx.plugin_expected)
        flags += runtime.flags
        details.update(runtime.details)
        infrastructure = runtime.infrastructure
        if runtime.tampered:
            reasons.append((ErrorReason.TAMPERED, runtime.tampered))
        if runtime.ambiguous:
            reasons.append((ErrorReason.AMBIGUOUS_RESULTS, runtime.ambiguous))
        if ev.notes:
            details["evidence_notes"] = ev.notes[:10]
    graded_set = set(graded)
    graded_conflicts = [c for c in parsed.conflicts if c in graded_set]
    if graded_conflicts:
        flags.append("ambiguous_results")
        details["ambiguous_results"] = graded_conflicts[:50]
        reasons.append((ErrorReason.AMBIGUOUS_RESULTS,
                        f"contradictory results for graded tests: {graded_conflicts[:10]}"))
    if not statuses:
        reasons.append((ErrorReason.SUITE_DID_NOT_RUN,
                        f"no test results (runner exit code {exit_code}; {'; '.join(parsed.notes[:3])})"))
    untrusted = frozenset(t for t in raised_by_code if t in graded_set
                          and statuses.get(t) in (TestStatus.SKIPPED, TestStatus.XFAIL))
    if untrusted:
        flags.append("outcome_raised_by_code")
        details["outcome_raised_by_code"] = sorted(untrusted)[:50]
    outcomes = {t: statuses[t].value for t in graded if statuses.get(t) in (TestStatus.SKIPPED, TestStatus.XFAIL)}
    if outcomes:
        details["skipped_or_xfailed"] = dict(list(outcomes.items())[:500])
    if ignored:
        flags.append("dataset_ids_ignored")
        details["ignored_test_ids"] = ignored
    flags += [f for f in ctx.extra_flags if f not in flags]
    reason, detail = reasons[0] if reasons else (None, "")
    verdict = grade(tests, statuses, reason, untrusted=untrusted, control_skipped=ctx.control_skipped)
    return Judgement(verdict, reason, detail, list(dict.fromkeys(flags)), details, parsed.source,
                     parsed.notes[:50], sorted(statuses), infrastructure)


def gradable_tests(instance: Instance) -> tuple[TestLists, list[str]]:
    """The instance's test lists without entries that cannot name a test.

    Some published lists hold fragments of log lines (``[100%]``, ``[``) that the
    dataset's own log parser mistook for test ids; no runner reports them, so they would
    count as missing forever. They are left out of grading and listed in the report
    (``integrity.ignored_test_ids``) and by ``harness validate``.
    """
    def names_a_test(test_id: str) -> bool:
        return "::" in test_id or test_id.endswith(".py")

    ignored = [t for t in (*instance.fail_to_pass, *instance.pass_to_pass) if not names_a_test(t)]
    if not ignored:
        return instance.tests, []
    return (TestLists(tuple(t for t in instance.fail_to_pass if names_a_test(t)),
                      tuple(t for t in instance.pass_to_pass if names_a_test(t))), ignored)


def apply_judgement(result, judged: Judgement) -> None:
    """Copy a judgement into an InstanceResult."""
    verdict = judged.verdict
    result.status, result.resolved = verdict.status, verdict.resolved
    result.f2p_success, result.f2p_failure = list(verdict.f2p_success), list(verdict.f2p_failure)
    result.p2p_success, result.p2p_failure = list(verdict.p2p_success), list(verdict.p2p_failure)
    result.missing, result.f2p_rate, result.p2p_rate = list(verdict.missing), verdict.f2p_rate, verdict.p2p_rate
    result.error_reason, result.error_detail = judged.reason, judged.detail[-4000:]
    for flag in judged.flags:
        if flag not in result.integrity_flags:
            result.integrity_flags.append(flag)
    result.integrity_details.update(judged.details)
    result.parse_source, result.parse_notes, result.collected = \
        judged.parse_source, judged.parse_notes, judged.collected
