"""A vendor's claimed verdicts, read from the files vendors publish, and validity reports.

:func:`load_claims` recognises four shapes (detected from the keys; nothing is guessed
from the file name):

``harness``
    ``{"resolved": [...], "unresolved": [...], "no_prediction": [...], "per_instance": {...},
    "submission": "..."}`` — this project's claims format; the three lists are the universe.
``swebench_run_report``
    the run report SWE-bench's ``run_evaluation`` writes as ``<model>.<run_id>.json``:
    ``resolved_ids``; ``unresolved_ids`` and ``error_ids`` (claimed unresolved);
    ``empty_patch_ids`` and ``incomplete_ids`` (no prediction); ``submitted_ids`` and
    ``completed_ids`` only widen the universe.
``experiments_results``
    ``results/results.json`` of a submission in SWE-bench's experiments repository:
    ``resolved``, ``no_generation`` (no prediction) and ``no_logs`` — and in older entries
    ``generated``, ``with_logs``, ``applied``, ``no_apply``, ``install_fail``,
    ``reset_failed``, ``test_errored``, ``test_timeout``.  Unresolved instances are *not
    listed*: they are the rest of the dataset, so the universe is the run's own instance
    set (fixed before any outcome is looked at) and ids the file names outside the run
    are reported, not counted.
``per_instance_map``
    ``{instance_id: {"resolved": bool, ...}}`` (e.g. ``per_instance_details.json``, or
    SWE-bench's per-instance ``report.json`` merged); ``patch_is_None`` or
    ``no_prediction`` true means no prediction.
``swebench_instance_reports``
    a **directory** of SWE-bench's per-instance reports, ``<id>.report.json`` or
    ``<id>/report.json`` (``logs/run_evaluation/<run>/<model>/``), each
    ``{"resolved": bool, "patch_successfully_applied": bool, "tests_status": {category:
    {"success": [...], "failure": [...]}}}``, as SWE-bench writes it (wrapped in
    ``{instance_id: ...}``) or unwrapped. Read like ``per_instance_map``; each entry keeps
    its ``tests_status``, which the comparison reads test by test
    (:mod:`harness.results.vendor_tests`). The universe is the reports found.

Every shape ends as one :class:`Claims`: three disjoint id sets plus per-instance details
(for the vendor's own list names: ``{"listed_in": [...]}``).  An id in two exclusive lists
is refused, naming the file and both lists.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import InputError
from harness.results._io import expect_dict, id_list, read_json
from harness.swebench.layout import REPORT_NAME as SWEBENCH_REPORT_NAME

__all__ = ["Claims", "CLAIM_FORMATS", "load_claims", "load_validity"]

CLAIM_FORMATS = ("harness", "swebench_run_report", "experiments_results", "per_instance_map",
                 "swebench_instance_reports")

_EXPERIMENTS_KEYS = ("resolved", "no_generation", "no_logs", "generated", "with_logs", "applied", "no_apply",
                     "install_fail", "reset_failed", "test_errored", "test_timeout")
_EXPERIMENTS_MARKERS = frozenset(_EXPERIMENTS_KEYS) - {"resolved"}
_SWEBENCH_KEYS = ("resolved_ids", "unresolved_ids", "error_ids", "empty_patch_ids", "incomplete_ids",
                  "submitted_ids", "completed_ids")


@dataclass(frozen=True)
class Claims:
    """A vendor's claimed verdicts.

    ``universe_explicit`` is False when the file does not enumerate unresolved instances
    (``experiments_results``): the comparison then takes the run's instances as the
    universe.  ``note`` says how the file's lists were read.
    """

    path: str
    submission: str | None
    resolved: frozenset[str]
    unresolved: frozenset[str]
    no_prediction: frozenset[str]
    per_instance: Mapping[str, Mapping[str, Any]]
    format: str = "harness"
    universe_explicit: bool = True
    note: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def universe(self) -> tuple[str, ...]:
        """Every instance the claim speaks about (the denominator when ``universe_explicit``)."""
        return tuple(sorted(self.resolved | self.unresolved | self.no_prediction))

    def claim_list(self, instance_id: str) -> str:
        """``resolved``, ``no_prediction`` or ``unresolved`` (also for ids the file does not name)."""
        if instance_id in self.resolved:
            return "resolved"
        return "no_prediction" if instance_id in self.no_prediction else "unresolved"


def _disjoint(path: Path, named: Mapping[str, list[str]]) -> None:
    keys = list(named)
    for i, first in enumerate(keys):
        for second in keys[i + 1:]:
            both = sorted(set(named[first]) & set(named[second]))
            if both:
                raise InputError(f"ids also listed in {first!r}: {', '.join(both)}", source=str(path), field=second)


def _listed_in(lists: Mapping[str, list[str]]) -> dict[str, dict[str, Any]]:
    detail: dict[str, dict[str, Any]] = {}
    for key, ids in lists.items():
        for instance_id in ids:
            detail.setdefault(instance_id, {"listed_in": []})["listed_in"].append(key)
    return detail


def _harness(path: Path, data: dict) -> Claims:
    resolved = id_list(data, "resolved", path, required=True)
    unresolved = id_list(data, "unresolved", path, required=True)
    no_prediction = id_list(data, "no_prediction", path, required=True)
    _disjoint(path, {"resolved": resolved, "unresolved": unresolved, "no_prediction": no_prediction})
    per_instance = data.get("per_instance") or {}
    if not isinstance(per_instance, dict) or not all(isinstance(v, dict) for v in per_instance.values()):
        raise InputError("must be an object {instance_id: {...}}", source=str(path), field="per_instance")
    submission = data.get("submission")
    return Claims(path=str(path), submission=submission if isinstance(submission, str) else None,
                  resolved=frozenset(resolved), unresolved=frozenset(unresolved),
                  no_prediction=frozenset(no_prediction), per_instance=per_instance, format="harness",
                  note="lists resolved / unresolved / no_prediction")


def _swebench(path: Path, data: dict) -> Claims:
    lists = {key: id_list(data, key, path, required=key == "resolved_ids") for key in _SWEBENCH_KEYS}
    exclusive = {key: lists[key] for key in ("resolved_ids", "unresolved_ids", "error_ids", "empty_patch_ids",
                                             "incomplete_ids")}
    _disjoint(path, exclusive)
    resolved = set(lists["resolved_ids"])
    no_prediction = set(lists["empty_patch_ids"]) | set(lists["incomplete_ids"])
    everything = set().union(*map(set, lists.values()))
    unresolved = everything - resolved - no_prediction
    warnings = []
    total = data.get("total_instances")
    if isinstance(total, int) and not isinstance(total, bool) and total != len(everything):
        warnings.append(f"claims: {path.name} says total_instances={total} but lists {len(everything)} "
                        "instance ids; only the listed ids are compared")
    return Claims(path=str(path), submission=path.name.removesuffix(".json"), resolved=frozenset(resolved),
                  unresolved=frozenset(unresolved), no_prediction=frozenset(no_prediction),
                  per_instance=_listed_in(lists), format="swebench_run_report",
                  note="SWE-bench run report: unresolved_ids and error_ids count as claimed unresolved, "
                       "empty_patch_ids and incomplete_ids as no prediction",
                  warnings=tuple(warnings))


def _experiments(path: Path, data: dict) -> Claims:
    lists = {key: id_list(data, key, path, required=key == "resolved") for key in _EXPERIMENTS_KEYS if key in data}
    _disjoint(path, {key: lists[key] for key in ("resolved", "no_generation", "no_logs") if key in lists})
    resolved = set(lists["resolved"])
    no_prediction = set(lists.get("no_generation", ()))
    unresolved = set().union(*map(set, lists.values())) - resolved - no_prediction
    submission = path.parent.parent.name if path.parent.name == "results" else path.name.removesuffix(".json")
    return Claims(path=str(path), submission=submission or None, resolved=frozenset(resolved),
                  unresolved=frozenset(unresolved), no_prediction=frozenset(no_prediction),
                  per_instance=_listed_in(lists), format="experiments_results", universe_explicit=False,
                  note="experiments results.json: lists resolved, no_generation (no prediction) and "
                       "no_logs/... but not every unresolved instance")


def _per_instance_map(path: Path, data: dict) -> Claims:
    resolved: set[str] = set()
    unresolved: set[str] = set()
    no_prediction: set[str] = set()
    for instance_id, entry in data.items():
        if entry.get("patch_is_None") is True or entry.get("no_prediction") is True:
            if entry["resolved"]:
                raise InputError("resolved but without a prediction", source=str(path), record=instance_id,
                                 field="resolved")
            no_prediction.add(instance_id)
        else:
            (resolved if entry["resolved"] else unresolved).add(instance_id)
    return Claims(path=str(path), submission=path.name.removesuffix(".json"), resolved=frozenset(resolved),
                  unresolved=frozenset(unresolved), no_prediction=frozenset(no_prediction),
                  per_instance=data, format="per_instance_map",
                  note="per-instance map: resolved is each entry's boolean")


def _is_per_instance_map(data: dict) -> bool:
    return bool(data) and all(isinstance(v, dict) and isinstance(v.get("resolved"), bool) for v in data.values())


def detect_format(data: dict) -> str:
    """Which of :data:`CLAIM_FORMATS` a parsed claims file has (see the module docstring)."""
    if "resolved_ids" in data:
        return "swebench_run_report"
    if "unresolved" in data or "no_prediction" in data:
        return "harness"
    if "resolved" in data and _EXPERIMENTS_MARKERS & set(data):
        return "experiments_results"
    if "resolved" not in data and _is_per_instance_map(data):
        return "per_instance_map"
    return "harness"  # its error messages name the missing lists


#: the names SWE-bench gives a per-instance report (nested: ``<id>/report.json``, its own layout;
#: flat: ``<id>.report.json``, as copies of it are kept)
_REPORT_NAME = SWEBENCH_REPORT_NAME
_REPORT_SUFFIX = "." + SWEBENCH_REPORT_NAME


def _instance_report(path: Path, instance_id: str) -> dict:
    data = expect_dict(read_json(path, "SWE-bench instance report"), path, None, "SWE-bench instance report")
    if set(data) == {instance_id} and isinstance(data[instance_id], dict):
        data = data[instance_id]          # SWE-bench writes {instance_id: report}
    if not isinstance(data.get("resolved"), bool):
        raise InputError("required boolean field is missing or not a boolean", source=str(path),
                         record=instance_id, field="resolved")
    tests_status = data.get("tests_status")
    if tests_status is not None:
        expect_dict(tests_status, path, "tests_status", "tests_status")
        for category, block in tests_status.items():
            block = expect_dict(block, path, f"tests_status.{category}", f"tests_status.{category}")
            for outcome in ("success", "failure"):
                if not isinstance(block.get(outcome, []), list) or not all(
                        isinstance(t, str) for t in block.get(outcome, [])):
                    raise InputError("must be a list of test ids", source=str(path), record=instance_id,
                                     field=f"tests_status.{category}.{outcome}")
    return data


def _instance_reports(directory: Path) -> Claims:
    found: dict[str, Path] = {}
    for child in sorted(directory.iterdir()):
        if child.is_file() and child.name.endswith(_REPORT_SUFFIX):
            instance_id = child.name[:-len(_REPORT_SUFFIX)]
        elif child.is_dir() and (child / _REPORT_NAME).is_file():
            instance_id, child = child.name, child / _REPORT_NAME
        else:
            continue
        if instance_id in found:
            raise InputError(f"two reports for one instance: {found[instance_id].name} and {child}",
                             source=str(directory), record=instance_id)
        found[instance_id] = child
    if not found:
        raise InputError(f"no SWE-bench instance reports (<id>{_REPORT_SUFFIX} or <id>/{_REPORT_NAME}) here",
                         source=str(directory))
    data = {instance_id: _instance_report(path, instance_id) for instance_id, path in found.items()}
    claims = _per_instance_map(directory, data)
    return Claims(path=str(directory), submission=directory.name if directory.name != "reports" else
                  directory.parent.name, resolved=claims.resolved, unresolved=claims.unresolved,
                  no_prediction=claims.no_prediction, per_instance=data, format="swebench_instance_reports",
                  note=f"{len(data)} SWE-bench per-instance reports: resolved is each report's boolean, "
                       "tests_status is compared test by test")


def load_claims(claims_path: str | os.PathLike[str]) -> Claims:
    """Read a claims file in any of :data:`CLAIM_FORMATS` (a directory: SWE-bench's
    per-instance reports).

    Raises:
        InputError (ValueError): file missing, malformed JSON, a list missing or not a
            list of strings, an id in two exclusive lists, or an empty universe.
    """
    path = Path(claims_path)
    if path.is_dir():
        return _instance_reports(path)
    data = expect_dict(read_json(path, "claims file"), path, None, "claims file")
    reader = {"harness": _harness, "swebench_run_report": _swebench, "experiments_results": _experiments,
              "per_instance_map": _per_instance_map}[detect_format(data)]
    claims = reader(path, data)
    if claims.universe_explicit and not claims.universe:
        raise InputError("claims list no instances at all", source=str(path), field="resolved/unresolved/no_prediction")
    return claims


def load_validity(validity_path: str | os.PathLike[str]) -> dict[str, bool]:
    """Read a validity report ``{"instances": {id: {"reference_full": bool, ...}}}``.

    Returns ``{instance_id: reference_full}``.

    Raises:
        InputError (ValueError): file missing, malformed JSON, ``instances`` missing or
            not an object, or an entry without a boolean ``reference_full``.
    """
    path = Path(validity_path)
    data = expect_dict(read_json(path, "validity report"), path, None, "validity report")
    if "instances" not in data:
        raise InputError("required field is missing", source=str(path), field="instances")
    instances = expect_dict(data["instances"], path, "instances", "instances")
    result: dict[str, bool] = {}
    for instance_id, entry in instances.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("reference_full"), bool):
            raise InputError("must be an object with a boolean reference_full", source=str(path),
                             field=f"instances.{instance_id}.reference_full")
        result[instance_id] = entry["reference_full"]
    return result
