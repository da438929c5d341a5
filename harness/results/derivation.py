"""FAIL_TO_PASS and PASS_TO_PASS derived from runs of the tests the test patch touches
(``harness instances derive``). Pure: every run's outcomes in, the lists and the table out.

Each record is run N times at base + test patch *without* the reference patch and N times
*with* it (harness/run/derive.py); each run gives every test's status under the dataset's
id convention (:class:`RunOutcomes`, read by harness/evaluation/outcomes.py). Per test:

* it **passes** in a run when PASSED, or XFAIL under the default ``xfail="pass"`` (what
  grading counts as fixed and kept; the demo set's lists hold an expected failure too);
  with ``xfail="leave-out"`` an expected failure, and a test marked as one that passed
  (pytest's XPASS), is left out of both lists, as SWE-bench's own lists hold only tests
  that PASSED (docs/DERIVED_LISTS.md); it **fails**
  when FAILED or ERROR, and is **skipped** when SKIPPED. Absent from a run without the fix
  it fails (its module did not import without the fix: SWE-bench's convention, a test
  missing from the log failed); absent from a run with the fix it is *missing*;
* **FAIL_TO_PASS**: fails in every run without the fix and passes in every run with it;
* **PASS_TO_PASS**: passes in every run on both sides;
* **flaky**: its outcome differs between runs of one side: reported, left out of both;
* **broken**: passes in every run without the fix and fails (or is missing) in every run
  with it: the reference patch breaks a test it should keep, and the record is refused;
* everything else (failing on both sides, skipped, xfail, missing with the fix) is left out and
  counted in the table.

The lists keep the order the tests ran in with the fix (the runner's collection order).

A record is refused, with the evidence, when a run is not evidence (INVALID for a reason
other than a test module that does not import without the fix), when the reference patch
fixes no test, or when it breaks one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from harness.grading.status import TestStatus

PASS, FAIL, SKIP, XFAIL, MISSING = "pass", "fail", "skip", "xfail", "missing"
_OUTCOME = {TestStatus.PASSED: PASS, TestStatus.XFAIL: XFAIL, TestStatus.FAILED: FAIL, TestStatus.ERROR: FAIL,
            TestStatus.SKIPPED: SKIP}
#: what an expected failure (XFAIL) is: ``pass`` (as grading counts it; the default) or
#: ``leave-out`` (SWE-bench's lists hold only tests that PASSED)
XFAIL_RULES = ("pass", "leave-out")
#: how many ids of each kind a table cell or a reason names
SHOWN = 5


@dataclass(frozen=True)
class RunOutcomes:
    """One run of one record: every test's status keyed by dataset id (canaries left
    out), or ``invalid``, why the run is not evidence."""

    statuses: Mapping[str, TestStatus] = field(default_factory=dict)
    invalid: str | None = None
    #: ids several reports of which contradicted each other (left out as flaky)
    conflicts: tuple[str, ...] = ()
    #: ids that passed although marked as expected to fail (pytest's XPASS; PASSED to grading)
    xpassed: tuple[str, ...] = ()


@dataclass
class Derived:
    """What the runs of one record decided."""

    instance_id: str
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    flaky: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    #: tests left out of both lists and why: fail_in_both, skipped, xfail, missing_with_fix
    left_out: dict[str, list[str]] = field(default_factory=dict)
    tests_run: int = 0
    refused: str | None = None

    def row(self) -> dict[str, Any]:
        """The table's row (JSON)."""
        return {"instance_id": self.instance_id, "status": "refused" if self.refused else "derived",
                "FAIL_TO_PASS": len(self.fail_to_pass), "PASS_TO_PASS": len(self.pass_to_pass),
                "tests_run": self.tests_run, "flaky": self.flaky, "broken": self.broken,
                "left_out": {k: v for k, v in self.left_out.items() if v}, "reason": self.refused}


def _side(runs: Sequence[RunOutcomes], absent: str, xfail: str) -> dict[str, list[str]]:
    """Each test's outcome in each run of one side (``absent``: what a missing test is)."""
    ids = list(dict.fromkeys(t for run in runs for t in run.statuses))  # the order the tests ran in
    outcome = {**_OUTCOME, TestStatus.XFAIL: PASS if xfail == "pass" else XFAIL}

    def one(run: RunOutcomes, test: str) -> str:
        if test not in run.statuses:
            return absent
        if xfail == "leave-out" and test in run.xpassed:
            return XFAIL  # SWE-bench's log parsers keep no status for an XPASS line
        return outcome[run.statuses[test]]
    return {t: [one(run, t) for run in runs] for t in ids}


