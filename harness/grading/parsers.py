"""Result parsers: turn a test run's raw artefacts into per-test statuses.

Parsers are chosen *by name* from :data:`PARSERS` (specs name them in YAML); nothing
from data is ever executed. Each parser receives a :class:`RunArtefacts` and returns a
:class:`ParsedResults`. Parsers are pure: bytes and strings in, data out.

Registered parsers:

``pytest``        JUnit XML (authoritative) cross-checked against pytest's ``-rA`` summary.
``pytest-junit``  JUnit XML only.
``pytest-text``   pytest's ``-rA`` short test summary only (for runners without JUnit XML).

Bounded work: the code under test writes these artefacts, so parsing is linear in their
size (sets and dicts, never a list searched per line), JUnit XML is read as a stream
with ``expat`` (no tree is built, no DTD accepted) with caps on its size, on the number
of elements and test cases, on nesting and on the length of names, and the text summary
is read with caps on its lines. Over a cap, a parser raises :class:`ResultsTooLarge`:
the run is INVALID (``results_over_limit``, the model's doing), never an hour of host
CPU or a gigabyte of memory (worst cases: benchmarks/parsing.py, docs/BENCHMARKS.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterable
from xml.parsers import expat

from harness.errors import lookup
from harness.grading.status import TestStatus

#: Caps on what the code under test can make the host parse.
MAX_JUNIT_BYTES = 64 * 1024 * 1024
MAX_JUNIT_ELEMENTS = 2_000_000
MAX_TESTCASES = 200_000
MAX_DEPTH = 64
MAX_NAME = 8192
MAX_SUMMARY_LINES = 200_000
MAX_SUMMARY_LINE = 65_536


class ResultsTooLarge(ValueError):
    """An artefact is over a parsing cap: the run's results are not evidence."""


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
    return lookup(PARSERS, name, kind="result parser", field="parser")


# --------------------------------------------------------------------------- JUnit XML

@dataclass
class JunitCase:
    """One ``testcase`` as the stream read it: its attributes, its worst outcome, the first
    ``error`` child's attributes (collection failures are errors) and its ``label``
    property (the harness's reporter writes the label the framework printed)."""

    attrs: dict
    status: TestStatus
    error: dict | None = None
    label: str | None = None


def stream_junit(xml_bytes: bytes, on_case: Callable[[JunitCase], None]) -> str | None:
    """Read JUnit XML as a stream (``expat``; no tree is built, no DTD accepted), calling
    ``on_case`` for each test case. Returns None, or why the XML is unparsable (results
    read so far were already delivered). Over a cap it raises :class:`ResultsTooLarge`.
    """
    if len(xml_bytes) > MAX_JUNIT_BYTES:
        raise ResultsTooLarge(f"junit xml of {len(xml_bytes)} bytes is over the {MAX_JUNIT_BYTES}-byte cap")
    state = {"elements": 0, "cases": 0, "depth": 0, "case": None, "case_depth": 0}

    def start(tag: str, attrs: dict) -> None:
        state["elements"] += 1
        state["depth"] += 1
        if state["elements"] > MAX_JUNIT_ELEMENTS or state["depth"] > MAX_DEPTH:
            raise ResultsTooLarge(f"junit xml over {MAX_JUNIT_ELEMENTS} elements or {MAX_DEPTH} levels deep")
        case = state["case"]
        if tag == "testcase":
            state["cases"] += 1
            if state["cases"] > MAX_TESTCASES:
                raise ResultsTooLarge(f"junit xml with over {MAX_TESTCASES} test cases")
            for key in ("name", "classname", "file"):
                if len(attrs.get(key) or "") > MAX_NAME:
                    raise ResultsTooLarge(f"a junit test case {key} is over {MAX_NAME} characters")
            state["case"], state["case_depth"] = JunitCase(attrs, TestStatus.PASSED), state["depth"]
        elif case is not None and state["depth"] == state["case_depth"] + 1:
            case.status = TestStatus.worst(case.status, _child_status(tag, attrs))
            if tag == "error" and case.error is None:
                case.error = {k: str(attrs.get(k) or "")[:MAX_NAME] for k in ("type", "message")}
        elif (case is not None and tag == "property" and state["depth"] == state["case_depth"] + 2
              and attrs.get("name") == "label" and attrs.get("value") is not None):
            case.label = str(attrs["value"])[:MAX_NAME]

    def end(tag: str) -> None:
        if tag == "testcase" and state["case"] is not None and state["depth"] == state["case_depth"]:
            on_case(state["case"])
            state["case"] = None
        state["depth"] -= 1

    def refuse_doctype(*_args) -> None:
        raise ValueError("a DOCTYPE (entities) is not accepted")

    parser = expat.ParserCreate()
    parser.StartElementHandler, parser.EndElementHandler = start, end
    parser.StartDoctypeDeclHandler = refuse_doctype
    parser.EntityDeclHandler = refuse_doctype
    try:
        for offset in range(0, len(xml_bytes), 1 << 16):
            parser.Parse(xml_bytes[offset:offset + (1 << 16)], False)
        parser.Parse(b"", True)
    except (expat.ExpatError, ValueError, LookupError) as exc:
        if isinstance(exc, ResultsTooLarge):
            raise
        return str(exc)
    return None


def is_collection_error(case: JunitCase) -> bool:
    """pytest's ``error message="collection failure"`` or the reporter's ``type="collection"``."""
    return case.error is not None and (case.error.get("type") == "collection"
                                       or case.error.get("message") == "collection failure")


def collection_error_path(case: JunitCase) -> str:
    """The test file a collection error names: its ``file`` attribute, else its dotted name."""
    path = case.attrs.get("file") or ""
    if not path:
        dotted = ".".join(p for p in (case.attrs.get("classname"), case.attrs.get("name")) if p)
        path = dotted.replace(".", "/") + ".py" if dotted else "?"
    return path


