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
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

from harness.grading.parsers import MAX_JUNIT_BYTES, ParsedResults, RunArtefacts, _record, register
from harness.grading.status import TestStatus


def parse_reporter_junit(xml_bytes: bytes) -> ParsedResults:
    """The reporter's JUnit XML → native ids, statuses, labels and collection errors."""
    result = ParsedResults(source="junit")
    root = _root(xml_bytes, result)
    if root is None:
        return result
    for case in root.iter("testcase"):
        error = case.find("error")
        path = case.get("file") or ""
        if error is not None and error.get("type") == "collection":
            result.collection_errors.append(path or case.get("name") or "?")
            result.notes.append(f"collection error in {path}: {(error.get('message') or '')[:300]}")
            continue
        name = case.get("name")
        if not name:
            continue
        module = path[:-3].replace("/", ".") if path.endswith(".py") else path
        classname = case.get("classname") or ""
        cls = classname[len(module) + 1:] if module and classname.startswith(module + ".") else ""
        node_id = "::".join(p for p in (path, cls.replace(".", "::"), name) if p)
        _record(result, node_id, _status(case))
        for prop in case.iter("property"):
            if prop.get("name") == "label" and prop.get("value") is not None:
                result.labels[node_id] = prop.get("value")
    return result


def _root(xml_bytes: bytes, result: ParsedResults):
    if len(xml_bytes) > MAX_JUNIT_BYTES:
        result.notes.append(f"junit xml larger than {MAX_JUNIT_BYTES} bytes: ignored")
        result.source = "none"
        return None
    try:
        return ElementTree.fromstring(xml_bytes)
    except (ElementTree.ParseError, LookupError, ValueError) as exc:
        result.notes.append(f"junit xml unparsable: {exc}")
        result.source = "none"
        return None


def _status(case: ElementTree.Element) -> TestStatus:
    status = TestStatus.PASSED
    for child in case:
        if child.tag == "failure":
            status = TestStatus.worst(status, TestStatus.FAILED)
        elif child.tag == "error":
            status = TestStatus.worst(status, TestStatus.ERROR)
        elif child.tag == "skipped":
            status = TestStatus.worst(
                status, TestStatus.XFAIL if child.get("type") == "pytest.xfail" else TestStatus.SKIPPED)
    return status


def junit_collection_errors(xml_bytes: bytes | None) -> list[str]:
    """Test files whose collection failed, from pytest's or the reporter's JUnit XML."""
    if not xml_bytes or len(xml_bytes) > MAX_JUNIT_BYTES:
        return []
    try:
        root = ElementTree.fromstring(xml_bytes)
    except (ElementTree.ParseError, LookupError, ValueError):
        return []
    found = []
    for case in root.iter("testcase"):
        error = case.find("error")
        if error is None:
            continue
        if error.get("type") == "collection" or error.get("message") == "collection failure":
            path = case.get("file") or ""
            if not path:
                dotted = ".".join(p for p in (case.get("classname"), case.get("name")) if p)
                path = dotted.replace(".", "/") + ".py" if dotted else "?"
            if path not in found:
                found.append(path)
    return found


# --------------------------------------------------------------------------- text

#: ``sympy/core/tests/test_basic.py[22] `` starts a file's tests in bin/test's output.
_SYMPY_FILE = re.compile(r"^(\S+\.py)\[\d+\](?:\s|$)")
#: ``test_name ok`` (``F``, ``E``, ``f`` xfail, ``X`` xpass); the last test of a file has
#: the file's ``[OK]``/``[FAIL]`` after it.
_SYMPY_TEST = re.compile(r"^(test_\w+) (ok|F|E|f|X)(?:\s+\[(?:OK|FAIL)\])?\s*$")
_SYMPY_STATUS = {"ok": TestStatus.PASSED, "F": TestStatus.FAILED, "E": TestStatus.ERROR, "f": TestStatus.XFAIL,
                 "X": TestStatus.PASSED}


def parse_sympy_text(output: str) -> ParsedResults:
    """``bin/test --verbose`` lines, as native ids (``file::name``) under their file header."""
    result = ParsedResults(source="text")
    current = None
    for line in output.splitlines():
        line = line.rstrip()
        header = _SYMPY_FILE.match(line)
        if header:
            current = header.group(1)
            continue
        match = _SYMPY_TEST.match(line)
        if match and current:
            _record(result, f"{current}::{match.group(1)}", _SYMPY_STATUS[match.group(2)])
    return result


_UNITTEST_LINE = re.compile(r"^(.*\S) \.\.\. (ok|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)$")
_UNITTEST_STATUS = {"ok": TestStatus.PASSED, "FAIL": TestStatus.FAILED, "ERROR": TestStatus.ERROR,
                    "expected failure": TestStatus.XFAIL, "unexpected success": TestStatus.FAILED}


def parse_unittest_text(output: str) -> dict[str, TestStatus]:
    """unittest's verbose ``label ... outcome`` lines, keyed by the label's (last) line."""
    statuses: dict[str, TestStatus] = {}
    for line in output.splitlines():
        match = _UNITTEST_LINE.match(line.strip())
        if not match:
            continue
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
    junit = parse_reporter_junit(art.junit_xml)
    if junit.source == "none":
        return junit
    text = parse_sympy_text(art.output)
    for node_id, claimed in text.statuses.items():
        recorded = junit.statuses.get(node_id)
        if recorded is None:
            junit.notes.append(f"{node_id}: only in the printed output ({claimed.value})")
        elif not _disagree(recorded, claimed):
            continue
        if node_id not in junit.conflicts:
            junit.conflicts.append(node_id)
    return junit


def _unittest(art: RunArtefacts) -> ParsedResults:
    missing = _no_xml(art)
    if missing:
        return missing
    junit = parse_reporter_junit(art.junit_xml)
    if junit.source == "none":
        return junit
    by_label: dict[str, list[str]] = {}
    for node_id, label in junit.labels.items():
        lines = label.strip().splitlines()
        if lines:
            by_label.setdefault(lines[-1].strip(), []).append(node_id)
    for label, claimed in parse_unittest_text(art.output).items():
        natives = by_label.get(label)
        if not natives:
            junit.notes.append(f"{label!r}: only in the printed output ({claimed.value})")
            continue
        recorded = junit.statuses[natives[0]]
        for other in natives[1:]:
            recorded = TestStatus.worst(recorded, junit.statuses[other])
        if _disagree(recorded, claimed):
            junit.conflicts.extend(n for n in natives if n not in junit.conflicts)
    return junit


register("unittest")(_unittest)
register("django")(_unittest)
