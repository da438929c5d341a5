"""From a finished run's artefacts to a verdict (pure; the live evaluation and
``harness report`` both call :func:`judge_run`).

In order: parse the results (bounded: over a cap the run is INVALID, the model's doing;
the parser reports the runner's native ids), judge the canaries (native ids), key the
results by the dataset's ids (the spec's id convention, harness/grading/conventions.py),
then the results' consistency (JUnit against the text summary and against
the runner's own reports), the runtime evidence (seal, provenance, monitor), work out
which skips and xfails the code under test raised, then apply the rulebook
(:func:`harness.grading.grade.grade`). The first reason found decides the INVALID
verdict; every finding is kept as a flag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from harness.engine.cpus import CpuLimit, skipped_under_cap
from harness.errors import last_error_line
from harness.grading.conventions import IdKind, get_convention, map_results
from harness.grading.grade import Grade, TestLists, grade
from harness.grading.parsers import ResultsTooLarge, RunArtefacts, get_parser
from harness.grading.reporter_parsers import junit_collection_errors
from harness.grading.status import ErrorReason, TestStatus
from harness.inputs.instances import Instance
from harness.integrity.canaries import Canary, judge_canaries, judge_perturbations
from harness.integrity.evidence import Evidence, code_raised, judge_evidence, xpassed


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
    #: canary test id -> PROVEN/DISPROVED, from the reference control (harness/results/control.py)
    canary_proof: Mapping[str, str] = field(default_factory=dict)
    #: the run is of the reference patch (it proves its own canaries)
    reference: bool = False
    #: graded tests changed in place (a perturbed run: harness/integrity/perturbed.py)
    perturbations: tuple[Canary, ...] = ()
    model_files: frozenset[str] = frozenset()
    runner_project: bool = False
    plugin_expected: bool = False
    control_skipped: frozenset[str] = frozenset()
    evidence: Evidence | None = None
    extra_flags: list[str] = field(default_factory=list)
    #: the cores the sandbox had (report.json ``resources.cpus``)
    cpu: CpuLimit | None = None
    #: what the pristine tests declare of each test (harness/integrity/declared.py: an
    #: object with ``of(native_id) -> Declared``); None: not read (a run before issue 36)
    declarations: Any = None
    #: the undeclared outcomes a run of the reference patch showed (dataset id -> kind):
    #: the same one here is the environment's; None when no reference run is known
    reference_undeclared: Mapping[str, str] | None = None


def judge_run(instance: Instance, parser_name: str, output: str, junit_xml: bytes | None,
              exit_code: int | None, ctx: RunContext, convention: str = "pytest") -> Judgement:
    parser = get_parser(parser_name)
    ids = get_convention(convention)
    tests, ignored = gradable_tests(instance, convention)
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
    native = dict(parsed.statuses)
    ev = ctx.evidence
    raised_by_code = code_raised(ev, ctx.model_files) if ev is not None else frozenset()
    passed_as_xfail = xpassed(ev) if ev is not None else frozenset()
    declared_codes: dict[str, str] = {}

    def undeclared_kind(native_id: str) -> str | None:
        """The outcome of ``native_id`` its pristine source does not declare, if any."""
        if ctx.declarations is None:
            return None
        status = native.get(native_id)
        kind = ("xfail" if status is TestStatus.XFAIL else "skip" if status is TestStatus.SKIPPED
                else "xpass" if status is TestStatus.PASSED and native_id in passed_as_xfail else None)
        if kind is None:
            return None
        declared = ctx.declarations.of(native_id)
        declared_codes[native_id] = declared.code
        return None if (declared.skip if kind == "skip" else declared.xfail) else kind

    reasons: list[tuple[ErrorReason, str]] = []
    if ctx.canaries:
        undeclared_canaries = {c.test_id: k for c in ctx.canaries if (k := undeclared_kind(c.test_id))}
        verdict = judge_canaries(list(ctx.canaries), native, raised_by_code, ctx.canary_proof, ctx.reference,
                                 undeclared_canaries)
        flags += verdict.flags
        details["canaries"] = verdict.details
        if verdict.tampered:
            reasons.append((ErrorReason.TAMPERED, verdict.tampered))
        elif verdict.unproven:
            reasons.append((ErrorReason.CANARY_UNPROVEN, verdict.unproven))
        elif verdict.any_failed and exit_code == 0:
            flags.append("exit_code_mismatch")
            if not ctx.reference:  # the reference's runner saying 0 says nothing against a model
                reasons.append((ErrorReason.TAMPERED,
                                "the test runner exited 0 although a must-fail canary failed"))
    if ctx.perturbations:  # recorded for the first run's verdict (harness/integrity/perturbed.py)
        changed = judge_perturbations(list(ctx.perturbations), native, raised_by_code, ctx.canary_proof, ctx.reference)
        details["perturbations"] = changed.details
    graded_set = set(graded)
    mapped = map_results(ids, native, parsed.labels, graded, parsed.conflicts)
    statuses = mapped.statuses
    # native ids that stand for graded tests (the evidence and the raised outcomes are native)
    dataset_of = {n: [d for d in ids.to_dataset(n, parsed.labels.get(n)) if d in graded_set] for n in native}
    graded_native = tuple(dict.fromkeys([*graded, *(n for n, ds in dataset_of.items() if ds)]))
    infrastructure = None
    if ev is not None:
        runtime = judge_evidence(ev, native, graded_native, ctx.model_files, True, ctx.runner_project,
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
    graded_conflicts = [c for c in mapped.conflicts if c in graded_set]
    if graded_conflicts:
        flags.append("ambiguous_results")
        details["ambiguous_results"] = graded_conflicts[:50]
        reasons.append((ErrorReason.AMBIGUOUS_RESULTS,
                        f"contradictory results for graded tests: {graded_conflicts[:10]}"))
    collection_errors = parsed.collection_errors or junit_collection_errors(junit_xml)
    not_collected = [t for t in graded if t not in statuses]
    if collection_errors:
        flags.append("collection_error")
        details["collection_errors"] = collection_errors[:50]
    if not native:
        # why the runner stopped, when its output says (an ImportError of the patched package)
        stopped = last_error_line(output)
        reasons.append((ErrorReason.SUITE_DID_NOT_RUN,
                        f"no test results (runner exit code {exit_code}; {'; '.join(parsed.notes[:3])})"
                        + (f"; the output ends with {stopped!r}" if stopped else "")))
    elif collection_errors and not_collected:
        # graded tests never ran because a test module did not import: not silently "failed"
        reasons.append((ErrorReason.COLLECTION_ERROR,
                        f"{len(not_collected)} graded tests were never collected; collection failed in "
                        f"{', '.join(collection_errors[:5])}"))
        details["not_collected"] = not_collected[:100]
    raised_graded = {d for n in raised_by_code if n in native for d in dataset_of.get(n, ())} | (
        raised_by_code & graded_set)
    untrusted = frozenset(t for t in raised_graded if statuses.get(t) in (TestStatus.SKIPPED, TestStatus.XFAIL))
    undeclared = undeclared_outcomes(graded_native, dataset_of, graded_set, undeclared_kind)
    if ctx.declarations is not None:   # recorded even when empty: the declarations were read
        details["declared"] = dict(list(declared_codes.items())[:1000])
    accused = settle_undeclared(undeclared, ctx, flags, details, reasons)
    if untrusted:
        flags.append("outcome_raised_by_code")
        details["outcome_raised_by_code"] = sorted(untrusted)[:50]
    untrusted = untrusted | frozenset(accused)
    outcomes = {t: statuses[t].value for t in graded if statuses.get(t) in (TestStatus.SKIPPED, TestStatus.XFAIL)}
    if outcomes:
        details["skipped_or_xfailed"] = dict(list(outcomes.items())[:500])
    capped = skipped_under_cap(ctx.cpu, (t for t in graded if statuses.get(t) is TestStatus.SKIPPED))
    if capped:
        flags.append("skipped_under_cpu_cap")
        details["skipped_under_cpu_cap"] = capped
    if ignored:
        flags.append("dataset_ids_ignored")
        details["ignored_test_ids"] = ignored
    if mapped.sources:
        details["id_sources"] = dict(list(mapped.sources.items())[:100])
    flags += [f for f in ctx.extra_flags if f not in flags]
    reason, detail = reasons[0] if reasons else (None, "")
    verdict = grade(tests, statuses, reason, untrusted=untrusted, control_skipped=ctx.control_skipped)
    collected = sorted({*native, *(t for t in graded if t in statuses)})
    return Judgement(verdict, reason, detail, list(dict.fromkeys(flags)), details, parsed.source,
                     (parsed.notes + mapped.notes)[:50], collected, infrastructure)


def undeclared_outcomes(graded_native: tuple[str, ...], dataset_of: Mapping[str, list[str]], graded: set[str],
                        kind_of) -> dict[str, str]:
    """Graded dataset id -> the outcome (skip, xfail, xpass) it had that its pristine source
    does not declare (harness/integrity/declared.py)."""
    out: dict[str, str] = {}
    for native_id in graded_native:
        kind = kind_of(native_id)
        if kind is None:
            continue
        for dataset_id in dataset_of.get(native_id) or ([native_id] if native_id in graded else []):
            out.setdefault(dataset_id, kind)
    return out


def settle_undeclared(undeclared: Mapping[str, str], ctx: RunContext, flags: list[str], details: dict,
                      reasons: list[tuple[ErrorReason, str]]) -> list[str]:
    """Issue 36, class 1: a graded test counts as passing only when it passed, or when its
    skip or expected failure is declared by the pristine source. An undeclared outcome

    * in a run of the reference patch is recorded (``outcome_undeclared``: the reading did
      not see a declaration, or the environment gives it), never held against the run;
    * elsewhere is the environment's when a run of the reference patch showed the same one
      for the same test (``outcome_undeclared_like_reference``: counted as before);
    * else is ``tampered``; and with no reference run known, unproven: INVALID
      ``canary_unproven`` (the harness's), which a run of the reference patch on demand
      settles (harness/evaluation/proving.py).

    Returns the graded ids that count neither as fixed nor as kept."""
    if not undeclared:
        return []
    details["outcome_undeclared"] = dict(list(undeclared.items())[:500])
    if ctx.reference:
        flags.append("outcome_undeclared")
        return []
    known = ctx.reference_undeclared
    if known is not None:
        details["outcome_reference"] = dict(list(known.items())[:500])
    like_reference = {t for t, k in undeclared.items() if known is not None and known.get(t) == k}
    if like_reference:
        flags.append("outcome_undeclared_like_reference")
    accused = sorted(set(undeclared) - like_reference)
    if not accused:
        return []
    said = ", ".join(f"{t} ({undeclared[t]})" for t in accused[:5])
    if known is None:
        flags.append("outcome_undeclared_unproven")
        reasons.append((ErrorReason.CANARY_UNPROVEN,
                        f"graded tests had outcomes their pristine source does not declare: {said}; no run of the "
                        "reference patch showed whether the environment gives them"))
    else:
        flags.append("outcome_undeclared")
        reasons.append((ErrorReason.TAMPERED,
                        f"graded tests had outcomes their pristine source does not declare and the reference run "
                        f"did not show: {said}"))
    return accused


def gradable_tests(instance: Instance, convention: str = "pytest") -> tuple[TestLists, list[str]]:
    """The instance's test lists without the entries its id convention knows to be
    fragments of log lines, and those fragments.

    Some published lists hold fragments of log lines (``[100%]``, ``[``) that the
    dataset's own log parser mistook for test ids (pytest-dev__pytest-5227); no runner
    reports them, so they are left out of grading and listed in the report
    (``integrity.ignored_test_ids``) and by ``harness validate``. Any other id the
    convention cannot address is refused before anything runs
    (harness/inputs/instance_checks.py), never dropped here.
    """
    kinds = get_convention(convention).classify
    ignored = [t for t in (*instance.fail_to_pass, *instance.pass_to_pass) if kinds(t) is IdKind.LOG_FRAGMENT]
    if not ignored:
        return instance.tests, []
    keep = set(ignored)
    return (TestLists(tuple(t for t in instance.fail_to_pass if t not in keep),
                      tuple(t for t in instance.pass_to_pass if t not in keep)), ignored)


def invalidate(result, tests: TestLists, reason: ErrorReason, detail: str) -> None:
    """Make ``result`` INVALID for ``reason``: no graded test counts as passed, every one is
    listed as failed (what the run showed is kept in its flags and details, not its lists)."""
    verdict = grade(tests, {}, reason)
    result.status, result.resolved = verdict.status, False
    result.f2p_failure, result.p2p_failure = list(verdict.f2p_failure), list(verdict.p2p_failure)
    result.f2p_success, result.p2p_success = [], []
    result.error_reason, result.error_detail = reason, detail[-4000:]


def refuse_runner_reach(result, tests: TestLists, forbidden: bool) -> None:
    """After :func:`apply_judgement`: a run that no other reason made INVALID, whose patch the
    scan found reaching into the test runner (flag ``patch_references_test_runner``) where
    the spec forbids it, is INVALID (tampered), as the live run and the re-grade both decide."""
    if "patch_references_test_runner" in result.integrity_flags and forbidden and result.error_reason is None:
        hits = result.integrity_details.get("patch_references_test_runner", [])
        invalidate(result, tests, ErrorReason.TAMPERED, f"the patch reaches into the test runner: {', '.join(hits[:5])}")


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
