"""Bad input stopped at the boundary, and host-side parsing bounded (issue 11, classes 8-9)."""

from __future__ import annotations

import json
import pytest

from harness.atomic import write_text_atomic
from harness.errors import InputError, PatchRejected
from harness.grading import parsers
from harness.grading.parsers import ResultsTooLarge, parse_junit, parse_pytest_text
from harness.inputs.instances import load_instances, parse_instance, read_records
from harness.inputs.predictions import Prediction, load_predictions
from harness.patches import MAX_PATCH_FILES, check_model_patch
from harness.paths import RunPaths, id_problem, safe_run_id
from tests.patchgen import demo_instance


@pytest.mark.parametrize("value", ["..", ".", ".hidden", "-rf", "a/b", "a b", "x" * 129, "", "\u00e9t\u00e9"])
def test_unsafe_ids_are_refused(value):
    assert id_problem(value) is not None
    with pytest.raises(InputError):
        safe_run_id(value)


@pytest.mark.parametrize("value", ["django__django-11099", "a", "x" * 128, "sympy__sympy-20590+copy.1"])
def test_ordinary_ids_pass(value):
    assert id_problem(value) is None


def test_run_paths_stay_inside_the_run_directory(tmp_path):
    with pytest.raises(InputError):
        RunPaths.create(tmp_path, "../escape")
    paths = RunPaths.create(tmp_path, "run")
    assert paths.instance_dir("abc", 2) == tmp_path / "run" / "abc" / "attempt-2"
    with pytest.raises(InputError):
        paths.instance_dir("..")
    (tmp_path / "run" / "link").symlink_to(tmp_path)
    with pytest.raises(InputError):
        paths.inside(tmp_path / "run" / "link" / "x")


def test_instance_record_with_a_bad_id_names_record_and_field():
    with pytest.raises(InputError, match="instance_id"):
        parse_instance(dict(demo_instance("harness-demo__calcly-1"), instance_id="x" * 300))


def test_non_utf8_file_is_a_clear_input_error(tmp_path):
    path = tmp_path / "preds.jsonl"
    path.write_bytes(b'{"instance_id": "a", "model_patch": "\xff"}\n')
    with pytest.raises(InputError, match=r"not UTF-8 text: byte 0xff at offset \d+ \(line 1\)"):
        read_records(path)
    with pytest.raises(InputError, match="not UTF-8"):
        load_instances(path)


def test_lone_surrogate_patch_is_rejected_not_a_crash(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"instance_id": "a", "model_name_or_path": "m", "model_patch": "\ud800"}) + "\n")
    pred = load_predictions(path).predictions[0]
    assert len(pred.checksum()) == 64
    with pytest.raises(PatchRejected, match="not valid text"):
        check_model_patch(pred.model_patch)
    write_text_atomic(tmp_path / "patch.diff", pred.model_patch)
    assert (tmp_path / "patch.diff").read_bytes() == b"\\ud800"


def test_model_excesses_are_rejected_before_anything_runs():
    many = "".join(f"--- /dev/null\n+++ b/f{i}.py\n@@ -0,0 +1 @@\n+x\n" for i in range(MAX_PATCH_FILES + 1))
    with pytest.raises(PatchRejected, match="over the limit"):
        check_model_patch(many)
    long_path = "/".join(["d" * 200] * 6) + "/conftest.py"
    with pytest.raises(PatchRejected, match="byte limit"):
        check_model_patch(f"--- /dev/null\n+++ b/{long_path}\n@@ -0,0 +1 @@\n+x\n")


# --------------------------------------------------------------------------- bounded parsing

def test_contradictory_summary_flood_parses_in_linear_time():
    """120,000 contradictory lines (60,000 ids): the harness before issue 11 kept conflicts in
    a list searched per line (about 10^9 steps here); a set makes it one pass."""
    lines = ["=" * 10 + " short test summary info " + "=" * 10]
    for i in range(60_000):
        lines += [f"PASSED t.py::test_{i}", f"FAILED t.py::test_{i} - AssertionError"]
    result = parse_pytest_text("\n".join(lines) + "\n", ["t.py::test_1"])
    assert len(result.conflicts) == 60_000 and result.statuses["t.py::test_1"] is parsers.TestStatus.FAILED


