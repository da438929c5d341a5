"""Why a vendor's verdict and ours differ, test by test (pure analysis of saved reports).

For an instance whose verdict differs, :func:`explain` puts side by side, for every graded
test, its outcome in the vendor's own SWE-bench report (``tests_status``; absent when the
vendor's file has no per-test data), in our report, and in our reference control's report
(a run of the reference patches, when given). The tests whose outcomes differ are listed;
the *decisive* ones are those that move the verdict the way it differs (they pass on the
side that resolved and fail on the other). Each differing test gets one reason class, the
first of these that holds:

``label_fix``
    the test is not in the same list on both sides: the vendor graded other test lists
    than the instance record's (a label fix made after the vendor's run);
``dataset_defect``
    the instance has an entry in the dataset-defects file (docs/notes/dataset-defects.yaml)
    that names the test (its id, or its function name as a word);
``network``
    it failed in the vendor's environment and passes here, and the instance is graded here
    with a local stand-in for the network (the report's ``integrity.network_stand_ins``,
    from the spec's services; in reports before that field, a service the run started);
``vendor_environment``
    it failed in the vendor's environment and passes here, in our run and in our reference
    control (with no control given: in our run; the explanation says so);
``unexplained``
    anything else (a test the vendor passed and that fails here, for one).

The instance's class is ``apply_difference`` when the patch applied on one side only (or
ours was refused before it applied); ``not_in_run`` when our run has no verdict; otherwise
the class of its decisive tests (``unexplained`` if any is, or if none explains the
verdict), the first in :data:`PRIORITY` order when they differ.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.errors import InputError

__all__ = ["CLASS_LABELS", "PRIORITY", "DifferingTest", "Explanation", "SideOutcomes", "explain", "load_defects",
           "outcomes_of", "DEFAULT_DEFECTS"]

CLASS_LABELS = {
    "network": "network test",
    "dataset_defect": "recorded dataset defect",
    "label_fix": "label fix after the vendor's run",
    "vendor_environment": "failed in the vendor's environment",
    "apply_difference": "apply difference",
    "not_in_run": "not graded here",
    "unexplained": "unexplained",
}
#: which class names an instance whose decisive tests fall into several
PRIORITY = ("label_fix", "dataset_defect", "network", "vendor_environment")
CATEGORIES = ("FAIL_TO_PASS", "PASS_TO_PASS")
#: ``error_reason`` values that mean our side never applied the patch
_PATCH_REASONS = frozenset({"patch_apply_failed", "patch_rejected"})
#: this checkout's dataset-defects file (an installed wheel has none: pass ``--defects``)
DEFAULT_DEFECTS = Path(__file__).resolve().parents[2] / "docs" / "notes" / "dataset-defects.yaml"


@dataclass(frozen=True)
class DifferingTest:
    """One graded test whose outcome differs. Outcomes: ``success``, ``failure``,
    ``absent`` (not in that side's lists), ``unknown`` (the side has no per-test data)."""

    test: str
    category: str
    vendor: str
    ours: str
    control: str | None     # None: no reference control given
    decisive: bool
    reason_class: str
    why: str


@dataclass(frozen=True)
class Explanation:
    reason_class: str
    classes: tuple[str, ...]
    explanation: str
    tests: tuple[DifferingTest, ...]


@dataclass(frozen=True)
class SideOutcomes:
    """One side's report, as far as the explanation reads it."""

    tests: Mapping[str, tuple[str, str]]      # test -> (category, success|failure)
    per_test: bool                            # False: the side has no tests_status
    applied: bool | None
    error_reason: str | None = None
    error_detail: str = ""
    stand_ins: tuple[str, ...] = ()           # network names served locally ("a service" when unnamed)
    flags: tuple[str, ...] = ()

    def outcome(self, test: str) -> str:
        if not self.per_test:
            return "unknown"
        return self.tests[test][1] if test in self.tests else "absent"

    def category(self, test: str) -> str | None:
        return self.tests[test][0] if test in self.tests else None


def outcomes_of(report: Mapping[str, Any] | None) -> SideOutcomes | None:
    """A SWE-bench or harness per-instance report read for :func:`explain` (None: no report)."""
    if report is None:
        return None
    status = report.get("tests_status")
    tests: dict[str, tuple[str, str]] = {}
    if isinstance(status, Mapping):
        for category in CATEGORIES:
            block = status.get(category) or {}
            for outcome in ("success", "failure"):
                for test in block.get(outcome) or ():
                    tests[str(test)] = (category, outcome)
    for test in report.get("missing") or ():           # ours: graded but not run
        if str(test) in tests:
            tests[str(test)] = (tests[str(test)][0], "failure")
    integrity: Mapping[str, Any] = report["integrity"] if isinstance(report.get("integrity"), Mapping) else {}
    stand_ins = tuple(str(h) for h in integrity.get("network_stand_ins") or ())
    if not stand_ins and any(isinstance(c, Mapping) and c.get("phase") == "service_start"
                             for c in report.get("commands") or ()):
        stand_ins = ("a local service",)
    applied = report.get("patch_successfully_applied")
    return SideOutcomes(tests=tests, per_test=isinstance(status, Mapping), applied=applied if isinstance(applied, bool)
                        else None, error_reason=report.get("error_reason") or None,
                        error_detail=str(report.get("error_detail") or ""), stand_ins=stand_ins,
                        flags=tuple(str(f) for f in integrity.get("flags") or ()))


def load_defects(path: str | os.PathLike[str] | None) -> dict[str, str]:
    """instance id -> the entry's text (summary and evidence), from a dataset-defects file."""
    if path is None:
        return {}
    path = Path(path)
    if not path.is_file():
        raise InputError("dataset-defects file not found", source=str(path), field="--defects")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputError(f"not readable YAML: {exc}", source=str(path), field="--defects") from None
    if not isinstance(data, dict):
        raise InputError("must map instance ids to entries", source=str(path), field="--defects")
    out = {}
    for instance_id, entry in data.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("summary"), str):
            raise InputError("an entry needs a summary", source=str(path), record=str(instance_id), field="summary")
        out[str(instance_id)] = f"{entry['summary']} {entry.get('evidence') or ''}"
    return out


