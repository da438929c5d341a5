"""Parsers for the harness's own in-container reporter (harness/incontainer/junit_reporter.py)
and for the text sympy's and unittest's runners print, registered into
:data:`harness.grading.parsers.PARSERS`:

``sympy``     the reporter's JUnit XML (authoritative) cross-checked with ``bin/test --verbose``
``unittest``  the reporter's JUnit XML cross-checked with unittest's ``-v`` / Django's
``django``    ``--verbosity 2`` lines (``label ... ok``)

The reporter writes one ``testcase`` per test with ``file``, ``classname`` (the module
derived from ``file``, then the class) and ``name``, the printed label as a ``label``
property, and one ``error type="collection"`` case per test module that failed to import.
Native ids are pytest-style: ``path::name`` or ``path::Class::name``.

Without readable XML there are no results (source "none"): printed text alone is never
trusted, because code under test can print anything. A test the text reports with an
outcome the XML contradicts (or, for sympy, one the XML never recorded) is a conflict.

pytest's JUnit XML marks collection failures too (``error message="collection
failure"``): :func:`junit_collection_errors` reads both kinds.

Bounded like the pytest parsers (harness/grading/parsers.py): the XML is streamed with
the same caps, the printed text read line by line with capped lines and test counts,
conflicts kept in sets; over a cap :class:`ResultsTooLarge` (``results_over_limit``).
"""

from __future__ import annotations

import re

from harness.grading.parsers import (MAX_SUMMARY_LINE, MAX_SUMMARY_LINES, JunitCase, ParsedResults, ResultsTooLarge,
                                     RunArtefacts, _record, collection_error_path, is_collection_error, register,
                                     stream_junit)
from harness.grading.status import TestStatus

#: notes kept per parse (a flood of "only in the printed output" lines costs nothing)
MAX_NOTES = 50


def _note(result: ParsedResults, text: str) -> None:
    if len(result.notes) < MAX_NOTES:
        result.notes.append(text)


def parse_reporter_junit(xml_bytes: bytes) -> ParsedResults:
    """The reporter's JUnit XML → native ids, statuses, labels and collection errors
    (streamed and capped like pytest's: :func:`harness.grading.parsers.stream_junit`)."""
    result = ParsedResults(source="junit")
    conflicts: set[str] = set()
    seen_errors: set[str] = set()

    def on_case(case: JunitCase) -> None:
        attrs = case.attrs
        path = attrs.get("file") or ""
        if case.error is not None and case.error.get("type") == "collection":
            where = path or attrs.get("name") or "?"
            if where not in seen_errors:
                seen_errors.add(where)
                result.collection_errors.append(where)
                _note(result, f"collection error in {path}: {case.error.get('message', '')[:300]}")
            return
        name = attrs.get("name")
        if not name:
            return
        module = path[:-3].replace("/", ".") if path.endswith(".py") else path
        classname = attrs.get("classname") or ""
        cls = classname[len(module) + 1:] if module and classname.startswith(module + ".") else ""
        node_id = "::".join(p for p in (path, cls.replace(".", "::"), name) if p)
        _record(result, node_id, case.status, conflicts)
        if case.label is not None:
            result.labels[node_id] = case.label

    problem = stream_junit(xml_bytes, on_case)
    if problem is not None:
        return ParsedResults(source="none", notes=[f"junit xml unparsable: {problem}"])
    result.conflicts = sorted(conflicts)
    return result


def junit_collection_errors(xml_bytes: bytes | None) -> list[str]:
    """Test files whose collection failed, from pytest's or the reporter's JUnit XML
    (nothing for unparsable or over-cap XML: the parser itself reports those)."""
    if not xml_bytes:
        return []
    found: list[str] = []
    seen: set[str] = set()

    def on_case(case: JunitCase) -> None:
        if not is_collection_error(case):
            return
        path = collection_error_path(case)
        if path not in seen:
            seen.add(path)
            found.append(path)

    try:
        stream_junit(xml_bytes, on_case)
    except ResultsTooLarge:
        return []
    return found


def _lines(output: str):
    """The output's lines, capped like pytest's summary (:data:`MAX_SUMMARY_LINES` matching
    lines are plenty; over-long lines are nobody's test label)."""
    for line in output.splitlines():
        if len(line) <= MAX_SUMMARY_LINE:
            yield line


# --------------------------------------------------------------------------- text

#: ``sympy/core/tests/test_basic.py[22] `` starts a file's tests in bin/test's output.
_SYMPY_FILE = re.compile(r"^(\S+\.py)\[\d+\](?:\s|$)")
#: ``test_name ok`` (``F``, ``E``, ``f`` xfail, ``X`` xpass); the last test of a file has
#: the file's ``[OK]``/``[FAIL]`` after it.
_SYMPY_TEST = re.compile(r"^(test_\w+) (ok|F|E|f|X)(?:\s+\[(?:OK|FAIL)\])?\s*$")
_SYMPY_STATUS = {"ok": TestStatus.PASSED, "F": TestStatus.FAILED, "E": TestStatus.ERROR, "f": TestStatus.XFAIL,
                 "X": TestStatus.PASSED}


