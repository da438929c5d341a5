"""Typed results with provenance, and their JSON shapes.

:class:`InstanceResult` is what one evaluation produces; ``to_report()`` gives
``report.json``: SWE-bench's per-instance keys (``patch_is_None, patch_exists,
patch_successfully_applied, resolved, tests_status``) plus this harness's (``status,
f2p_rate, p2p_rate, missing, error_reason, error_origin, integrity, timings, image,
checksums, commands, exception, attempts, resources``).

:func:`summarise` builds ``summary.json`` with SWE-bench's run-report keys plus
``invalid_ids`` and ``error_reasons``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from harness._version import __version__
from harness.grading.status import ErrorReason, InstanceStatus
from harness.paths import ATTEMPT_PREFIX, REPORT
#: Version of the report.json / summary.json layout.
SCHEMA_VERSION = 2


@dataclass
class CommandRecord:
    """One command run in the sandbox. ``duration`` in seconds; ``output_tail`` is the
    last few KiB of its output (the full test output is stored in its own file)."""

    phase: str
    argv: list[str]
    exit_code: int | None
    duration: float
    timed_out: bool = False
    truncated: bool = False
    output_tail: str = ""


@dataclass
class InstanceResult:
    instance_id: str
    repo: str
    model_name_or_path: str
    status: InstanceStatus
    resolved: bool = False
    attempt: int | None = None
    error_reason: ErrorReason | None = None
    error_detail: str = ""
    patch_is_None: bool = False
    patch_exists: bool = False
    patch_successfully_applied: bool = False
    apply_strategy: str | None = None
    f2p_success: list[str] = field(default_factory=list)
    f2p_failure: list[str] = field(default_factory=list)
    p2p_success: list[str] = field(default_factory=list)
    p2p_failure: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    f2p_rate: float | None = None
    p2p_rate: float | None = None
    integrity_flags: list[str] = field(default_factory=list)
    integrity_details: dict[str, Any] = field(default_factory=dict)
    parser: str = ""
    parse_source: str = "none"
    parse_notes: list[str] = field(default_factory=list)
    test_exit_code: int | None = None
    timings: dict[str, float] = field(default_factory=dict)
    image: dict[str, Any] = field(default_factory=dict)
    checksums: dict[str, str] = field(default_factory=dict)
    commands: list[CommandRecord] = field(default_factory=list)
    exception: dict[str, str] | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    collected: list[str] = field(default_factory=list)
    cost: float | None = None
    calls: int | None = None
    #: who the error is charged to when the evidence says otherwise than the reason's
    #: default (harness/grading/origins.py); None: the default
    origin: str | None = None
    runner: str = ""
    id_convention: str = ""
    #: the node that evaluated it (host name, or the cluster node's name)
    node: str = ""
    #: what the sandbox was given: ``cpus`` (harness.engine.cpus.CpuLimit.as_dict)
    resources: dict[str, Any] = field(default_factory=dict)

    @property
    def error_origin(self) -> str | None:
        if self.error_reason is None:
            return None
        return self.origin or self.error_reason.origin

    def to_report(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "repo": self.repo,
            "model_name_or_path": self.model_name_or_path,
            "attempt": self.attempt,
            "patch_is_None": self.patch_is_None,
            "patch_exists": self.patch_exists,
            "patch_successfully_applied": self.patch_successfully_applied,
            "resolved": self.resolved,
            "tests_status": {
                "FAIL_TO_PASS": {"success": self.f2p_success, "failure": self.f2p_failure},
                "PASS_TO_PASS": {"success": self.p2p_success, "failure": self.p2p_failure},
            },
            "status": self.status.value,
            "f2p_rate": self.f2p_rate,
            "p2p_rate": self.p2p_rate,
            "missing": self.missing,
            "error_reason": self.error_reason.value if self.error_reason else None,
            "error_origin": self.error_origin,
            "error_detail": self.error_detail,
            "apply_strategy": self.apply_strategy,
            "integrity": {**self.integrity_details, "flags": self.integrity_flags},
            "parser": {"name": self.parser, "source": self.parse_source, "notes": self.parse_notes,
                       "runner": self.runner, "id_convention": self.id_convention},
            "test_exit_code": self.test_exit_code,
            "timings": self.timings,
            "image": self.image,
            "checksums": self.checksums,
            "commands": [asdict(c) for c in self.commands],
            "exception": self.exception,
            "attempts": self.attempts,
            "cost": self.cost,
            "calls": self.calls,
            "collected": self.collected,
            "node": self.node,
            "resources": self.resources,
            "harness_version": __version__,
            "schema_version": SCHEMA_VERSION,
        }

    @classmethod
    def from_report(cls, data: dict[str, Any]) -> "InstanceResult":
        """Rebuild from report.json (for resume and re-grading)."""
        ts = data.get("tests_status") or {}
        integrity = dict(data.get("integrity") or {})
        flags = integrity.pop("flags", [])
        parser = data.get("parser") or {}
        reason = data.get("error_reason")
        origin = data.get("error_origin")
        return cls(
            instance_id=data["instance_id"], repo=data.get("repo", ""),
            model_name_or_path=data.get("model_name_or_path", ""), status=InstanceStatus(data["status"]),
            resolved=bool(data.get("resolved")), attempt=data.get("attempt"),
            error_reason=ErrorReason(reason) if reason else None, error_detail=data.get("error_detail", ""),
            patch_is_None=data.get("patch_is_None", False), patch_exists=data.get("patch_exists", False),
            patch_successfully_applied=data.get("patch_successfully_applied", False),
            apply_strategy=data.get("apply_strategy"),
            f2p_success=ts.get("FAIL_TO_PASS", {}).get("success", []),
            f2p_failure=ts.get("FAIL_TO_PASS", {}).get("failure", []),
            p2p_success=ts.get("PASS_TO_PASS", {}).get("success", []),
            p2p_failure=ts.get("PASS_TO_PASS", {}).get("failure", []),
            missing=data.get("missing", []), f2p_rate=data.get("f2p_rate"), p2p_rate=data.get("p2p_rate"),
            integrity_flags=flags, integrity_details=integrity, parser=parser.get("name", ""),
            parse_source=parser.get("source", "none"), parse_notes=parser.get("notes", []),
            test_exit_code=data.get("test_exit_code"), timings=data.get("timings", {}),
            image=data.get("image", {}), checksums=data.get("checksums", {}),
            commands=[CommandRecord(**c) for c in data.get("commands", [])],
            exception=data.get("exception"), attempts=data.get("attempts", []),
            cost=data.get("cost"), calls=data.get("calls"), collected=data.get("collected", []),
            origin=origin if reason and origin != ErrorReason(reason).origin else None,
            runner=parser.get("runner", ""), id_convention=parser.get("id_convention", ""),
            node=data.get("node") or "", resources=dict(data.get("resources") or {}),
        )


#: The id lists of ``summary.json`` that never share an id with ``resolved_ids`` (what
#: :func:`summarise` and :func:`summarise_run_directory` guarantee, and all a reader may
#: require). ``empty_patch_ids`` may share ids with it: an empty patch is graded like any
#: other, and it resolves where the dataset's FAIL_TO_PASS tests already pass without the fix.
DISJOINT_FROM_RESOLVED = ("unresolved_ids", "error_ids", "invalid_ids", "no_prediction_ids")


def summarise(run_id: str, model: str, total_ids: Iterable[str], results: Iterable[InstanceResult],
              input_errors: dict[str, str], empty_patch_ids: Iterable[str] = ()) -> dict[str, Any]:
    """The run report.

    Denominators: ``total_instances`` counts every instance in the set (valid or not,
    with or without a prediction); ``submitted_instances`` those with a prediction;
    ``completed_instances`` those graded with a status other than INVALID;
    ``error_instances`` INVALID for a harness or instance reason, plus malformed inputs.
    Every submitted id is in exactly one of resolved/unresolved/error; instances without
    a prediction count only in the total (and so lower the rate).

    With repeated attempts, the instance's verdict here is its first attempt's (the
    lowest ``attempt``); all attempts are summarised by ``harness compare``.
    """
    first: dict[str, InstanceResult] = {}
    for r in results:
        kept = first.get(r.instance_id)
        if kept is None or (r.attempt or 0) < (kept.attempt or 0):
            first[r.instance_id] = r
    results = list(first.values())
    total = sorted(set(total_ids))
    error = sorted({*(r.instance_id for r in results
                      if r.error_reason and r.error_origin != "model"), *input_errors})
    resolved = sorted(r.instance_id for r in results if r.resolved and r.instance_id not in error)
    unresolved = sorted(r.instance_id for r in results
                        if not r.resolved and r.instance_id not in error)
    invalid = sorted(r.instance_id for r in results if r.status is InstanceStatus.INVALID)
    completed = sorted(r.instance_id for r in results if r.status is not InstanceStatus.INVALID)
    reasons = {r.instance_id: r.error_reason.value for r in results if r.error_reason}
    reasons.update({k: "malformed_input" for k in input_errors})
    by_origin: dict[str, list[str]] = {"model": [], "instance": [], "harness": []}
    for r in results:
        if r.error_reason:
            by_origin[r.error_origin].append(r.instance_id)
    by_origin["instance"].extend(sorted(input_errors))
    status_counts: dict[str, int] = {}
    for r in results:
        status_counts[r.status.value] = status_counts.get(r.status.value, 0) + 1
    submitted = sorted({r.instance_id for r in results})
    empty = sorted(set(empty_patch_ids))
    return {
        "run_id": run_id,
        "model_name_or_path": model,
        "total_instances": len(total),
        "submitted_instances": len(submitted),
        "completed_instances": len(completed),
        "resolved_instances": len(resolved),
        "unresolved_instances": len(unresolved),
        "empty_patch_instances": len(empty),
        "error_instances": len(error),
        "completed_ids": completed,
        "resolved_ids": resolved,
        "unresolved_ids": unresolved,
        "empty_patch_ids": empty,
        "error_ids": error,
        "invalid_ids": invalid,
        "submitted_ids": submitted,
        "error_reasons": reasons,
        "errors_by_origin": by_origin,
        "input_errors": input_errors,
        "status_counts": status_counts,
        "resolve_rate": {"resolved": len(resolved), "denominator": len(total),
                         "rate": (len(resolved) / len(total)) if total else None},
        "harness_version": __version__,
        "schema_version": SCHEMA_VERSION,
    }


@dataclass(frozen=True)
class SlimResult:
    """What the summary needs of one result (read from its report.json)."""

    instance_id: str
    attempt: int | None
    status: InstanceStatus
    resolved: bool
    error_reason: ErrorReason | None
    patch_exists: bool

    @property
    def error_origin(self) -> str | None:
        return self.error_reason.origin if self.error_reason else None


def iter_run_results(root: Path) -> Iterator[SlimResult]:
    """Every graded result in a run directory (``<id>/report.json`` and
    ``<id>/attempt-<n>/report.json``), whatever sitting wrote it, one at a time.
    Unreadable reports are skipped (incomplete: report.json is written last)."""
    def slim(path: str) -> SlimResult | None:
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
            reason = data.get("error_reason")
            return SlimResult(data["instance_id"], data.get("attempt"), InstanceStatus(data["status"]),
                              bool(data.get("resolved")), ErrorReason(reason) if reason else None,
                              bool(data.get("patch_exists")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    with os.scandir(root) as entries:
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False) or entry.name.startswith("."):
                continue
            found = slim(os.path.join(entry.path, REPORT))
            if found is not None:
                yield found
            with os.scandir(entry.path) as inner:
                for sub in inner:
                    if sub.name.startswith(ATTEMPT_PREFIX) and sub.is_dir(follow_symlinks=False):
                        found = slim(os.path.join(sub.path, REPORT))
                        if found is not None:
                            yield found


def summarise_run_directory(run_id: str, model: str, root: Path, set_ids: Iterable[str],
                            fresh_keys: Iterable[tuple[str, int | None]], input_errors: dict[str, str],
                            without_prediction: Iterable[str] = ()) -> dict[str, Any]:
    """``summary.json`` over every graded instance in the run directory (earlier
    sittings included), read from disk; ``this_invocation`` reports the tasks just run
    (``fresh_keys``: their (instance id, attempt)). ``no_prediction_ids`` are the set's
    instances without a prediction (``without_prediction``) and without a result in the
    directory: one an earlier sitting graded is counted by that result."""
    results = sorted(iter_run_results(root), key=lambda r: (r.instance_id, r.attempt or 0))
    fresh = set(fresh_keys)
    now_results = [r for r in results if (r.instance_id, r.attempt) in fresh]
    set_ids = set(set_ids)
    all_ids = sorted({*set_ids, *(r.instance_id for r in results)})
    summary = summarise(run_id, model, all_ids, results, input_errors,
                        empty_patch_ids=[r.instance_id for r in results if not r.patch_exists])
    now = summarise(run_id, model, sorted(set_ids), now_results, input_errors,
                    empty_patch_ids=[r.instance_id for r in now_results if not r.patch_exists])
    summary["this_invocation"] = {key: now[key] for key in (
        "total_instances", "submitted_instances", "resolved_instances", "error_instances", "submitted_ids",
        "resolved_ids", "unresolved_ids", "error_ids")}
    summary["graded_in_directory"] = len(results)
    summary["no_prediction_ids"] = sorted(set(without_prediction) - set(summary["submitted_ids"]))
    return summary


def load_report(path: Path) -> InstanceResult | None:
    """The result a ``report.json`` holds, or None when it is absent or unreadable."""
    try:
        return InstanceResult.from_report(json.loads(Path(path).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