def parse_junit(xml_bytes: bytes, known_files: Iterable[str] = ()) -> ParsedResults:
    """Parse pytest's JUnit XML (xunit1 or xunit2) into node ids and statuses, as a stream.

    A testcase whose id appears twice with different outcomes is recorded in
    ``conflicts``. Malformed XML yields an empty result with a note (never raises);
    an artefact over a cap raises :class:`ResultsTooLarge`.
    """
    result = ParsedResults(source="junit")
    modules = _module_index(known_files)
    conflicts: set[str] = set()
    seen_errors: set[str] = set()

    def on_case(case: JunitCase) -> None:
        node_id = _junit_node_id(case.attrs, modules)
        if is_collection_error(case):
            path = collection_error_path(case)
            if path not in seen_errors:
                seen_errors.add(path)
                result.collection_errors.append(path)
        if node_id is not None:
            _record(result, node_id, case.status, conflicts)

    problem = stream_junit(xml_bytes, on_case)
    if problem is not None:
        return ParsedResults(source="none", notes=[f"junit xml unparsable: {problem}"])
    result.conflicts = sorted(conflicts)
    return result


def _child_status(tag: str, attrs: dict) -> TestStatus:
    if tag == "failure":
        return TestStatus.FAILED
    if tag == "error":
        return TestStatus.ERROR
    if tag == "skipped":
        return TestStatus.XFAIL if attrs.get("type", "") == "pytest.xfail" else TestStatus.SKIPPED
    return TestStatus.PASSED


def _module_index(known_files: Iterable[str]) -> dict[str, str]:
    """Map dotted module names ('tests.test_x') to file paths ('tests/test_x.py')."""
    index = {}
    for path in known_files:
        if path.endswith(".py"):
            index[path[:-3].replace("/", ".")] = path
    return index


def _junit_node_id(case: dict, modules: dict[str, str]) -> str | None:
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
        parts = classname.split(".")
        for length in range(len(parts), 0, -1):  # the longest known module prefix, by lookup
            candidate = ".".join(parts[:length])
            if candidate in modules:
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
    ids before falling back to the first whitespace-separated word. Linear in the
    output; over :data:`MAX_SUMMARY_LINES` lines in the section, or a line over
    :data:`MAX_SUMMARY_LINE` characters, raises :class:`ResultsTooLarge`.
    """
    result = ParsedResults(source="text")
    spaced: dict[str, list[str]] = {}          # first word -> graded ids with spaces, longest first
    for g in sorted({g for g in graded_ids if " " in g}, key=len, reverse=True):
        spaced.setdefault(g.split(" ", 1)[0], []).append(g)
    # pytest prints its summary last; captured output (which code under test controls,
    # and -rA shows) comes before it. Only the last summary section counts.
    headers = [m.start() for m in _SUMMARY_HEADER_ANYWHERE.finditer(output)]
    if len(headers) > 1:
        result.notes.append(f"{len(headers)} summary headers in the output; only the last one was read")
    if not headers:
        return result
    section = output[headers[-1]:].split("\n")[1:]
    conflicts: set[str] = set()
    for count, line in enumerate(section):
        if count >= MAX_SUMMARY_LINES:
            raise ResultsTooLarge(f"the test summary has over {MAX_SUMMARY_LINES} lines")
        if len(line) > MAX_SUMMARY_LINE:
            raise ResultsTooLarge(f"a test summary line is over {MAX_SUMMARY_LINE} characters")
        line = line.rstrip()
        if _SECTION_HEADER.match(line):
            break
        word, _, rest = line.partition(" ")
        status = _TEXT_STATUS.get(word)
        if status is None or not rest:
            continue
        if rest.startswith("["):  # 'SKIPPED [1] path:line: reason' carries no node id
            continue
        node_id = _spaced_id(rest, spaced) if spaced and " " in rest else None
        if node_id is None:
            node_id = rest.split()[0]
        _record(result, node_id, status, conflicts)
    result.conflicts = sorted(conflicts)
    return result


_SUMMARY_HEADER_ANYWHERE = re.compile(r"^=+ short test summary info =+[ \t\r]*$", re.M)


def _spaced_id(rest: str, spaced: dict[str, list[str]]) -> str | None:
    """The longest graded id containing spaces that ``rest`` is, or starts with (+ space):
    only the ids sharing ``rest``'s first word are compared (a dict lookup, not a scan)."""
    for graded in spaced.get(rest.split(" ", 1)[0], ()):
        if rest == graded or rest.startswith(graded + " "):
            return graded
    return None


def _record(result: ParsedResults, node_id: str, status: TestStatus, conflicts: set[str]) -> None:
    previous = result.statuses.get(node_id)
    if previous is not None and previous is not status:
        conflicts.add(node_id)
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
    conflicts = set(junit.conflicts)
    for test_id in dict.fromkeys(art.graded_ids):
        a, b = junit.statuses.get(test_id), text.statuses.get(test_id)
        if a is not None and b is not None and _disagree(a, b):
            conflicts.add(test_id)
        if a is None and b is not None:
            # The text summary claims a result JUnit never recorded: forged or truncated.
            if len(junit.notes) < 50:
                junit.notes.append(f"{test_id}: only in text summary ({b.value})")
            conflicts.add(test_id)
    junit.conflicts = sorted(conflicts)
    return junit


def _disagree(a: TestStatus, b: TestStatus) -> bool:
    passing = {TestStatus.PASSED}
    return ((a in passing) != (b in passing) or (a is TestStatus.XFAIL) != (b is TestStatus.XFAIL)
            or (a is TestStatus.SKIPPED) != (b is TestStatus.SKIPPED))