def test_summary_over_its_caps_is_too_large(monkeypatch):
    monkeypatch.setattr(parsers, "MAX_SUMMARY_LINES", 100)
    text = "=== short test summary info ===\n" + "PASSED t.py::a\n" * 101
    with pytest.raises(ResultsTooLarge, match="lines"):
        parse_pytest_text(text)
    with pytest.raises(ResultsTooLarge, match="characters"):
        parse_pytest_text("=== short test summary info ===\nPASSED " + "x" * 70_000 + "\n")


def _case(name: str, classname: str = "tests.test_a") -> str:
    return f'<testcase classname="{classname}" name="{name}" file="tests/test_a.py"/>'


def test_junit_caps(monkeypatch):
    bomb = b"<testsuites>" + b"<a/>" * 3000 + b"</testsuites>"
    monkeypatch.setattr(parsers, "MAX_JUNIT_ELEMENTS", 1000)
    with pytest.raises(ResultsTooLarge, match="elements"):
        parse_junit(bomb)
    monkeypatch.setattr(parsers, "MAX_TESTCASES", 10)
    many = ("<testsuite>" + "".join(_case(f"test_{i}") for i in range(11)) + "</testsuite>").encode()
    with pytest.raises(ResultsTooLarge, match="test cases"):
        parse_junit(many)
    long_name = ("<testsuite>" + _case("t" * (parsers.MAX_NAME + 1)) + "</testsuite>").encode()
    with pytest.raises(ResultsTooLarge, match="characters"):
        parse_junit(long_name)
    deep = b"<a>" * 100 + b"</a>" * 100
    with pytest.raises(ResultsTooLarge, match="deep"):
        parse_junit(deep)


def test_junit_stream_keeps_statuses_and_conflicts():
    xml = ("<testsuite>" + _case("test_x") + _case("test_x").replace("/>", "><failure/></testcase>")
           + _case("test_y").replace("/>", '><skipped type="pytest.xfail"/></testcase>') + "</testsuite>").encode()
    result = parse_junit(xml, ["tests/test_a.py"])
    assert result.statuses == {"tests/test_a.py::test_x": parsers.TestStatus.FAILED,
                               "tests/test_a.py::test_y": parsers.TestStatus.XFAIL}
    assert result.conflicts == ["tests/test_a.py::test_x"]


def test_checksum_of_ordinary_patch_is_unchanged():
    import hashlib
    assert Prediction("a", "m", "diff").checksum() == hashlib.sha256(b"diff").hexdigest()


def test_test_patch_applied_on_the_host(tmp_path):
    from harness.integrity.testpatch import apply_test_patch
    from harness.patches import patch_files
    from tests.patchgen import base_file
    record = demo_instance("harness-demo__calcly-1")
    result = apply_test_patch(record["test_patch"], patch_files(record["test_patch"]),
                              lambda p: (base_file("harness-demo__calcly-1", p).encode(), 0o644))
    assert b"def test_even_length_unsorted" in result.files["tests/test_stats.py"][0]
    assert result.deleted == [] and list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- ids that name the run's own files

def _run_file_names() -> set[str]:
    """Every name the harness writes at the top of a run directory, from RunPaths's
    accessors, the only place the package names them (tests/unit/test_run_layout.py), so
    that a new top-level file cannot be forgotten here."""
    paths = RunPaths(__import__("pathlib").Path("/r"))
    accessors = [name for name, value in vars(RunPaths).items() if isinstance(value, property)]
    return {getattr(paths, name).name for name in accessors}


@pytest.mark.parametrize("name", sorted(_run_file_names()))
@pytest.mark.parametrize("spell", [str, str.upper, str.title])
def test_ids_naming_the_run_directorys_files_are_refused_in_any_case(name, spell):
    from harness.paths import RUN_FILE_NAMES, instance_dir_problem
    assert name in RUN_FILE_NAMES
    assert instance_dir_problem(spell(name)) is not None


@pytest.mark.parametrize("value", ["compare-run-a-vs-run-b.json", "COMPARE-claims-x.md", "compare-x.html"])
def test_ids_naming_compare_outputs_are_refused(value):
    from harness.paths import instance_dir_problem
    assert instance_dir_problem(value) is not None


