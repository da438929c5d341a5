"""Do two run directories give the same verdicts, test by test?

Used to show that a change left behaviour alone: grade the same instances and predictions
before and after it, then

    python3 scripts/same_verdicts.py BEFORE_RUN AFTER_RUN [BEFORE_RUN2 AFTER_RUN2 ...]

For each pair it compares every instance's ``report.json``: the status, ``resolved``, the
error reason and origin, the tests that were missing, and each FAIL_TO_PASS and PASS_TO_PASS
test's outcome (success or failure). It prints one line per pair and every difference, and
exits 1 when any pair differs or an instance is in one run only. Reads JSON only; no Docker.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

COMPARED = ("status", "resolved", "error_reason", "error_origin", "patch_successfully_applied")


def _reports(run: Path) -> dict[str, dict]:
    reports = {}
    for path in sorted(run.glob("*/report.json")):
        report = json.loads(path.read_text())
        reports[report["instance_id"]] = report
    if not reports:
        raise SystemExit(f"{run}: no <instance>/report.json here; is it a run directory?")
    return reports


def _test_outcomes(report: dict) -> dict[str, str]:
    outcomes = {}
    for group, lists in (report.get("tests_status") or {}).items():
        for outcome, tests in lists.items():
            for test in tests:
                outcomes[f"{group} {test}"] = outcome
    for test in report.get("missing") or []:
        outcomes[f"missing {test}"] = "missing"
    return outcomes


def differences(before: dict, after: dict) -> list[str]:
    """Every way one instance's two reports disagree, as readable lines."""
    found = [f"{field}: {before.get(field)!r} -> {after.get(field)!r}"
             for field in COMPARED if before.get(field) != after.get(field)]
    old, new = _test_outcomes(before), _test_outcomes(after)
    for test in sorted(old.keys() | new.keys()):
        if old.get(test) != new.get(test):
            found.append(f"{test}: {old.get(test, 'absent')} -> {new.get(test, 'absent')}")
    return found


def compare(before_run: Path, after_run: Path) -> tuple[int, int, list[str]]:
    """(instances compared, tests compared, difference lines) for one pair of runs."""
    before, after = _reports(before_run), _reports(after_run)
    lines = [f"{i}: only in {before_run}" for i in sorted(before.keys() - after.keys())]
    lines += [f"{i}: only in {after_run}" for i in sorted(after.keys() - before.keys())]
    tests = 0
    for instance_id in sorted(before.keys() & after.keys()):
        tests += len(_test_outcomes(before[instance_id]))
        lines += [f"{instance_id}: {line}" for line in differences(before[instance_id], after[instance_id])]
    return len(before.keys() & after.keys()), tests, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="BEFORE AFTER pairs of run directories")
    args = parser.parse_args(argv)
    if len(args.runs) % 2:
        parser.error("give run directories in BEFORE AFTER pairs")
    differ = False
    for before_run, after_run in zip(args.runs[::2], args.runs[1::2]):
        instances, tests, lines = compare(before_run, after_run)
        verdict = "same" if not lines else f"{len(lines)} differences"
        print(f"{before_run} vs {after_run}: {instances} instances, {tests} graded tests: {verdict}")
        for line in lines:
            print(f"  {line}")
        differ = differ or bool(lines)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
