"""Test-id conventions: how a dataset spelled the ids of the tests it grades.

A runner reports *native* ids (pytest-style node ids, ``path::Class::name[param]``, for
every runner here) and, for unittest-based runners, the *label* the framework printed for
the test (``test_x (app.tests.T)`` or the first line of its docstring). A dataset's ids
are whatever its own log parser extracted from a log: SWE-bench's parsers cut pytest ids
at the first space, shorten some parametrisations, keep only a sympy function's name, or
keep a Django test's printed label. A convention, chosen by name in the spec
(``id_convention:``), says which of those rewritings produced the dataset's ids, so every
dataset id maps to exactly the tests that ran:

``to_dataset(native_id, label)`` gives the dataset id(s) one native result is known by;
``classify(dataset_id)`` says whether an id can name a test at all under the convention
(``TEST``), is a known fragment of a log line that no runner reports (``LOG_FRAGMENT``:
kept visible and reported, never graded), or cannot be addressed (``UNADDRESSABLE``: the
instance is refused at load time).

Registered (SWE-bench log parser names in brackets; ``log_parser`` of a Verified record):

``pytest``          [parse_log_pytest, astroid, flask, marshmallow, pvlib, pyvista, sqlfluff, xarray]
                    the node id up to its first whitespace (and the full node id)
``pytest-options``  [parse_log_pytest_options: requests, pylint, pydicom] as ``pytest``, and a
                    parametrisation starting with one ``/`` (no ``*``) shortened to ``/`` + its
                    last path component
``pytest-v2``       [parse_log_pytest_v2: astropy, scikit-learn, sphinx] as ``pytest`` after
                    removing terminal colour codes and control characters
``matplotlib``      [parse_log_matplotlib] as ``pytest`` with ``MouseButton.LEFT``/``RIGHT`` → 1/3
``seaborn``         [parse_log_seaborn] as ``pytest``
``sympy``           [parse_log_sympy] the test function's bare name
``django``          [parse_log_django] the last line of the label unittest printed
``native``          the runner's native ids, unchanged

Pure: strings in, strings out.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from harness.errors import lookup
from harness.grading.status import TestStatus


class IdKind(str, enum.Enum):
    TEST = "test"
    LOG_FRAGMENT = "log_fragment"
    UNADDRESSABLE = "unaddressable"


@dataclass(frozen=True)
class Convention:
    name: str
    summary: str
    swebench_parsers: tuple[str, ...]
    to_dataset: Callable[[str, str | None], tuple[str, ...]]
    classify: Callable[[str], IdKind]


CONVENTIONS: dict[str, Convention] = {}


def register_convention(convention: Convention) -> Convention:
    if convention.name in CONVENTIONS:
        raise ValueError(f"id convention {convention.name!r} registered twice")
    CONVENTIONS[convention.name] = convention
    return convention


def get_convention(name: str) -> Convention:
    """Look a convention up by name; an unknown name raises with the close matches."""
    return lookup(CONVENTIONS, name, kind="test-id convention", field="id_convention")


def convention_for_swebench_parser(parser_name: str) -> str | None:
    """The convention a SWE-bench log parser (``parse_log_requests``) produces ids in."""
    for convention in CONVENTIONS.values():
        if parser_name in convention.swebench_parsers:
            return convention.name
    return None


# --------------------------------------------------------------------------- classification

#: Fragments of pytest's progress lines that SWE-bench's pytest parser recorded as ids
#: (pytest-dev__pytest-5227, -5262, -7521: ``[100%]``, ``[``, ``[100%]-----``).
_LOG_FRAGMENT = re.compile(r"\[(\d+%\])?-*")


def _classify_node_id(test_id: str) -> IdKind:
    if "\n" in test_id or not test_id.strip():
        return IdKind.UNADDRESSABLE
    if "::" in test_id or test_id.endswith(".py"):
        return IdKind.TEST
    if _LOG_FRAGMENT.fullmatch(test_id):
        return IdKind.LOG_FRAGMENT
    return IdKind.UNADDRESSABLE


def _classify_sympy(test_id: str) -> IdKind:
    # bin/test runs module-level functions named test_*; SWE-bench kept lines starting "test_".
    return IdKind.TEST if re.fullmatch(r"test_\w+", test_id) else IdKind.UNADDRESSABLE


def _classify_label(test_id: str) -> IdKind:
    # A printed label: "test_x (module.Class)" or any docstring first line.
    return IdKind.TEST if test_id.strip() and "\n" not in test_id else IdKind.UNADDRESSABLE


def _classify_any(test_id: str) -> IdKind:
    return IdKind.TEST if test_id.strip() and "\n" not in test_id else IdKind.UNADDRESSABLE


# --------------------------------------------------------------------------- native -> dataset

def _both(native: str, token: str) -> tuple[str, ...]:
    return (native,) if token == native else (native, token)


def _first_token(native: str) -> str:
    """SWE-bench's pytest parsers split a summary line on whitespace: the id ends at the
    first whitespace."""
    parts = native.split()
    return parts[0] if parts else native


def _pytest(native: str, label: str | None = None) -> tuple[str, ...]:
    return _both(native, _first_token(native))


_OPTION = re.compile(r"(.*?)\[(.*)\]")


def _pytest_options(native: str, label: str | None = None) -> tuple[str, ...]:
    token = _first_token(native)
    match = _OPTION.search(token)
    if match:
        main, option = match.groups()
        if option.startswith("/") and not option.startswith("//") and "*" not in option:
            option = "/" + option.split("/")[-1]
        token = f"{main}[{option}]"
    return _both(native, token)


_CONTROL = str.maketrans("", "", "".join(chr(c) for c in range(1, 32)))


def _pytest_v2(native: str, label: str | None = None) -> tuple[str, ...]:
    cleaned = re.sub(r"\[(\d+)m", "", native).translate(_CONTROL)
    return _both(native, _first_token(cleaned))


def _matplotlib(native: str, label: str | None = None) -> tuple[str, ...]:
    replaced = native.replace("MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3")
    return _both(native, _first_token(replaced))


def _sympy(native: str, label: str | None = None) -> tuple[str, ...]:
    name = native.rsplit("::", 1)[-1]
    return (name,) if name else ()


def _label(native: str, label: str | None = None) -> tuple[str, ...]:
    """SWE-bench's Django parser keeps what precedes `` ... ok`` on a line: unittest's
    label, whose last line is the docstring's first line when the test has one."""
    if not label:
        return ()
    last = label.strip().splitlines()[-1].strip()
    return (last,) if last else ()


