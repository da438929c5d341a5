"""Result parsers: turn a test run's raw artefacts into per-test statuses.

Parsers are chosen *by name* from :data:`PARSERS` (specs name them in YAML); nothing
from data is ever executed. Each parser receives a :class:`RunArtefacts` and returns a
:class:`ParsedResults`. Parsers are pure: bytes and strings in, data out.

Registered parsers:

``pytest``        JUnit XML (authoritative) cross-checked against pytest's ``-rA`` summary.
``pytest-junit``  JUnit XML only.
``pytest-text``   pytest's ``-rA`` short test summary only (for runners without JUnit XML).
"""

from __future__ import annotations

import difflib
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from typing import Callable, Iterable

from harness.errors import UnknownNameError
from harness.grading.status import TestStatus

#: Cap on the JUnit XML we are willing to parse (bytes); bigger files are truncated evidence.
MAX_JUNIT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class RunArtefacts:
    """What a test run left behind, copied out of the container.

    ``junit_xml`` is None when no structured report was produced. ``known_files`` are
    the test files the harness asked the runner to run (used to map JUnit class names
    back to node ids when the report has no ``file`` attribute).
    """

    output: str
    junit_xml: bytes | None = None
    known_files: tuple[str, ...] = ()
    graded_ids: tuple[str, ...] = ()


@dataclass
class ParsedResults:
    """Per-test statuses plus the evidence of anything suspicious while parsing.

    ``conflicts`` lists test ids reported with contradictory statuses (inside one
    source, or between JUnit XML and the text summary). ``source`` says which artefact
    the statuses came from: "junit", "text" or "none".
    """

    statuses: dict[str, TestStatus] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    source: str = "none"
    notes: list[str] = field(default_factory=list)
    #: native id -> the label the framework printed for it (unittest/Django; id conventions)
    labels: dict[str, str] = field(default_factory=dict)
    #: test files/modules that failed to import or collect (their tests never ran)
    collection_errors: list[str] = field(default_factory=list)


ParseFn = Callable[[RunArtefacts], ParsedResults]


@dataclass(frozen=True)
class Parser:
    """A registered parser. ``runner_args`` is appended to the test command so the runner
    writes what the parser reads; ``{junit_path}`` is replaced by a harness-chosen path
    outside the repository."""

    name: str
    parse: ParseFn
    runner_args: str = ""
    wants_junit: bool = False

    def __call__(self, art: RunArtefacts) -> ParsedResults:
        return self.parse(art)


PARSERS: dict[str, Parser] = {}
_JUNIT_ARGS = "--junitxml={junit_path} -o junit_family=xunit1"


def register(name: str, runner_args: str = "") -> Callable[[ParseFn], ParseFn]:
    def deco(fn: ParseFn) -> ParseFn:
        if name in PARSERS:
            raise ValueError(f"parser {name!r} registered twice")
        PARSERS[name] = Parser(name, fn, runner_args, "{junit_path}" in runner_args)
        return fn
    return deco


def get_parser(name: str) -> Parser:
    """Look a parser up by name; an unknown name raises with the close matches."""
    try:
        return PARSERS[name]
    except KeyError:
        close = difflib.get_close_matches(name, PARSERS, n=3, cutoff=0.4)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise UnknownNameError(
            f"unknown result parser {name!r}{hint} (registered: {', '.join(sorted(PARSERS))})",
            field="parser") from None


# --------------------------------------------------------------------------- JUnit XML

def parse_junit(xml_bytes: bytes, known_files: Iterable[str] = ()) -> ParsedResults:
    """Parse pytest's JUnit XML (xunit1 or xunit2) into node ids and statuses.

    A testcase whose id appears twice with different outcomes is recorded in
    ``conflicts``. Malformed XML yields an empty result with a note (never raises).
    """
    result = ParsedResults(source="junit")
    if len(xml_bytes) > MAX_JUNIT_BYTES:
        result.notes.append(f"junit xml larger than {MAX_JUNIT_BYTES} bytes: ignored")
        result.source = "none"
        return result
    try:
        root = ElementTree.fromstring(xml_bytes)
    except (ElementTree.ParseError, LookupError, ValueError) as exc:  # bad encoding decl too
        result.notes.append(f"junit xml unparsable: {exc}")
        result.source = "none"
        return result
    modules = _module_index(known_files)
    for case in root.iter("testcase"):
        node_id = _junit_node_id(case, modules)
        if node_id is None:
            continue
        status = _junit_status(case)
        _record(result, node_id, status)
    return result


