"""Test-id conventions (harness/grading/conventions.py), each from real ids.

Every dataset id below is copied from a published record (../shared/swebench: Lite test
split or Verified, instance named beside it); every native id is what the runner reports
for that test: the pytest node id pytest builds from the parametrisation in the repository
at the record's base commit (quoted beside it), or a line of a real run's output.
"""

from __future__ import annotations

import pytest

from harness.grading.conventions import (CONVENTIONS, IdKind, convention_for_swebench_parser, get_convention,
                                         map_results)
from harness.grading.status import TestStatus
from harness.errors import UnknownNameError


def known_as(convention: str, native: str, label: str | None = None) -> tuple[str, ...]:
    return get_convention(convention).to_dataset(native, label)


# --------------------------------------------------------------------------- pytest-options

def test_pytest_options_pylint_7080_stdin_parametrisation():
    # pylint tests/test_self.py at 7080's base: parametrize("input_path,module,expected_path",
    # [(join(HERE, "mymodule.py"), "mymodule", join(HERE, "mymodule.py")), ...]); HERE is /testbed/tests
    native = ("tests/test_self.py::TestRunTC::test_stdin"
              "[/testbed/tests/mymodule.py-mymodule-/testbed/tests/mymodule.py]")
    # PASS_TO_PASS of pylint-dev__pylint-7080 (Lite)
    assert "tests/test_self.py::TestRunTC::test_stdin[/mymodule.py]" in known_as("pytest-options", native)
    # the relative parametrisation is not shortened
    other = "tests/test_self.py::TestRunTC::test_stdin[mymodule.py-mymodule-mymodule.py]"
    assert known_as("pytest-options", other) == (other,)
    # under plain SWE-bench pytest ids the shortened form is unknown: the test would be "missing"
    assert "tests/test_self.py::TestRunTC::test_stdin[/mymodule.py]" not in known_as("pytest", native)


def test_pytest_options_requests_6028_paths():
    # requests tests/test_utils.py at 6028's base: parametrize('path', ('/', __file__, pytest.__file__,
    # '/etc/invalid/location')); ids in PASS_TO_PASS of psf__requests-6028 (Verified)
    base = "tests/test_utils.py::TestExtractZippedPaths::test_unzipped_paths_unchanged"
    cases = {f"{base}[/]": f"{base}[/]",
             f"{base}[/testbed/tests/test_utils.py]": f"{base}[/test_utils.py]",
             f"{base}[/opt/harness/venv/lib/python3.9/site-packages/pytest/__init__.py]": f"{base}[/__init__.py]",
             f"{base}[/etc/invalid/location]": f"{base}[/location]"}
    for native, dataset_id in cases.items():
        assert dataset_id in known_as("pytest-options", native)


def test_pytest_options_keeps_globs_and_double_slashes():
    # pytest-dev__pytest-11148 (Lite) FAIL_TO_PASS: a '*' in the parametrisation is never shortened
    native = "testing/test_pathlib.py::TestFNMatcherPort::test_matching[/c/*.py-/c/foo.py]"
    assert known_as("pytest-options", native) == (native,)


# --------------------------------------------------------------------------- pytest / v2

def test_pytest_cuts_at_first_space():
    # sphinx tests/test_ext_napoleon_docstring.py at sphinx-doc__sphinx-8713's base:
    # parametrize(("name", "expected"), (("x, y, z", "x, y, z"), ...)); the record (Lite) lists
    # the id cut at the first space
    native = "tests/test_ext_napoleon_docstring.py::TestNumpyDocstring::test_escape_args_and_kwargs[x, y, z-x, y, z]"
    dataset_id = "tests/test_ext_napoleon_docstring.py::TestNumpyDocstring::test_escape_args_and_kwargs[x,"
    for name in ("pytest", "pytest-v2", "pytest-options", "seaborn", "matplotlib"):
        assert known_as(name, native) == (native, dataset_id)


def test_pytest_v2_strips_only_colour_code_remnants():
    # SWE-bench's parse_log_pytest_v2 removes "[<digits>m" (a colour code without its ESC) and control
    # characters before splitting. A real astropy id that merely ends in "m" inside brackets is kept:
    # astropy__astropy-14369 (Verified) PASS_TO_PASS, parametrised as "5x8+3m" in test_format.py
    native = "astropy/units/tests/test_format.py::test_cds_grammar_fail[5x8+3m]"
    assert known_as("pytest-v2", native) == (native,)
    # the id as pytest printed it with its colour codes on (ESC[32m ... ESC[0m) maps to the plain id
    coloured = "\x1b[32mastropy/units/tests/test_format.py::test_cds_grammar_fail[5x8+3m]\x1b[0m"
    assert native in known_as("pytest-v2", coloured)