def _native(native: str, label: str | None = None) -> tuple[str, ...]:
    return (native,)


for _convention in (
    Convention("pytest", "pytest node ids, cut at the first whitespace",
               ("parse_log_pytest", "parse_log_astroid", "parse_log_flask", "parse_log_marshmallow",
                "parse_log_pvlib", "parse_log_pyvista", "parse_log_sqlfluff", "parse_log_xarray"),
               _pytest, _classify_node_id),
    Convention("pytest-options", "pytest node ids; '/'-parametrisations shortened to their last component",
               ("parse_log_pytest_options", "parse_log_requests", "parse_log_pylint", "parse_log_pydicom"),
               _pytest_options, _classify_node_id),
    Convention("pytest-v2", "pytest node ids with terminal colour codes removed",
               ("parse_log_pytest_v2", "parse_log_astropy", "parse_log_scikit", "parse_log_sphinx"),
               _pytest_v2, _classify_node_id),
    Convention("matplotlib", "pytest node ids with MouseButton names as numbers",
               ("parse_log_matplotlib",), _matplotlib, _classify_node_id),
    Convention("seaborn", "pytest node ids", ("parse_log_seaborn",), _pytest, _classify_node_id),
    Convention("sympy", "the test function's name", ("parse_log_sympy",), _sympy, _classify_sympy),
    Convention("django", "the label unittest prints (its last line)", ("parse_log_django",), _label,
               _classify_label),
    Convention("native", "the runner's own ids", (), _native, _classify_any),
):
    register_convention(_convention)


# --------------------------------------------------------------------------- mapping results

@dataclass
class Mapped:
    """Results keyed by dataset id. ``sources`` names the native ids behind a graded id
    that several tests are known by; ``conflicts`` are dataset ids any of whose native
    ids had contradictory reports."""

    statuses: dict[str, TestStatus] = field(default_factory=dict)
    sources: dict[str, list[str]] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def map_results(convention: Convention, statuses: Mapping[str, TestStatus], labels: Mapping[str, str],
                graded: Iterable[str], native_conflicts: Iterable[str] = ()) -> Mapped:
    """Key a run's native results by the dataset ids they are known by.

    When several tests are known by one graded id (a parametrised id cut at a space, one
    function name in two sympy files), the worst status stands and a note says so; a
    graded id no result maps to stays absent (missing, reported by grading).
    """
    graded_set = set(graded)
    by_dataset: dict[str, list[str]] = {}
    for native in statuses:
        for dataset_id in convention.to_dataset(native, labels.get(native)):
            by_dataset.setdefault(dataset_id, []).append(native)
    bad_natives = set(native_conflicts)
    mapped = Mapped()
    for dataset_id, natives in by_dataset.items():
        status = statuses[natives[0]]
        for other in natives[1:]:
            status = TestStatus.worst(status, statuses[other])
        mapped.statuses[dataset_id] = status
        if dataset_id in graded_set and len(natives) > 1:
            mapped.sources[dataset_id] = natives[:20]
            mapped.notes.append(f"{dataset_id}: names {len(natives)} tests ({', '.join(natives[:4])}); "
                                f"worst status used")
        if bad_natives.intersection(natives):
            mapped.conflicts.append(dataset_id)
    return mapped
