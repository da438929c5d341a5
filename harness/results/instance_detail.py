"""One instance's evidence, as its page shows it: :class:`InstanceDetail`.

Read from the instance's directory (``report.json``, ``instance.json``, ``patch.diff``,
``test_output.txt``).  Everything here came out of a patch, a test run or an instance
record and is **hostile text**: it is kept as plain strings, classified (diff lines,
test outcomes) but never interpreted; views must escape it.

Large files are excerpted, never loaded whole into a page: the patch up to
:data:`MAX_PATCH_LINES` lines, the test output up to :data:`OUTPUT_HEAD` +
:data:`OUTPUT_TAIL` bytes (its head and its tail, where failures are summarised); the
page links to the full files.

An agent's prediction also recorded what its attempt spent and how it ended; the page
shows those of every attempt of the instance (:class:`AgentAttemptRow`), read from each
attempt's ``report.json``.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import InputError
from harness.paths import COMMANDS, INSTANCE_RECORD, PATCH, REPORT, TEST_OUTPUT, InstanceFiles
from harness.results._io import expect_dict, read_json, tests_ran
from harness.results.flag_meanings import flag_meaning, split_flags

__all__ = ["MAX_PATCH_LINES", "OUTPUT_HEAD", "OUTPUT_TAIL", "TestRow", "DiffLine", "PatchView", "TextExcerpt",
           "CommandRow", "AgentAttemptRow", "InstanceDetail", "agent_attempt_rows", "classify_diff", "excerpt", "load_instance_detail", "verdict_sentence"]

MAX_PATCH_LINES = 20_000
OUTPUT_HEAD = 64 * 1024
OUTPUT_TAIL = 960 * 1024
# Files the page links to: only types a browser shows as text.  results.xml is written
# inside the container (hostile) and an XML document may carry XHTML scripts: not linked.
RAW_FILES = (REPORT, PATCH, TEST_OUTPUT, COMMANDS, INSTANCE_RECORD)

_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
# Colour and cursor escapes make test output unreadable as text; other control characters
# (but tab and newline) are shown as U+FFFD.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True)
class TestRow:
    """A graded test: ``group`` FAIL_TO_PASS or PASS_TO_PASS; ``outcome`` passed, failed,
    missing (not in the results: counts as failed), not_run (the run never reached its
    tests: a patch that did not apply, an environment that did not build) or not_graded
    (the id names no test)."""

    __test__ = False  # not a pytest class

    group: str
    test_id: str
    outcome: str


@dataclass(frozen=True)
class DiffLine:
    """``kind``: file, meta, hunk, add, del, ctx, note; ``old``/``new`` line numbers in hunks."""

    kind: str
    text: str
    old: int | None
    new: int | None


@dataclass(frozen=True)
class PatchView:
    size: int
    files: tuple[str, ...]
    lines: tuple[DiffLine, ...]
    added: int
    removed: int
    truncated_lines: int  # lines not shown (past MAX_PATCH_LINES)


@dataclass(frozen=True)
class TextExcerpt:
    """``text`` is the whole file when ``omitted`` is 0, else its head and tail with
    ``omitted`` bytes cut from the middle."""

    size: int
    head: str
    tail: str
    omitted: int


@dataclass(frozen=True)
class CommandRow:
    phase: str
    command: str
    exit_code: int | None
    duration: float | None
    timed_out: bool
    truncated: bool
    output_tail: str


@dataclass(frozen=True)
class AgentAttemptRow:
    """One attempt of the instance as its prediction recorded it (None: not recorded).
    ``status`` is that attempt's verdict (``UNREADABLE`` when its report could not be
    read); ``current`` marks the attempt the page is about."""

    label: str
    report_dir: str
    current: bool
    status: str
    resolved: bool
    cost: float | None
    calls: int | None
    steps: int | None
    agent_seconds: float | None
    exit_status: str | None


@dataclass(frozen=True)
class InstanceDetail:
    """Everything an instance page shows.  ``report_dir`` is relative to the run directory."""

    run_id: str
    report_dir: str
    instance_id: str
    attempt: int | None
    repo: str
    model_name_or_path: str
    status: str
    resolved: bool
    verdict: str
    error_reason: str | None
    error_origin: str | None
    error_detail: str
    tests: tuple[TestRow, ...]
    test_counts: tuple[tuple[str, int], ...]  # (outcome, count) for outcomes that occur
    patch: PatchView | None
    test_output: TextExcerpt | None
    commands: tuple[CommandRow, ...]
    timings: tuple[tuple[str, float], ...]
    integrity_flags: tuple[str, ...]      # the report's flags that are flags ...
    integrity_notes: tuple[str, ...]      # ... and those that are notes (harness/results/flag_meanings.py)
    #: (flag or note, what it means) for each of both, flags first
    flag_meanings: tuple[tuple[str, str], ...]
    integrity_details: tuple[tuple[str, str], ...]
    provenance: tuple[tuple[str, str], ...]
    exception: str | None
    retries: tuple[str, ...]
    problem_statement: str | None
    raw_files: tuple[str, ...]
    siblings: tuple[tuple[str, str], ...]  # (label, report_dir) of every attempt of the instance
    warnings: tuple[str, ...]
    #: every attempt's agent fields; empty when no attempt recorded any
    agent_attempts: tuple[AgentAttemptRow, ...] = ()


def classify_diff(text: str, max_lines: int = MAX_PATCH_LINES) -> tuple[tuple[DiffLine, ...], tuple[str, ...], int, int, int]:
    """Classify a unified diff line by line: (lines, files, added, removed, lines not kept).

    Hunk headers are counted, so a removed line that reads ``--- x`` inside a hunk is a
    deletion, not a file header.  Malformed input never fails: unknown lines are ``meta``.
    """
    raw_lines = text.split("\n")
    if raw_lines and raw_lines[-1] == "":
        raw_lines.pop()
    out: list[DiffLine] = []
    files: dict[str, None] = {}
    old_left = new_left = old_no = new_no = added = removed = 0
    minus_path = ""
    for raw in raw_lines:
        kind, old, new = "", None, None
        if old_left > 0 or new_left > 0:
            head = raw[:1]
            if head == "+":
                kind, new, new_no, new_left, added = "add", new_no, new_no + 1, new_left - 1, added + 1
            elif head == "-":
                kind, old, old_no, old_left, removed = "del", old_no, old_no + 1, old_left - 1, removed + 1
            elif head in (" ", ""):
                kind, old, new = "ctx", old_no, new_no
                old_no, new_no, old_left, new_left = old_no + 1, new_no + 1, old_left - 1, new_left - 1
            elif head == "\\":
                kind = "note"
            else:
                old_left = new_left = 0  # the hunk ended early: read this line as a header
        if not kind:
            kind = "meta"
            match = _HUNK.match(raw)
            if match:
                kind = "hunk"
                old_no, new_no = int(match.group(1)), int(match.group(3))
                old_left = int(match.group(2)) if match.group(2) is not None else 1
                new_left = int(match.group(4)) if match.group(4) is not None else 1
            elif raw.startswith("diff "):
                kind = "file"
            elif raw.startswith("--- "):
                minus_path = raw[4:].split("\t")[0]
            elif raw.startswith("+++ "):
                path = raw[4:].split("\t")[0]
                path = minus_path if path == "/dev/null" else path
                files[path[2:] if path.startswith(("a/", "b/")) else path] = None
            elif raw.startswith("\\"):
                kind = "note"
        if len(out) < max_lines:
            out.append(DiffLine(kind, raw, old, new))
    return tuple(out), tuple(files), added, removed, max(0, len(raw_lines) - max_lines)


def clean_text(text: str) -> str:
    """Output as readable text: ANSI escapes removed, other control characters shown as U+FFFD."""
    return _CONTROL.sub("\ufffd", _ANSI.sub("", text.replace("\r\n", "\n")))


def excerpt(path: Path, head: int = OUTPUT_HEAD, tail: int = OUTPUT_TAIL) -> TextExcerpt | None:
    """Head and tail of a text file (all of it when it fits), decoded leniently."""
    if not path.is_file():
        return None
    size = path.stat().st_size
    with path.open("rb") as handle:
        if size <= head + tail:
            return TextExcerpt(size=size, head=clean_text(handle.read().decode("utf-8", "replace")), tail="", omitted=0)
        first = handle.read(head)
        handle.seek(size - tail)
        last = handle.read(tail)
    return TextExcerpt(size=size, head=clean_text(first.decode("utf-8", "replace")),
                       tail=clean_text(last.decode("utf-8", "replace")), omitted=size - head - tail)


def verdict_sentence(status: str, resolved: bool, f2p: tuple[int, int], p2p: tuple[int, int],
                     error_reason: str | None, error_origin: str | None) -> str:
    """The verdict in words, with the counts that decided it."""
    counts = f"{f2p[0]} of {f2p[1]} FAIL_TO_PASS tests fixed, {p2p[0]} of {p2p[1]} PASS_TO_PASS tests kept"
    if status == "FULL" and resolved:
        return f"Resolved: {counts}."
    if status == "INVALID":
        origin = f", origin {error_origin}" if error_origin else ""
        return f"Not valid evidence ({error_reason or 'no reason recorded'}{origin}); counted as not resolved."
    if status == "PARTIAL":
        return f"Not resolved (partial): {counts}."
    if status == "NO":
        return f"Not resolved: {counts}."
    return f"Status {status}; {'resolved' if resolved else 'not resolved'}."


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _tests(report: Mapping[str, Any], instance: Mapping[str, Any]) -> tuple[TestRow, ...]:
    status = report.get("tests_status") if isinstance(report.get("tests_status"), dict) else {}
    missing = set(_strings(report.get("missing")))
    ran = tests_ran(report) or report.get("status") != "INVALID"
    rows: list[TestRow] = []
    for group in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        block = status.get(group) if isinstance(status.get(group), dict) else {}
        passed, failed = _strings(block.get("success")), _strings(block.get("failure"))
        outcome = {t: "passed" for t in passed}
        outcome.update({t: ("not_run" if not ran else "missing" if t in missing else "failed") for t in failed})
        listed = _strings(instance.get(group))
        for test in [*listed, *[t for t in [*passed, *failed] if t not in set(listed)]]:
            rows.append(TestRow(group, test, outcome.get(test, "not_graded")))
    return tuple(rows)


def _pairs(prefix: str, value: Any) -> list[tuple[str, str]]:
    if isinstance(value, dict):
        return [(f"{prefix}{k}", v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))
                for k, v in value.items()]
    return [] if value in (None, "", [], {}) else [(prefix.rstrip("."), json.dumps(value, ensure_ascii=False))]


def _commands(value: Any) -> tuple[CommandRow, ...]:
    rows = []
    for entry in value if isinstance(value, list) else []:
        if not isinstance(entry, dict):
            continue
        argv = entry.get("argv")
        command = shlex.join(str(a) for a in argv) if isinstance(argv, list) else str(argv)
        duration = entry.get("duration")
        exit_code = entry.get("exit_code")
        rows.append(CommandRow(phase=str(entry.get("phase", "")), command=command,
                               exit_code=exit_code if isinstance(exit_code, int) else None,
                               duration=float(duration) if isinstance(duration, (int, float)) else None,
                               timed_out=entry.get("timed_out") is True, truncated=entry.get("truncated") is True,
                               output_tail=clean_text(str(entry.get("output_tail") or ""))))
    return tuple(rows)


def _agent_row(label: str, report_dir: str, current: bool, report: Mapping[str, Any]) -> AgentAttemptRow:
    def number(key: str) -> float | None:
        value = report.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def count(key: str) -> int | None:
        value = report.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    status = report.get("exit_status")
    return AgentAttemptRow(label=label, report_dir=report_dir, current=current,
                           status=str(report.get("status") or "NO_REPORT"), resolved=report.get("resolved") is True,
                           cost=number("cost"), calls=count("calls"), steps=count("steps"),
                           agent_seconds=number("agent_seconds"), exit_status=status if isinstance(status, str) else None)


def agent_attempt_rows(run_dir: str | Path, report_dir: str, report: Mapping[str, Any],
                       siblings: tuple[tuple[str, str], ...]) -> tuple[tuple[AgentAttemptRow, ...], tuple[str, ...]]:
    """The agent fields of every attempt (``siblings``; the page's own report when it has
    none), and warnings for sibling reports that could not be read.  Empty when no attempt
    recorded an agent field."""
    rows: list[AgentAttemptRow] = []
    warnings: list[str] = []
    for label, directory in siblings or (("this prediction", report_dir),):
        if directory == report_dir:
            rows.append(_agent_row(label, directory, True, report))
            continue
        path = InstanceFiles(Path(run_dir) / directory).report
        try:
            rows.append(_agent_row(label, directory, False, expect_dict(read_json(path, "instance report"), path,
                                                                         None, "report")))
        except InputError as exc:
            warnings.append(f"{label}: {exc}")
            rows.append(AgentAttemptRow(label, directory, False, "UNREADABLE", False, None, None, None, None, None))
    recorded = any(value is not None for row in rows
                   for value in (row.cost, row.calls, row.steps, row.agent_seconds, row.exit_status))
    return (tuple(rows) if recorded else ()), tuple(warnings)


def load_instance_detail(run_dir: str | Path, report_dir: str, run_id: str,
                         siblings: tuple[tuple[str, str], ...] = ()) -> InstanceDetail:
    """Read the instance directory ``run_dir/report_dir``.

    Raises:
        InputError (ValueError): report.json is missing or not a JSON object.
    """
    directory = Path(run_dir) / report_dir
    stored = InstanceFiles(directory)
    report_path = stored.report
    report = expect_dict(read_json(report_path, "instance report"), report_path, None, "report")
    warnings: list[str] = []
    instance: dict[str, Any] = {}
    if stored.instance_record.is_file():
        try:
            instance = expect_dict(read_json(stored.instance_record, "instance record"),
                                   stored.instance_record, None, "instance record")
        except InputError as exc:
            warnings.append(str(exc))
    tests = _tests(report, instance)
    f2p = (sum(t.outcome == "passed" for t in tests if t.group == "FAIL_TO_PASS"),
           sum(t.outcome != "not_graded" for t in tests if t.group == "FAIL_TO_PASS"))
    p2p = (sum(t.outcome == "passed" for t in tests if t.group == "PASS_TO_PASS"),
           sum(t.outcome != "not_graded" for t in tests if t.group == "PASS_TO_PASS"))
    status = str(report.get("status") or "NO_REPORT")
    resolved = report.get("resolved") is True
    error_reason = report.get("error_reason") if isinstance(report.get("error_reason"), str) else None
    error_origin = report.get("error_origin") if isinstance(report.get("error_origin"), str) else None

    patch = None
    patch_path = stored.patch
    if patch_path.is_file():
        text = patch_path.read_bytes().decode("utf-8", "replace")
        lines, files, added, removed, cut = classify_diff(text)
        patch = PatchView(size=patch_path.stat().st_size, files=files, lines=lines, added=added, removed=removed,
                          truncated_lines=cut)
    timings = report.get("timings") if isinstance(report.get("timings"), dict) else {}
    integrity = dict(report.get("integrity")) if isinstance(report.get("integrity"), dict) else {}
    flags, notes = split_flags(tuple(_strings(integrity.pop("flags", []))))
    parser = report.get("parser") if isinstance(report.get("parser"), dict) else {}
    provenance = [*_pairs("parser.", parser), ("apply_strategy", str(report.get("apply_strategy"))),
                  ("test_exit_code", str(report.get("test_exit_code"))), *_pairs("image.", report.get("image")),
                  *_pairs("checksum.", report.get("checksums")),
                  ("harness_version", str(report.get("harness_version"))),
                  ("schema_version", str(report.get("schema_version")))]
    exception = report.get("exception")
    attempt = report.get("attempt")
    problem = instance.get("problem_statement")
    agent_rows, unread = agent_attempt_rows(run_dir, report_dir, report, siblings)
    warnings.extend(unread)
    return InstanceDetail(
        run_id=run_id, report_dir=report_dir, instance_id=str(report.get("instance_id", report_dir)),
        attempt=attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None,
        repo=str(report.get("repo") or ""), model_name_or_path=str(report.get("model_name_or_path") or ""),
        status=status, resolved=resolved,
        verdict=verdict_sentence(status, resolved, f2p, p2p, error_reason, error_origin),
        error_reason=error_reason, error_origin=error_origin, error_detail=str(report.get("error_detail") or ""),
        tests=tests, test_counts=tuple((o, n) for o in ("passed", "failed", "missing", "not_run", "not_graded")
                                       if (n := sum(t.outcome == o for t in tests))),
        patch=patch, test_output=excerpt(stored.test_output),
        commands=_commands(report.get("commands")),
        timings=tuple((str(k), float(v)) for k, v in timings.items()
                      if isinstance(v, (int, float)) and not isinstance(v, bool)),
        integrity_flags=flags, integrity_notes=notes, flag_meanings=tuple((f, flag_meaning(f)) for f in (*flags, *notes)),
        integrity_details=tuple((k, json.dumps(v, indent=1, ensure_ascii=False)) for k, v in integrity.items()),
        provenance=tuple(provenance),
        exception=json.dumps(exception, indent=1, ensure_ascii=False) if exception else None,
        retries=tuple(json.dumps(a, ensure_ascii=False) for a in report.get("attempts") or []
                      if isinstance(report.get("attempts"), list)),
        problem_statement=problem if isinstance(problem, str) and problem else None,
        raw_files=tuple(name for name in RAW_FILES if (directory / name).is_file()),
        siblings=siblings, warnings=tuple(warnings), agent_attempts=agent_rows)