def _sympy_lines(output: str):
    """``(native id, outcome letter)`` of each test line bin/test printed under a file header."""
    current = None
    for line in _lines(output):
        line = line.rstrip()
        header = _SYMPY_FILE.match(line)
        if header:
            current = header.group(1)
            continue
        match = _SYMPY_TEST.match(line)
        if match and current:
            yield f"{current}::{match.group(1)}", match.group(2)


def parse_sympy_text(output: str) -> ParsedResults:
    """``bin/test --verbose`` lines, as native ids (``file::name``) under their file header."""
    result = ParsedResults(source="text")
    conflicts: set[str] = set()
    for native, letter in _sympy_lines(output):
        if len(result.statuses) >= MAX_SUMMARY_LINES:
            raise ResultsTooLarge(f"the printed output names over {MAX_SUMMARY_LINES} tests")
        _record(result, native, _SYMPY_STATUS[letter], conflicts)
    result.conflicts = sorted(conflicts)
    return result


def sympy_xpassed(output: str) -> set[str]:
    """Native ids (``file::name``) bin/test printed ``X``: an ``@XFAIL`` test that passed
    (PASSED to grading, as the results file records it; SWE-bench's sympy log parser keeps
    no status for it, so its lists never hold one)."""
    return {native for native, letter in _sympy_lines(output) if letter == "X"}


_UNITTEST_LINE = re.compile(r"^(.*\S) \.\.\. (ok|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)$")
_UNITTEST_STATUS = {"ok": TestStatus.PASSED, "FAIL": TestStatus.FAILED, "ERROR": TestStatus.ERROR,
                    "expected failure": TestStatus.XFAIL, "unexpected success": TestStatus.FAILED}


def parse_unittest_text(output: str) -> dict[str, TestStatus]:
    """unittest's verbose ``label ... outcome`` lines, keyed by the label's (last) line."""
    statuses: dict[str, TestStatus] = {}
    for line in _lines(output):
        match = _UNITTEST_LINE.match(line.strip())
        if not match:
            continue
        if len(statuses) >= MAX_SUMMARY_LINES:
            raise ResultsTooLarge(f"the printed output names over {MAX_SUMMARY_LINES} tests")
        word = match.group(2)
        status = TestStatus.SKIPPED if word.startswith("skipped") else _UNITTEST_STATUS[word]
        label = match.group(1)
        statuses[label] = TestStatus.worst(statuses[label], status) if label in statuses else status
    return statuses


def _disagree(a: TestStatus, b: TestStatus) -> bool:
    passing = (TestStatus.PASSED, TestStatus.XFAIL, TestStatus.SKIPPED)
    return (a in passing) != (b in passing) or (a is TestStatus.SKIPPED) != (b is TestStatus.SKIPPED)


def _no_xml(art: RunArtefacts) -> ParsedResults | None:
    if art.junit_xml is None:
        return ParsedResults(source="none", notes=["the runner wrote no results file (the reporter did not finish)"])
    return None


@register("sympy")
def _sympy(art: RunArtefacts) -> ParsedResults:
    missing = _no_xml(art)
    if missing:
        return missing
    junit = parse_reporter_junit(art.junit_xml)  # type: ignore[arg-type]  # _no_xml: not None
    if junit.source == "none":
        return junit
    text = parse_sympy_text(art.output)
    conflicts = set(junit.conflicts)
    for node_id, claimed in text.statuses.items():
        recorded = junit.statuses.get(node_id)
        if recorded is None:
            _note(junit, f"{node_id}: only in the printed output ({claimed.value})")
        elif not _disagree(recorded, claimed):
            continue
        conflicts.add(node_id)
    junit.conflicts = sorted(conflicts)
    return junit


def _unittest(art: RunArtefacts) -> ParsedResults:
    missing = _no_xml(art)
    if missing:
        return missing
    junit = parse_reporter_junit(art.junit_xml)  # type: ignore[arg-type]  # _no_xml: not None
    if junit.source == "none":
        return junit
    by_label: dict[str, list[str]] = {}
    for node_id, label in junit.labels.items():
        lines = label.strip().splitlines()
        if lines:
            by_label.setdefault(lines[-1].strip(), []).append(node_id)
    conflicts = set(junit.conflicts)
    for label, claimed in parse_unittest_text(art.output).items():
        natives = by_label.get(label)
        if not natives:
            _note(junit, f"{label!r}: only in the printed output ({claimed.value})")
            continue
        recorded = junit.statuses[natives[0]]
        for other in natives[1:]:
            recorded = TestStatus.worst(recorded, junit.statuses[other])
        if _disagree(recorded, claimed):
            conflicts.update(natives)
    junit.conflicts = sorted(conflicts)
    return junit


register("unittest")(_unittest)
register("django")(_unittest)