def _junit_status(case: ElementTree.Element) -> TestStatus:
    status = TestStatus.PASSED
    for child in case:
        if child.tag == "failure":
            status = TestStatus.worst(status, TestStatus.FAILED)
        elif child.tag == "error":
            status = TestStatus.worst(status, TestStatus.ERROR)
        elif child.tag == "skipped":
            kind = child.get("type", "")
            status = TestStatus.worst(
                status, TestStatus.XFAIL if kind == "pytest.xfail" else TestStatus.SKIPPED)
    return status


def _module_index(known_files: Iterable[str]) -> dict[str, str]:
    """Map dotted module names ('tests.test_x') to file paths ('tests/test_x.py')."""
    index = {}
    for path in known_files:
        if path.endswith(".py"):
            index[path[:-3].replace("/", ".")] = path
    return index


def _junit_node_id(case: ElementTree.Element, modules: dict[str, str]) -> str | None:
    """Rebuild pytest's node id from a testcase's ``file``/``classname``/``name``.

    pytest derives ``classname`` from the node id by replacing '/' with '.' in the path
    and dropping '.py'; we invert that using the ``file`` attribute (xunit1) or, failing
    that, the longest known module prefix.
    """
    name = case.get("name")
    classname = case.get("classname") or ""
    if not name:
        return None
    path = case.get("file")
    module = None
    if path and path.endswith(".py"):
        module = path[:-3].replace("/", ".").replace("\\", ".")
        if not (classname == module or classname.startswith(module + ".")):
            module = None
    if module is None:
        for candidate in sorted(modules, key=len, reverse=True):
            if classname == candidate or classname.startswith(candidate + "."):
                module, path = candidate, modules[candidate]
                break
    if module is None:
        # Unknown layout: best effort, pytest's own mangling inverted naively.
        parts = classname.split(".")
        path, classes = "/".join(parts) + ".py", []
        return "::".join([path, name]) if classname else name
    classes = [c for c in classname[len(module):].split(".") if c]
    return "::".join([path, *classes, name])


# --------------------------------------------------------------------------- -rA text

_SUMMARY_HEADER = re.compile(r"^=+ short test summary info =+\s*$")
_SECTION_HEADER = re.compile(r"^=+ .* =+\s*$")
_TEXT_STATUS = {
    "PASSED": TestStatus.PASSED,
    "FAILED": TestStatus.FAILED,
    "ERROR": TestStatus.ERROR,
    "SKIPPED": TestStatus.SKIPPED,
    "XFAIL": TestStatus.XFAIL,
    # A non-strict unexpected pass is a pass in pytest's own outcome model (and in JUnit).
    "XPASS": TestStatus.PASSED,
}


def parse_pytest_text(output: str, graded_ids: Iterable[str] = ()) -> ParsedResults:
    """Parse the ``short test summary info`` section of ``pytest -rA`` output.

    Only lines inside that section count (a test printing 'PASSED x' elsewhere is
    ignored). Ids containing spaces (parametrisations) are matched against the graded
    ids before falling back to the first whitespace-separated word.
    """
    result = ParsedResults(source="text")
    graded = sorted(set(graded_ids), key=len, reverse=True)
    lines = output.splitlines()
    # pytest prints its summary last; captured output (which code under test controls,
    # and -rA shows) comes before it. Only the last summary section counts.
    starts = [i for i, line in enumerate(lines) if _SUMMARY_HEADER.match(line.rstrip())]
    if len(starts) > 1:
        result.notes.append(f"{len(starts)} summary headers in the output; only the last one was read")
    section: list[str] = []
    for line in lines[starts[-1] + 1:] if starts else []:
        line = line.rstrip()
        if _SECTION_HEADER.match(line):
            break
        section.append(line)
    for line in section:
        word, _, rest = line.partition(" ")
        status = _TEXT_STATUS.get(word)
        if status is None or not rest:
            continue
        if rest.startswith("["):  # 'SKIPPED [1] path:line: reason' carries no node id
            continue
        node_id = next((g for g in graded if rest == g or rest.startswith(g + " ")), None)
        if node_id is None:
            node_id = rest.split()[0]
        _record(result, node_id, status)
    return result