@pytest.mark.parametrize("value", ["summary.json.1", "harness.logs", "report", "my-summary.json", "compare-x.txt",
                                   "django__django-11099"])
def test_ids_near_the_run_files_pass(value):
    from harness.paths import instance_dir_problem
    assert instance_dir_problem(value) is None


@pytest.mark.parametrize("bad", ["harness.log", "Summary.JSON", "../x", "a/b", ".", ".lock"])
def test_reserved_or_unsafe_instance_ids_are_refused_at_load_naming_the_record(tmp_path, bad):
    good = demo_instance("harness-demo__calcly-1")
    path = tmp_path / "i.jsonl"
    path.write_text(json.dumps(dict(good, instance_id=bad)) + "\n" + json.dumps(good) + "\n")
    loaded = load_instances(path)
    assert [i.instance_id for i in loaded.instances] == ["harness-demo__calcly-1"]
    assert len(loaded.errors) == 1 and loaded.errors[0].field == "instance_id"
    assert "line 1" in str(loaded.errors[0])
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps({"instance_id": bad, "model_name_or_path": "m", "model_patch": ""}) + "\n")
    assert len(load_predictions(preds).errors) == 1
    with pytest.raises(InputError):
        RunPaths.create(tmp_path, "run").instance_dir(bad)


# --------------------------------------------------------------------------- numeric options

def _option_cases():
    """(argv, option) for a value out of range of every numeric option of every command."""
    return [
        (["run", "--timeout", "-1"], "--timeout"), (["run", "--timeout", "0"], "--timeout"),
        (["run", "--timeout", "86401"], "--timeout"), (["run", "--timeout", "1.5"], "--timeout"),
        (["run", "--max-workers", "0"], "--max-workers"), (["validate", "--max-workers", "-3"], "--max-workers"),
        (["audit", "--max-workers", "1025"], "--max-workers"),
        (["run", "--task-timeout", "0"], "--task-timeout"), (["run", "--task-timeout", "nan"], "--task-timeout"),
        (["run", "--task-timeout", "inf"], "--task-timeout"),
        (["validate", "--repeat", "0"], "--repeat"), (["validate", "--repeat", "101"], "--repeat"),
        (["view", "x", "--port", "-1"], "--port"), (["view", "x", "--port", "65536"], "--port"),
        (["compare", "x", "--seed", "-1"], "--seed"), (["compare", "x", "--budget-attempts", "0"], "--budget-attempts"),
        (["compare", "x", "--budget-calls", "-1"], "--budget-calls"),
        (["node", "--head", "--port", "0"], "--port"), (["node", "--head", "--engine-slots", "-1"], "--engine-slots"),
        (["node", "--head", "--engine-grace", "0"], "--engine-grace"),
    ]


@pytest.mark.parametrize("argv,option", _option_cases(), ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_numeric_options_out_of_range_exit_2_with_one_line(argv, option, capsys):
    from harness.cli import main
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert option in lines[0] and "allowed range" in lines[0] and "Traceback" not in captured.err


def test_every_numeric_option_has_a_range():
    """No command has an int/float option without a range (a new one must get one)."""
    import argparse
    from harness.cli import build_parser
    unchecked = []

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)
            elif action.type in (int, float):
                unchecked.append(f"{parser.prog} {action.option_strings}")
    walk(build_parser())
    assert unchecked == []


@pytest.mark.parametrize("argv,attr,value", [(["run", "--timeout", "1"], "timeout", 1),
                                             (["run", "--timeout", "86400"], "timeout", 86400),
                                             (["run", "--max-workers", "1"], "max_workers", 1),
                                             (["run", "--task-timeout", "0.5e1"], "task_timeout", 5.0),
                                             (["view", "x", "--port", "0"], "port", 0),
                                             (["node", "--head", "--engine-slots", "0"], "engine_slots", 0)])
def test_numeric_options_at_the_bounds_are_accepted(argv, attr, value):
    from harness.cli import build_parser
    assert getattr(build_parser().parse_args(argv), attr) == value


def test_eval_config_refuses_a_timeout_below_one_second():
    from harness.evaluation.setup import EvalConfig
    for bad in (-1, 0):
        with pytest.raises(ValueError):
            EvalConfig(timeout=bad)
    assert EvalConfig(timeout=1).timeout == 1 and EvalConfig().timeout is None