def _names(text: str, test: str) -> bool:
    """Whether a defect entry names the test: its id, or its function name as a word."""
    if test in text:
        return True
    name = re.sub(r"\[.*$", "", test.split("::")[-1]).split(" ")[0].split(".")[-1]
    return bool(name) and re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text) is not None


def _classify(test: str, vendor: SideOutcomes, ours: SideOutcomes, control: SideOutcomes | None,
              defect: str | None) -> tuple[str, str]:
    mine, theirs = ours.outcome(test), vendor.outcome(test)
    control_outcome = control.outcome(test) if control else None
    if vendor.per_test and (theirs == "absent" or mine == "absent" or vendor.category(test) != ours.category(test)):
        where = (f"in the vendor's {vendor.category(test)}" if vendor.category(test) else "not in the vendor's lists")
        return "label_fix", f"{where}, in the record's {ours.category(test) or 'lists: no'}"
    if defect is not None and _names(defect, test):
        return "dataset_defect", "named by the instance's dataset-defects entry"
    if theirs == "failure" and mine == "success":
        if control_outcome == "failure":
            return "unexplained", "passes with the model's patch here but fails in our reference control"
        if ours.stand_ins:
            return "network", f"failed there; here the network is a local stand-in ({', '.join(ours.stand_ins)})"
        if control_outcome == "success":
            return "vendor_environment", "failed in the vendor's environment; passes here and in our reference control"
        return "vendor_environment", "failed in the vendor's environment; passes here (no reference control given)"
    if mine == "failure" and control_outcome == "failure":
        return "unexplained", "fails here with the reference patch too (our environment cannot pass it)"
    return "unexplained", f"vendor {theirs}, ours {mine}" + (f", control {control_outcome}" if control else "")


def explain(vendor_resolved: bool, vendor: SideOutcomes | None, ours: SideOutcomes | None,
            control: SideOutcomes | None, defect: str | None) -> Explanation:
    """Why the verdicts differ (see the module docstring). ``vendor`` None: the vendor's
    file holds only the verdict."""
    if ours is None:
        return Explanation("not_in_run", ("not_in_run",), "our run has no verdict for it", ())
    vendor = vendor or SideOutcomes({}, per_test=False, applied=None)
    if ours.error_reason in _PATCH_REASONS and vendor.applied is not False:
        return Explanation("apply_difference", ("apply_difference",),
                           f"ours {ours.error_reason}: {ours.error_detail[:300]}", ())
    if vendor.applied is not None and ours.applied is not None and vendor.applied != ours.applied:
        return Explanation("apply_difference", ("apply_difference",),
                           f"the patch applied {'there only' if vendor.applied else 'here only'}", ())
    differences = []
    for test in sorted(set(ours.tests) | set(vendor.tests)):
        mine, theirs = ours.outcome(test), vendor.outcome(test)
        if vendor.per_test and mine == theirs and vendor.category(test) == ours.category(test):
            continue
        if not vendor.per_test and mine == "success":
            continue     # nothing to compare with: only what fails here can explain a claimed resolve
        # what makes the unresolved side unresolved: its failures the other side has not
        decisive = (mine == "failure" and theirs != "failure") if vendor_resolved \
            else (theirs == "failure" and mine != "failure")
        cls, why = _classify(test, vendor, ours, control, defect)
        category = ours.category(test) or vendor.category(test) or "?"
        differences.append(DifferingTest(test, category, theirs, mine, control.outcome(test) if control else None,
                                          decisive, cls, why))
    decisives = [d for d in differences if d.decisive]
    classes = tuple(dict.fromkeys(d.reason_class for d in decisives))
    if ours.error_reason and not decisives:
        return Explanation("unexplained", ("unexplained",), f"ours {ours.error_reason}: {ours.error_detail[:300]}",
                           tuple(differences))
    if not decisives or "unexplained" in classes:
        primary = "unexplained"
    else:
        primary = next(c for c in PRIORITY if c in classes)
    counts = ", ".join(f"{sum(d.reason_class == c for d in decisives)} {CLASS_LABELS[c]}" for c in classes)
    text = (f"{len(decisives)} decisive test(s): {counts}" if decisives else "no test explains the verdict")
    if ours.error_reason:
        text += f"; ours {ours.error_reason}"
    return Explanation(primary, classes or (primary,), text, tuple(differences))
