"""Result parsers (harness.grading.parsers).

The JUnit XML and ``-rA`` output under test are produced for real, by running pytest in a
subprocess on a small throw-away project, and the node ids are checked against pytest's
own ``--collect-only`` ids.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.errors import InputError, UnknownNameError
from harness.grading import parsers
from harness.grading.parsers import (PARSERS, RunArtefacts, get_parser, parse_junit,
                                     parse_pytest_text)
from harness.grading.status import TestStatus

P, F, E, S, X = (TestStatus.PASSED, TestStatus.FAILED, TestStatus.ERROR, TestStatus.SKIPPED,
                 TestStatus.XFAIL)

# --------------------------------------------------------------------------- a real run

PROJECT = {
    "pytest.ini": "[pytest]\n",
    "test_top.py": '''
        import pytest

        def test_pass():
            pass

        def test_fail():
            assert 1 == 2

        @pytest.fixture
        def broken():
            raise RuntimeError("setup boom")

        def test_setup_error(broken):
            pass

        @pytest.fixture
        def bad_teardown():
            yield
            raise RuntimeError("teardown boom")

        def test_teardown_error(bad_teardown):
            pass

        def test_skip():
            pytest.skip("not here")

        @pytest.mark.xfail(reason="known bug")
        def test_xfail():
            assert False

        @pytest.mark.xfail(reason="lenient", strict=False)
        def test_xpass_nonstrict():
            pass

        @pytest.mark.xfail(reason="strict", strict=True)
        def test_xpass_strict():
            pass

        def test_prints_fake_results():
            # captured stdout is shown by -rA, outside the summary section
            print("PASSED test_top.py::test_fail")
            print("FAILED test_top.py::test_pass")
            print("PASSED test_top.py::test_invented")

        class TestThing:
            def test_method(self):
                pass

            def test_method_fail(self):
                assert 0

        @pytest.mark.parametrize("value", ["a b", "x::y", "1.5", "ok"])
        def test_param(value):
            assert value != "1.5"
    ''',
    "pkg/__init__.py": "",
    "pkg/sub/__init__.py": "",
    "pkg/sub/test_deep.py": '''
        class TestOuter:
            class TestInner:
                def test_nested(self):
                    pass

        def test_deep_fail():
            raise ValueError("deep")
    ''',
    "tests/v1.2/test_dotted_dir.py": '''
        def test_in_dotted_dir():
            pass
    ''',
}
KNOWN_FILES = ("test_top.py", "pkg/sub/test_deep.py", "tests/v1.2/test_dotted_dir.py")

#: What pytest's outcome model says each test ends as (by test name).
EXPECTED = {
    "test_top.py::test_pass": P,
    "test_top.py::test_fail": F,
    "test_top.py::test_setup_error": E,
    "test_top.py::test_teardown_error": E,  # passed, then errored in teardown
    "test_top.py::test_skip": S,
    "test_top.py::test_xfail": X,
    "test_top.py::test_xpass_nonstrict": P,
    "test_top.py::test_xpass_strict": F,
    "test_top.py::test_prints_fake_results": P,
    "test_top.py::TestThing::test_method": P,
    "test_top.py::TestThing::test_method_fail": F,
    "test_top.py::test_param[a b]": P,
    "test_top.py::test_param[x::y]": P,
    "test_top.py::test_param[1.5]": F,
    "test_top.py::test_param[ok]": P,
    "pkg/sub/test_deep.py::TestOuter::TestInner::test_nested": P,
    "pkg/sub/test_deep.py::test_deep_fail": F,
    "tests/v1.2/test_dotted_dir.py::test_in_dotted_dir": P,
}


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=project, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    project = tmp_path_factory.mktemp("proj")
    for rel, body in PROJECT.items():
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body).lstrip())
    collected = _pytest(project, "--collect-only", "-q")
    node_ids = [line for line in collected.stdout.splitlines() if "::" in line]
    runs = {}
    for family in ("xunit1", "xunit2"):
        junit = project.parent / f"{project.name}-{family}.xml"
        proc = _pytest(project, "-rA", f"--junitxml={junit}", "-o", f"junit_family={family}")
        assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
        runs[family] = (proc.stdout, junit.read_bytes())
    return node_ids, runs


def test_the_real_project_collects_what_we_expect(real_run):
    node_ids, _ = real_run
    # pytest's own ids are the reference for everything below
    assert sorted(node_ids) == sorted(EXPECTED)


@pytest.mark.parametrize("family", ["xunit1", "xunit2"])
def test_junit_ids_and_statuses_match_pytest(real_run, family):
    node_ids, runs = real_run
    _, xml = runs[family]
    result = parse_junit(xml, KNOWN_FILES)
    assert result.source == "junit"
    assert result.conflicts == [] and result.notes == []
    assert sorted(result.statuses) == sorted(node_ids)
    assert result.statuses == EXPECTED


def test_xunit1_needs_no_known_files(real_run):
    _, runs = real_run
    result = parse_junit(runs["xunit1"][1])  # the 'file' attribute is enough
    assert result.statuses == EXPECTED


def test_xunit2_without_known_files_is_best_effort_for_plain_modules(real_run):
    _, runs = real_run
    result = parse_junit(runs["xunit2"][1])
    assert result.statuses["test_top.py::test_fail"] is F
    assert result.statuses["pkg/sub/test_deep.py::test_deep_fail"] is F


@pytest.mark.parametrize("family", ["xunit1", "xunit2"])
def test_text_summary_matches_pytest(real_run, family):
    node_ids, runs = real_run
    output, _ = runs[family]
    result = parse_pytest_text(output, graded_ids=node_ids)
    assert result.source == "text"
    # 'SKIPPED [1] file:line: reason' carries no node id; everything else is reported
    expected = {k: v for k, v in EXPECTED.items() if v is not S}
    assert result.statuses == expected
    # printed 'PASSED ...' lines in the PASSES section did not count
    assert "test_top.py::test_invented" not in result.statuses


def test_text_ids_with_spaces_need_the_graded_ids(real_run):
    _, runs = real_run
    output, _ = runs["xunit1"]
    without = parse_pytest_text(output)
    assert "test_top.py::test_param[a b]" not in without.statuses
    assert without.statuses["test_top.py::test_param[x::y]"] is P
    with_ids = parse_pytest_text(output, ["test_top.py::test_param[a b]"])
    assert with_ids.statuses["test_top.py::test_param[a b]"] is P


@pytest.mark.parametrize("name", ["pytest", "pytest-junit"])
def test_registered_parsers_on_the_real_run(real_run, name):
    node_ids, runs = real_run
    output, xml = runs["xunit1"]
    art = RunArtefacts(output=output, junit_xml=xml, known_files=KNOWN_FILES,
                       graded_ids=tuple(node_ids))
    result = get_parser(name)(art)
    assert result.source == "junit"
    assert result.statuses == EXPECTED
    # an honest run: the cross-check finds nothing to complain about
    assert result.conflicts == []
    assert result.notes == []


def test_pytest_text_parser_on_the_real_run(real_run):
    node_ids, runs = real_run
    output, xml = runs["xunit2"]
    result = get_parser("pytest-text")(RunArtefacts(output=output, junit_xml=xml,
                                                    graded_ids=tuple(node_ids)))
    assert result.source == "text"
    assert result.statuses["test_top.py::test_xpass_strict"] is F
    assert result.statuses["test_top.py::test_teardown_error"] is E


# --------------------------------------------------------------------------- synthetic XML

def _xml(*cases: str) -> bytes:
    return ("<testsuites><testsuite>" + "".join(cases) + "</testsuite></testsuites>").encode()


def _case(name: str, classname: str = "tests.test_a", body: str = "", file: str | None = None) -> str:
    attr = f' file="{file}"' if file else ""
    return f'<testcase classname="{classname}" name="{name}"{attr}>{body}</testcase>'


FAIL = '<failure message="x">boom</failure>'
SKIP = '<skipped type="pytest.skip" message="s">s</skipped>'


def test_junit_same_id_twice_with_different_outcomes_is_a_conflict():
    result = parse_junit(_xml(_case("test_x"), _case("test_x", body=FAIL), _case("test_y"),
                              _case("test_y")), ["tests/test_a.py"])
    assert result.conflicts == ["tests/test_a.py::test_x"]
    assert result.statuses["tests/test_a.py::test_x"] is F  # the worse one is kept
    assert result.statuses["tests/test_a.py::test_y"] is P  # a repeat that agrees is fine


def test_junit_longest_known_module_wins():
    known = ["tests/test_a.py", "tests/test_a/test_b.py"]
    result = parse_junit(_xml(_case("test_m", classname="tests.test_a.test_b"),
                              _case("test_c", classname="tests.test_a.TestK")), known)
    assert set(result.statuses) == {"tests/test_a/test_b.py::test_m", "tests/test_a.py::TestK::test_c"}


def test_junit_file_attribute_that_does_not_match_classname_is_not_trusted():
    # a file attribute inconsistent with the classname falls back to the known files
    result = parse_junit(_xml(_case("test_q", classname="tests.test_a", file="other.py")),
                         ["tests/test_a.py"])
    assert list(result.statuses) == ["tests/test_a.py::test_q"]


def test_junit_testcase_without_name_is_ignored():
    result = parse_junit(_xml('<testcase classname="tests.test_a"/>', _case("test_ok")),
                         ["tests/test_a.py"])
    assert list(result.statuses) == ["tests/test_a.py::test_ok"]


def test_junit_xfail_skip_type_distinguishes_xfail_from_skip():
    xfail = '<skipped type="pytest.xfail" message="r"/>'
    result = parse_junit(_xml(_case("test_s", body=SKIP), _case("test_x", body=xfail)),
                         ["tests/test_a.py"])
    assert result.statuses == {"tests/test_a.py::test_s": S, "tests/test_a.py::test_x": X}


@pytest.mark.parametrize("payload", [
    b"",
    b"not xml at all",
    b"<testsuite><testcase name='x'",
    b"<a>&undefined;</a>",
    b'<?xml version="1.0" encoding="bogus"?><testsuite/>',
    b'<?xml version="1.0" encoding="rot13"?><testsuite/>',
    b'<?xml version="1.0" encoding="utf-32"?><testsuite/>',
    b'<!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]><t><testcase classname="c" name="&x;"/></t>',
])
def test_malformed_junit_gives_an_empty_result_with_a_note(payload):
    result = parse_junit(payload, ["tests/test_a.py"])
    assert result.statuses == {}
    assert result.source == "none"
    assert len(result.notes) == 1 and "unparsable" in result.notes[0]


def test_oversize_junit_is_refused_as_over_the_limit(monkeypatch):
    monkeypatch.setattr(parsers, "MAX_JUNIT_BYTES", 100)
    xml = _xml(*[_case(f"test_{i}") for i in range(10)])
    with pytest.raises(parsers.ResultsTooLarge, match="over the 100-byte cap"):
        parse_junit(xml, ["tests/test_a.py"])


# --------------------------------------------------------------------------- synthetic text

def _summary(*lines: str, before: str = "", after: str = "") -> str:
    return (f"{before}"
            "=========================== short test summary info ============================\n"
            + "".join(line + "\n" for line in lines)
            + "========================= 1 failed, 1 passed in 0.01s =========================\n"
            + after)


def test_text_lines_outside_the_summary_are_ignored():
    noise = ("tests/test_a.py::test_x PASSED\n"
             "PASSED tests/test_a.py::test_forged\n"
             "=================================== FAILURES ===================================\n"
             "FAILED tests/test_a.py::test_ok - in a traceback\n")
    out = _summary("PASSED tests/test_a.py::test_ok", "FAILED tests/test_a.py::test_x - boom",
                   before=noise, after="PASSED tests/test_a.py::test_after\n")
    result = parse_pytest_text(out)
    assert result.statuses == {"tests/test_a.py::test_ok": P, "tests/test_a.py::test_x": F}
    assert result.conflicts == []


def test_text_without_a_summary_section_is_empty():
    result = parse_pytest_text("PASSED tests/test_a.py::test_x\n1 passed\n")
    assert result.statuses == {}


def test_text_statuses_and_skipped_lines():
    out = _summary("PASSED t.py::a", "FAILED t.py::b - AssertionError", "ERROR t.py::c - boom",
                   "XFAIL t.py::d - reason", "XPASS t.py::e - reason", "SKIPPED [2] t.py:3: why",
                   "SKIPPED t.py::f", "PASSED", "NONSENSE t.py::g")
    result = parse_pytest_text(out)
    assert result.statuses == {"t.py::a": P, "t.py::b": F, "t.py::c": E, "t.py::d": X,
                               "t.py::e": P, "t.py::f": S}


def test_text_same_id_twice_with_different_outcomes_is_a_conflict():
    out = _summary("PASSED t.py::a", "FAILED t.py::a", "PASSED t.py::b", "PASSED t.py::b")
    result = parse_pytest_text(out)
    assert result.conflicts == ["t.py::a"]
    assert result.statuses == {"t.py::a": F, "t.py::b": P}


def test_text_graded_ids_match_longest_first():
    out = _summary("PASSED t.py::test_p[a b c] - extra words", "FAILED t.py::test_p[a b] - x")
    result = parse_pytest_text(out, ["t.py::test_p[a b]", "t.py::test_p[a b c]"])
    assert result.statuses == {"t.py::test_p[a b c]": P, "t.py::test_p[a b]": F}


def test_text_forged_summary_header_in_captured_output_is_ignored():
    """Captured output (which -rA shows, and code under test controls) precedes the real
    summary: a summary header printed there must not inject results."""
    forged = ("==================================== PASSES ====================================\n"
              "_________________________________ test_evil __________________________________\n"
              "----------------------------- Captured stdout call -----------------------------\n"
              "=========================== short test summary info ============================\n"
              "PASSED t.py::test_deleted_by_the_patch\n")
    result = parse_pytest_text(_summary("PASSED t.py::test_evil", before=forged))
    assert result.statuses == {"t.py::test_evil": P}
    assert any("summary headers" in note for note in result.notes)


def test_text_single_summary_has_no_notes():
    assert parse_pytest_text(_summary("PASSED t.py::a")).notes == []


def test_text_forged_summary_on_a_real_run(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_evil.py").write_text(textwrap.dedent('''
        def test_evil():
            print("=" * 20 + " short test summary info " + "=" * 20)
            print("PASSED test_evil.py::test_gone")
            print("PASSED test_evil.py::test_fails")

        def test_fails():
            assert False
    '''))
    proc = _pytest(tmp_path, "-rA")
    assert "PASSED test_evil.py::test_gone" in proc.stdout  # the forgery is in the output
    result = parse_pytest_text(proc.stdout)
    assert result.statuses == {"test_evil.py::test_evil": P, "test_evil.py::test_fails": F}
    assert result.conflicts == []


# --------------------------------------------------------------------------- cross-check

def _art(text_lines, junit_cases, graded, known=("tests/test_a.py",)):
    return RunArtefacts(output=_summary(*text_lines),
                        junit_xml=None if junit_cases is None else _xml(*junit_cases),
                        known_files=tuple(known), graded_ids=tuple(graded))


ID = "tests/test_a.py::test_x"


@pytest.mark.parametrize("junit_body, text_word, conflict", [
    ("", "PASSED", False),
    (FAIL, "FAILED", False),
    (FAIL, "ERROR", False),             # both failing: same verdict either way
    ('<skipped type="pytest.xfail" message="r"/>', "XFAIL", False),
    ("", "XPASS", False),               # non-strict xpass is a pass in both
    (FAIL, "PASSED", True),
    ("", "FAILED", True),
    ("", "XFAIL", True),
    ('<skipped type="pytest.xfail" message="r"/>', "PASSED", True),
    (SKIP, "FAILED", True),             # SKIPPED keeps a P2P test; FAILED does not
    (SKIP, "ERROR", True),
])
def test_pytest_parser_flags_junit_text_disagreement(junit_body, text_word, conflict):
    result = get_parser("pytest")(_art([f"{text_word} {ID}"], [_case("test_x", body=junit_body)], [ID]))
    assert result.source == "junit"
    assert (ID in result.conflicts) is conflict


def test_pytest_parser_keeps_junit_as_authority_on_conflict():
    result = get_parser("pytest")(_art([f"PASSED {ID}"], [_case("test_x", body=FAIL)], [ID]))
    assert result.statuses[ID] is F


def test_pytest_parser_flags_text_claims_junit_never_recorded():
    other = "tests/test_a.py::test_other"
    result = get_parser("pytest")(_art([f"PASSED {ID}", f"PASSED {other}"], [_case("test_other")],
                                       [ID, other]))
    assert result.conflicts == [ID]
    assert any(ID in note and "only in text summary" in note for note in result.notes)
    assert ID not in result.statuses  # never graded from the forged line


def test_pytest_parser_only_cross_checks_graded_ids():
    result = get_parser("pytest")(_art([f"FAILED {ID}", "PASSED tests/test_a.py::test_ghost"],
                                       [_case("test_x")], graded=[]))
    assert result.conflicts == []


def test_pytest_parser_keeps_junit_internal_conflicts_once():
    result = get_parser("pytest")(_art([f"PASSED {ID}"], [_case("test_x"), _case("test_x", body=FAIL)],
                                       [ID]))
    assert result.conflicts == [ID]


def test_pytest_parser_never_trusts_the_text_alone_without_junit():
    result = get_parser("pytest")(_art([f"PASSED {ID}"], None, [ID]))
    assert result.source == "none"
    assert result.statuses == {}
    assert any("junit" in n for n in result.notes)


def test_pytest_parser_never_trusts_the_text_alone_when_junit_is_malformed():
    art = RunArtefacts(output=_summary(f"PASSED {ID}"), junit_xml=b"<broken", graded_ids=(ID,))
    result = get_parser("pytest")(art)
    assert result.source == "none"
    assert result.statuses == {}
    assert any("unparsable" in n for n in result.notes)


def test_pytest_junit_parser_without_junit_has_nothing():
    result = get_parser("pytest-junit")(_art([f"PASSED {ID}"], None, [ID]))
    assert result.statuses == {} and result.source == "none" and result.notes


def test_pytest_text_parser_ignores_junit():
    result = get_parser("pytest-text")(_art([f"FAILED {ID}"], [_case("test_x")], [ID]))
    assert result.source == "text" and result.statuses == {ID: F}


# --------------------------------------------------------------------------- registry

def test_unknown_parser_name_suggests_close_names():
    with pytest.raises(UnknownNameError) as info:
        get_parser("pytest-junt")
    message = str(info.value)
    assert "'pytest-junit'" in message and "did you mean" in message
    assert info.value.field == "parser"
    assert isinstance(info.value, InputError) and isinstance(info.value, KeyError)


def test_unknown_parser_name_with_nothing_close_lists_the_registered():
    with pytest.raises(UnknownNameError) as info:
        get_parser("zzzzzzzz")
    assert "did you mean" not in str(info.value)
    assert all(name in str(info.value) for name in PARSERS)


def test_registry_contents_and_runner_args():
    assert {"pytest", "pytest-junit", "pytest-text"} <= set(PARSERS)
    for name in ("pytest", "pytest-junit"):
        assert PARSERS[name].wants_junit and "{junit_path}" in PARSERS[name].runner_args
    assert not PARSERS["pytest-text"].wants_junit
    assert get_parser("pytest") is PARSERS["pytest"]


def test_registering_a_name_twice_is_refused():
    with pytest.raises(ValueError):
        parsers.register("pytest")(lambda art: parsers.ParsedResults())
    assert PARSERS["pytest"].parse is not None and PARSERS["pytest"].name == "pytest"


def test_graded_ids_cut_at_the_first_space_match_the_full_node_ids():
    """SWE-bench's lists hold ids split on whitespace: 'test_x[a' for 'test_x[a  b]'."""
    from harness.grading.parsers import ParsedResults, alias_truncated_ids
    result = ParsedResults(statuses={
        "t.py::test_x[a  b-0]": TestStatus.PASSED,
        "t.py::test_x[a c-1]": TestStatus.FAILED,
        "t.py::test_y[only one]": TestStatus.PASSED,
        "t.py::test_z": TestStatus.PASSED,
    }, source="junit")
    alias_truncated_ids(result, ["t.py::test_x[a", "t.py::test_y[only", "t.py::test_z", "t.py::test_w["])
    assert result.statuses["t.py::test_x[a"] is TestStatus.FAILED  # worst of the two it covers
    assert result.statuses["t.py::test_y[only"] is TestStatus.PASSED
    assert "t.py::test_w[" not in result.statuses
    assert any("test_x[a" in note for note in result.notes)
