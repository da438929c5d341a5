"""Issue 36, class 6: bad input is refused and named, never counted as an instance, and
nothing of it reaches the terminal as markup or a control sequence.

* every record field is type- and size-checked before use (the parsers' own failures
  included: JSON nested too deep to read, an integer too long to convert);
* a bad record is refused and named, and never counted as an instance (a record whose id
  is not a string was counted as a made-up instance ``#N``, and the HTML report failed);
* a malformed record naming an id another record has refuses both (at 6eb3dd5 the good
  one was graded FULL while the summary counted the id as an error: resolved 0 of 1);
* everything printed escapes markup and control characters.

The same through the command on the demo set: tests/integration/test_integrity_round4.py.
"""

from __future__ import annotations

import io
import json
import sys

import pytest

from harness.errors import InputError
from harness.grading.status import InstanceStatus
from harness.inputs.predictions import load_predictions
from harness.results.report import InstanceResult, summarise


def _line(**fields) -> str:
    record = {"instance_id": "harness-demo__calcly-1", "model_name_or_path": "m", "model_patch": ""}
    record.update(fields)
    return json.dumps(record)


@pytest.mark.parametrize("text,why", [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"instance_id": "x", "attempt": ' + "9" * 5000 + "}", "integer too long"),
])
def test_unreadable_json_is_one_line_naming_the_file_and_line(tmp_path, text, why):
    path = tmp_path / "p.jsonl"
    path.write_text(_line() + "\n" + text + "\n")
    with pytest.raises(InputError) as info:
        load_predictions(path)
    message = str(info.value)
    assert why in message and "line 2" in message and str(path) in message
    assert "\n" not in message and len(message) < 500


def test_a_whole_json_file_nested_too_deep_is_one_line(tmp_path):
    path = tmp_path / "p.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match="nested too deeply"):
        load_predictions(path)


@pytest.mark.parametrize("fields,field", [
    ({"attempt": 10 ** 30}, "attempt"),
    ({"model_name_or_path": "m" * 10_000}, "model_name_or_path"),
    ({"steps": 10 ** 20}, "steps"),
])
def test_record_fields_are_size_checked(tmp_path, fields, field):
    path = tmp_path / "p.jsonl"
    path.write_text(_line(**fields) + "\n")
    loaded = load_predictions(path)
    assert loaded.predictions == [] and [e.field for e in loaded.errors] == [field]


def test_a_malformed_copy_of_an_id_refuses_every_copy(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(_line(model_patch="diff") + "\n" + _line(model_patch=3) + "\n")
    loaded = load_predictions(path)
    assert loaded.predictions == []
    assert [e.record for e in loaded.errors] == ["harness-demo__calcly-1"]
    assert "line 1" in str(loaded.errors[0]) and "line 2" in str(loaded.errors[0])


def test_attempts_of_one_id_are_not_duplicates(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(_line(attempt=1) + "\n" + _line(attempt=2) + "\n")
    assert [p.attempt for p in load_predictions(path).predictions] == [1, 2]


def test_a_refused_record_is_never_counted_as_an_instance():
    result = InstanceResult(instance_id="harness-demo__calcly-1", repo="r", model_name_or_path="m",
                            status=InstanceStatus.FULL, resolved=True)
    summary = summarise("run", "m", ["harness-demo__calcly-1"], [result],
                        {"#1": "record #1: instance_id: missing or not a string"})
    assert summary["total_instances"] == 1 and summary["resolved_ids"] == ["harness-demo__calcly-1"]
    assert summary["error_ids"] == [] and summary["input_errors"] == {
        "#1": "record #1: instance_id: missing or not a string"}


HOSTILE_NAME = "[/bold][red]m\x1b]0;owned\x07\x1b[2J\x9b31m\r\nharness: resolved 300 of 300"


def test_the_results_table_prints_a_hostile_model_name_as_text(monkeypatch):
    from harness.clioutput import escaped_output, print_table
    result = InstanceResult(instance_id="harness-demo__calcly-1", repo="r", model_name_or_path=HOSTILE_NAME,
                            status=InstanceStatus.NO, resolved=False)
    summary = summarise("run", HOSTILE_NAME, ["harness-demo__calcly-1"], [result], {})
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    with escaped_output():
        print_table([result], summary)
    text = out.getvalue()
    assert "[/bold][red]m" in text                       # shown as written, not read as markup
    assert "\x1b" not in text and "\x9b" not in text and "\x07" not in text and "\r" not in text
    assert "\\x1b]0;owned" in text
    assert "resolved 0 of 1" in text


def test_every_print_of_the_command_escapes_control_characters(monkeypatch, capsys):
    """An error naming a record prints the record's name escaped (stderr, exit 2)."""
    from harness.cli import main
    code = main(["specs", "show", "x/y\x1b[2J", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "\x1b" not in err and "\\x1b[2J" in err