def _record(result: ParsedResults, node_id: str, status: TestStatus) -> None:
    previous = result.statuses.get(node_id)
    if previous is not None and previous is not status:
        if node_id not in result.conflicts:
            result.conflicts.append(node_id)
        status = TestStatus.worst(previous, status)
    result.statuses[node_id] = status


def alias_truncated_ids(result: ParsedResults, graded_ids: Iterable[str]) -> None:
    """Let graded ids that were cut at the first space match the full node ids.

    SWE-bench's published test lists were produced by splitting pytest's summary lines
    on whitespace, so a parametrised id such as ``test_x[a  b]`` appears there as
    ``test_x[a``. For every graded id absent from the results, the results whose id
    begins with that id plus whitespace are combined (worst status wins) under it.
    """
    missing = [g for g in graded_ids if g not in result.statuses]
    if not missing:
        return
    by_prefix: dict[str, list[str]] = {}
    for node_id in result.statuses:
        if " " in node_id:
            by_prefix.setdefault(node_id.split()[0], []).append(node_id)
    for graded in missing:
        matches = by_prefix.get(graded)
        if not matches:
            continue
        status = result.statuses[matches[0]]
        for other in matches[1:]:
            status = TestStatus.worst(status, result.statuses[other])
        result.statuses[graded] = status
        if len(matches) > 1:
            result.notes.append(f"{graded}: truncated id matches {len(matches)} tests; worst status used")


# --------------------------------------------------------------------------- registered

@register("pytest-junit", _JUNIT_ARGS)
def _pytest_junit(art: RunArtefacts) -> ParsedResults:
    if art.junit_xml is None:
        return ParsedResults(source="none", notes=["no junit xml produced"])
    result = parse_junit(art.junit_xml, art.known_files)
    alias_truncated_ids(result, art.graded_ids)
    return result


@register("pytest-text")
def _pytest_text(art: RunArtefacts) -> ParsedResults:
    return parse_pytest_text(art.output, art.graded_ids)


@register("pytest", _JUNIT_ARGS)
def _pytest(art: RunArtefacts) -> ParsedResults:
    """JUnit XML is authoritative; the text summary is a cross-check on the graded ids.

    Without a readable JUnit report there are no results (source "none"): the text
    summary alone is never trusted here, because code under test can print it. A graded
    id that JUnit and the text summary both report, with different outcomes, or that
    only the text reports, is a conflict: one source was forged or the runner misbehaved.
    """
    text = parse_pytest_text(art.output, art.graded_ids)
    if art.junit_xml is None:
        return ParsedResults(source="none", notes=["the runner wrote no junit xml"])
    junit = parse_junit(art.junit_xml, art.known_files)
    if junit.source == "none":
        return junit
    alias_truncated_ids(junit, art.graded_ids)
    for test_id in art.graded_ids:
        a, b = junit.statuses.get(test_id), text.statuses.get(test_id)
        if a is not None and b is not None and _disagree(a, b) and test_id not in junit.conflicts:
            junit.conflicts.append(test_id)
        if a is None and b is not None:
            # The text summary claims a result JUnit never recorded: forged or truncated.
            junit.notes.append(f"{test_id}: only in text summary ({b.value})")
            if test_id not in junit.conflicts:
                junit.conflicts.append(test_id)
    return junit


def _disagree(a: TestStatus, b: TestStatus) -> bool:
    passing = {TestStatus.PASSED}
    return ((a in passing) != (b in passing) or (a is TestStatus.XFAIL) != (b is TestStatus.XFAIL)
            or (a is TestStatus.SKIPPED) != (b is TestStatus.SKIPPED))
