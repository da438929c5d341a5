"""Typed results with provenance, and their JSON shapes.

:class:`InstanceResult` is what one evaluation produces; ``to_report()`` gives
``report.json``: SWE-bench's per-instance keys (``patch_is_None, patch_exists,
patch_successfully_applied, resolved, tests_status``) plus this harness's (``status,
f2p_rate, p2p_rate, missing, error_reason, error_origin, integrity, timings, image,
checksums, commands, exception, attempts, resources``), and what the prediction said the
agent spent and how it ended (``cost, calls, steps, agent_seconds, exit_status``: null
when the prediction did not say).

:func:`summarise` builds ``summary.json`` with SWE-bench's run-report keys plus
``invalid_ids`` and ``error_reasons``, and, for an agent run, the ``agent`` block
(:mod:`harness.results.agent_metrics`).
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
from harness.results import stats
from harness.results.agent_metrics import agent_metrics
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
    #: the agent's attempt, as its prediction recorded it (harness.inputs.predictions.AGENT_FIELDS)
    steps: int | None = None
    agent_seconds: float | None = None
    exit_status: str | None = None
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
            "steps": self.steps,
            "agent_seconds": self.agent_seconds,
            "exit_status": self.exit_status,
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
            steps=data.get("steps"), agent_seconds=data.get("agent_seconds"), exit_status=data.get("exit_status"),
            origin=origin if reason and origin != ErrorReason(reason).origin else None,
            runner=parser.get("runner", ""), id_convention=parser.get("id_convention", ""),
            node=data.get("node") or "", resources=dict(data.get("resources") or {}),
        )


#: ``error_origin`` values that make an attempt an infrastructure error: the verdict says
#: nothing about the agent (the harness broke, or the instance itself is defective).
INFRA_ORIGINS = frozenset({"harness", "instance"})


def repo_of(instance_id: str, report_repo: str | None = None) -> str:
    """Repository slice key for an instance, always in ``owner/name`` form.

    The report's ``repo`` field wins when present.  Otherwise it is derived from the id
    (``pytest-dev__pytest-5227`` -> ``pytest-dev__pytest`` -> ``pytest-dev/pytest``); the
    ``__`` is turned back into ``/`` so instances with and without a report land in the
    same slice.
    """
    if report_repo:
        return report_repo
    base = instance_id.rsplit("-", 1)[0]
    return base.replace("__", "/", 1) if "__" in base else base


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
    lowest ``attempt``); all attempts are summarised by ``harness compare``, and, with
    agent fields or attempts, by the ``agent`` block (:func:`agent_block`, over the same
    instances as ``total_instances``).
    """
    results = list(results)
    agent = agent_block(results, total_ids)
    first: dict[str, InstanceResult] = {}
    for r in results:
        kept = first.get(r.instance_id)
        if kept is None or (r.attempt or 0) < (kept.attempt or 0):
            first[r.instance_id] = r
    results = list(first.values())
    total = sorted(set(total_ids))
    # an input error counts as an instance's error only when it names an instance of the set
    # (a refused prediction of a good record); a refused record is never an instance itself
    counted_inputs = sorted(set(input_errors) & set(total))
    error = sorted({*(r.instance_id for r in results
                      if r.error_reason and r.error_origin != "model"), *counted_inputs})
    resolved = sorted(r.instance_id for r in results if r.resolved and r.instance_id not in error)
    unresolved = sorted(r.instance_id for r in results
                        if not r.resolved and r.instance_id not in error)
    invalid = sorted(r.instance_id for r in results if r.status is InstanceStatus.INVALID)
    completed = sorted(r.instance_id for r in results if r.status is not InstanceStatus.INVALID)
    reasons = {r.instance_id: r.error_reason.value for r in results if r.error_reason}
    reasons.update({k: "malformed_input" for k in counted_inputs})
    by_origin: dict[str, list[str]] = {"model": [], "instance": [], "harness": []}
    for r in results:
        if r.error_reason:
            by_origin[r.error_origin].append(r.instance_id)
    by_origin["instance"].extend(counted_inputs)
    status_counts: dict[str, int] = {}
    for r in results:
        status_counts[r.status.value] = status_counts.get(r.status.value, 0) + 1
    submitted = sorted({r.instance_id for r in results})
    empty = sorted(set(empty_patch_ids))
    summary = {
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
    if agent is not None:
        summary["agent"] = agent
    return summary


def agent_block(results: Iterable[Any], total_ids: Iterable[str]) -> dict[str, Any] | None:
    """``summary.json``'s ``agent`` block: the metric vector of every attempt in ``results``
    (:class:`InstanceResult` or :class:`SlimResult`) over the instances ``total_ids`` (and
    any instance a result names); None for a run without agent fields or attempts.

    Numbered attempts make an instance's attempts (a result without a number counts as
    attempt 1 only where the instance has no numbered one).  An attempt whose agent
    fields cannot be counted (a report edited by hand: a negative cost, a string for a
    step count) is counted lost and named in ``unreadable_attempts``, never dropped.
    """
    results = list(results)
    numbered: dict[str, dict[int, stats.Attempt]] = {}
    repos: dict[str, str] = {}
    unreadable: list[str] = []
    has_numbers = {r.instance_id for r in results if r.attempt is not None}
    for r in results:
        if r.attempt is None and r.instance_id in has_numbers:
            continue
        number = 1 if r.attempt is None else r.attempt
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            unreadable.append(f"{r.instance_id} attempt {number!r}: attempt numbers are integers from 1")
            continue
        charged = r.origin or (r.error_reason.origin if r.error_reason else None)
        attempt = stats.Attempt(success=bool(r.resolved), infra_error=charged in INFRA_ORIGINS, calls=r.calls,
                                cost=r.cost, steps=r.steps, agent_seconds=r.agent_seconds,
                                exit_status=r.exit_status)
        try:
            stats.check_attempt(f"{r.instance_id} attempt {number}", attempt)
        except ValueError as exc:
            unreadable.append(str(exc))
            continue
        numbered.setdefault(r.instance_id, {})[number] = attempt
        repos.setdefault(r.instance_id, r.repo if isinstance(r.repo, str) and r.repo else repo_of(r.instance_id))
    universe = sorted({*total_ids, *(r.instance_id for r in results)})
    for instance_id in universe:
        repos.setdefault(instance_id, repo_of(instance_id))
    metrics = agent_metrics(numbered, universe, repos, has_attempts=bool(has_numbers))
    if metrics is None:
        return None
    block = metrics.to_json()
    if unreadable:
        block["unreadable_attempts"] = unreadable
    return block


@dataclass(frozen=True)
class SlimResult:
    """What the summary needs of one result (read from its report.json)."""

    instance_id: str
    attempt: int | None
    status: InstanceStatus
    resolved: bool
    error_reason: ErrorReason | None
    patch_exists: bool
    repo: str = ""
    #: the recorded origin where it is not the reason's own (InstanceResult.origin)
    origin: str | None = None
    cost: float | None = None
    calls: int | None = None
    steps: int | None = None
    agent_seconds: float | None = None
    exit_status: str | None = None

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
            reason = ErrorReason(data["error_reason"]) if data.get("error_reason") else None
            origin = data.get("error_origin")
            return SlimResult(data["instance_id"], data.get("attempt"), InstanceStatus(data["status"]),
                              bool(data.get("resolved")), reason, bool(data.get("patch_exists")),
                              repo=data.get("repo") or "",
                              origin=origin if reason and isinstance(origin, str) and origin != reason.origin else None,
                              cost=data.get("cost"), calls=data.get("calls"), steps=data.get("steps"),
                              agent_seconds=data.get("agent_seconds"), exit_status=data.get("exit_status"))
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