def test_matplotlib_mouse_buttons():
    # lib/matplotlib/tests/test_backend_bases.py: parametrize("tool,button,expected",
    # [("zoom", MouseButton.LEFT, (4, 6)), ("zoom", MouseButton.RIGHT, (-20, 30)), ...]); pytest
    # spells an IntEnum member "MouseButton.LEFT" before Python 3.11; matplotlib__matplotlib-25433 (Lite)
    # lists the ids with the buttons as numbers
    base = "lib/matplotlib/tests/test_backend_bases.py::test_interactive_colorbar"
    assert f"{base}[zoom-1-expected0-vertical-imshow]" in known_as(
        "matplotlib", f"{base}[zoom-MouseButton.LEFT-expected0-vertical-imshow]")
    assert f"{base}[zoom-3-expected1-horizontal-contourf]" in known_as(
        "matplotlib", f"{base}[zoom-MouseButton.RIGHT-expected1-horizontal-contourf]")


def test_pytest_log_fragments_are_known_fragments_not_tests():
    # pytest-dev__pytest-5227 (Lite) PASS_TO_PASS
    classify = get_convention("pytest").classify
    for fragment in ("[100%]", "[", "[100%]------------------------------"):
        assert classify(fragment) is IdKind.LOG_FRAGMENT
    assert classify("testing/logging/test_reporting.py::test_nothing_logged") is IdKind.TEST
    # a sympy id cannot name a pytest test, nor a Django label
    assert classify("test_ccode_Relational") is IdKind.UNADDRESSABLE
    assert classify("test_x (app.tests.T)") is IdKind.UNADDRESSABLE


# --------------------------------------------------------------------------- sympy

def test_sympy_function_names():
    # bin/test --verbose in a real run of sympy__sympy-11400 (reporter JUnit: file + name):
    #   sympy/printing/tests/test_ccode.py[34]
    #   test_ccode_Relational ok
    native = "sympy/printing/tests/test_ccode.py::test_ccode_Relational"
    assert known_as("sympy", native) == ("test_ccode_Relational",)   # FAIL_TO_PASS of sympy__sympy-11400
    classify = get_convention("sympy").classify
    assert classify("test_ccode_Relational") is IdKind.TEST
    assert classify("sympy/printing/tests/test_ccode.py:test_ccode_Relational") is IdKind.UNADDRESSABLE


# --------------------------------------------------------------------------- django

def test_django_labels():
    # unittest labels as Django's runtests.py --verbosity 2 prints them; ids from django__django-11133
    # and django__django-16408 (Lite)
    assert known_as("django", "tests/httpwrappers/tests.py::QueryDictTests::test_multiple_keys",
                    "test_multiple_keys (httpwrappers.tests.QueryDictTests)\n"
                    "Test QueryDict with two key/value pairs with same keys.") == (
        "Test QueryDict with two key/value pairs with same keys.",)
    py311 = ("test_multilevel_reverse_fk_cyclic_select_related (known_related_objects.tests."
             "ExistingRelatedInstancesTests.test_multilevel_reverse_fk_cyclic_select_related)")
    assert known_as("django", "tests/known_related_objects/tests.py::ExistingRelatedInstancesTests::"
                              "test_multilevel_reverse_fk_cyclic_select_related", py311) == (py311,)
    # no label, no dataset id: the test stays missing and is reported
    assert known_as("django", "tests/x/tests.py::T::test_a", None) == ()


# --------------------------------------------------------------------------- registry and mapping

def test_registry_names_and_swebench_parsers():
    assert {"pytest", "pytest-options", "pytest-v2", "django", "sympy", "matplotlib", "seaborn"} <= set(CONVENTIONS)
    assert convention_for_swebench_parser("parse_log_pylint") == "pytest-options"
    assert convention_for_swebench_parser("parse_log_astropy") == "pytest-v2"
    assert convention_for_swebench_parser("parse_log_django") == "django"
    assert convention_for_swebench_parser("parse_log_nonexistent") is None
    with pytest.raises(UnknownNameError, match="pytest-options"):
        get_convention("pytest-option")


def test_map_results_worst_status_when_one_id_names_several_tests():
    statuses = {"a/tests/test_x.py::test_same": TestStatus.PASSED, "b/tests/test_x.py::test_same": TestStatus.FAILED,
                "a/tests/test_x.py::test_other": TestStatus.PASSED}
    mapped = map_results(get_convention("sympy"), statuses, {}, ["test_same", "test_other", "test_gone"])
    assert mapped.statuses["test_same"] is TestStatus.FAILED
    assert mapped.statuses["test_other"] is TestStatus.PASSED
    assert "test_gone" not in mapped.statuses                       # missing stays missing
    assert mapped.sources["test_same"] == ["a/tests/test_x.py::test_same", "b/tests/test_x.py::test_same"]
    assert any("names 2 tests" in n for n in mapped.notes)


def test_map_results_carries_conflicts_to_dataset_ids():
    statuses = {"sympy/core/tests/test_basic.py::test_subs": TestStatus.PASSED}
    mapped = map_results(get_convention("sympy"), statuses, {}, ["test_subs"],
                         native_conflicts=["sympy/core/tests/test_basic.py::test_subs"])
    assert mapped.conflicts == ["test_subs"]