def decide(instance_id: str, without_fix: Sequence[RunOutcomes], with_fix: Sequence[RunOutcomes],
           xfail: str = "pass") -> Derived:
    """The lists of one record from its runs without and with the reference patch
    (``xfail``: one of :data:`XFAIL_RULES`)."""
    if xfail not in XFAIL_RULES:
        raise ValueError(f"xfail must be one of {XFAIL_RULES}, got {xfail!r}")
    out = Derived(instance_id)
    for label, runs in (("without the reference patch", without_fix), ("with the reference patch", with_fix)):
        for n, run in enumerate(runs, 1):
            if run.invalid is not None:
                out.refused = f"run {n} {label} is not evidence: {run.invalid}"
                return out
    if not without_fix or not with_fix:
        out.refused = "no run on one side"
        return out
    before, after = _side(without_fix, FAIL, xfail), _side(with_fix, MISSING, xfail)
    conflicted = {t for run in (*without_fix, *with_fix) for t in run.conflicts}
    out.tests_run = len(after)
    left: dict[str, list[str]] = {"fail_in_both": [], "skipped": [], "xfail": [], "missing_with_fix": []}
    for test in dict.fromkeys([*after, *before]):  # lists in the order the tests ran with the fix
        was = before.get(test, [FAIL] * len(without_fix))
        now = after.get(test, [MISSING] * len(with_fix))
        if test in conflicted or len(set(was)) > 1 or len(set(now)) > 1:
            out.flaky.append(test)
        elif now[0] == PASS and was[0] == FAIL:
            out.fail_to_pass.append(test)
        elif now[0] == PASS and was[0] == PASS:
            out.pass_to_pass.append(test)
        elif was[0] == PASS and now[0] in (FAIL, MISSING):
            out.broken.append(test)
        elif SKIP in (was[0], now[0]):
            left["skipped"].append(test)
        elif XFAIL in (was[0], now[0]):
            left["xfail"].append(test)
        elif now[0] == MISSING:
            left["missing_with_fix"].append(test)
        else:
            left["fail_in_both"].append(test)
    out.left_out = left
    if out.broken:
        out.refused = (f"the reference patch breaks {len(out.broken)} test(s) that pass without it: "
                       f"{_names(out.broken)}")
    elif not out.fail_to_pass:
        out.refused = (f"the reference patch fixes no test: of the {len(after)} tests run with it, "
                       f"{len(out.pass_to_pass)} pass and {len(left['fail_in_both'])} fail with and without it, "
                       f"{len(out.flaky)} are flaky, {len(left['skipped'])} skipped"
                       + (f" (failing in both: {_names(left['fail_in_both'])})" if left["fail_in_both"] else ""))
    return out


def _names(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:SHOWN])
    return shown + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")


def render_markdown(table: Mapping[str, Any]) -> str:
    """The derivation table (``table``: :func:`harness.run.derive.derive`'s JSON)."""
    rows = table["instances"]
    derived = [r for r in rows if r["status"] == "derived"]
    lines = [f"# Derived test lists ({table['repeat']} runs without and {table['repeat']} with the reference patch"
             f"{', expected failures left out' if table.get('xfail') == 'leave-out' else ''})",
             "", f"- input: {table['input']}", f"- output: {table['output']}",
             f"- records derived: {len(derived)}, refused: {sum(r['status'] == 'refused' for r in rows)}, "
             f"kept as given: {sum(r['status'] == 'unchanged' for r in rows)}",
             f"- runs: {table['runs_dir']}", "",
             "| instance | status | FAIL_TO_PASS | PASS_TO_PASS | tests run | flaky | left out | reason |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        left = ", ".join(f"{k} {len(v)}" for k, v in (r.get("left_out") or {}).items())
        reason = str(r.get("reason") or "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r['instance_id']} | {r['status']} | {r.get('FAIL_TO_PASS', '')} | "
                     f"{r.get('PASS_TO_PASS', '')} | {r.get('tests_run', '')} | {len(r.get('flaky') or [])} | "
                     f"{left} | {reason} |")
    flaky = [(r["instance_id"], t) for r in rows for t in r.get("flaky") or []]
    if flaky:
        lines += ["", "## Flaky tests (left out of both lists)", ""]
        lines += [f"- {iid}: `{t}`" for iid, t in flaky]
    return "\n".join(lines) + "\n"
