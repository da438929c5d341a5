"""Predictions (harness.inputs.predictions)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from harness.errors import InputError
from harness.inputs.instances import parse_instance
from harness.inputs.predictions import (EMPTY, GOLD, Prediction, control_predictions, load_predictions,
                                        resolve_predictions)

SHA = "0123456789abcdef0123456789abcdef01234567"


def instance(iid: str, patch: str = "diff --git a/x b/x\n"):
    return parse_instance({
        "instance_id": iid, "repo": "o/r", "base_commit": SHA, "patch": patch,
        "test_patch": "diff --git a/t b/t\n", "FAIL_TO_PASS": ["t::a"], "PASS_TO_PASS": [],
    })


def pred(iid: str, patch: str | None = "diff\n", model: str = "m-1", **extra) -> dict:
    return {"instance_id": iid, "model_name_or_path": model, "model_patch": patch, **extra}


def write_jsonl(tmp_path: Path, records, name="p.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


# --------------------------------------------------------------------------- controls

def test_gold_uses_each_instances_reference_patch():
    insts = [instance("a-1", "PATCH A"), instance("b-2", "PATCH B")]
    loaded = control_predictions(GOLD, insts)
    assert [(p.instance_id, p.model_patch, p.model_name_or_path) for p in loaded.predictions] == \
        [("a-1", "PATCH A", "gold"), ("b-2", "PATCH B", "gold")]
    assert loaded.model_name_or_path == "gold" and loaded.errors == []
    assert not any(p.is_empty for p in loaded.predictions)


def test_empty_control_has_no_patches():
    loaded = control_predictions(EMPTY, [instance("a-1"), instance("b-2")])
    assert [p.instance_id for p in loaded.predictions] == ["a-1", "b-2"]
    assert all(p.is_empty for p in loaded.predictions)
    assert loaded.model_name_or_path == "empty"


def test_unknown_control_is_an_input_error():
    with pytest.raises(InputError) as info:
        control_predictions("golden", [instance("a-1")])
    assert info.value.field == "--predictions"


def test_resolve_predictions(tmp_path):
    insts = [instance("a-1", "P")]
    assert resolve_predictions("gold", insts).predictions[0].model_patch == "P"
    assert resolve_predictions("empty", insts).predictions[0].is_empty
    path = write_jsonl(tmp_path, [pred("a-1")])
    assert resolve_predictions(str(path), insts).predictions[0].model_name_or_path == "m-1"
    with pytest.raises(InputError) as info:
        resolve_predictions(str(tmp_path / "missing.jsonl"), insts)
    assert info.value.field == "--predictions"


# --------------------------------------------------------------------------- formats

def test_jsonl(tmp_path):
    loaded = load_predictions(write_jsonl(tmp_path, [pred("a-1", "PA"), pred("b-2", None)]))
    assert [(p.instance_id, p.model_patch) for p in loaded.predictions] == [("a-1", "PA"), ("b-2", None)]
    assert loaded.model_name_or_path == "m-1" and loaded.errors == []


def test_json_list(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps([pred("a-1"), pred("b-2")]))
    assert [p.instance_id for p in load_predictions(path).predictions] == ["a-1", "b-2"]


def test_json_object_keyed_by_id(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"a-1": {"model_name_or_path": "m", "model_patch": "X"},
                                "b-2": {"model_name_or_path": "m", "model_patch": ""}}))
    loaded = load_predictions(path)
    assert [(p.instance_id, p.model_patch) for p in loaded.predictions] == [("a-1", "X"), ("b-2", "")]


def test_extras_and_empty_detection(tmp_path):
    loaded = load_predictions(write_jsonl(tmp_path, [
        pred("a-1", "  \n", cost=1.5, note="kept"), pred("b-2", None), pred("c-3", "diff --git a/x b/x\n")]))
    a, b, c = loaded.predictions
    assert a.extra == {"note": "kept"} and a.cost == 1.5  # an agent field is typed, the rest kept as it is
    assert a.is_empty and b.is_empty and not c.is_empty
    assert b.checksum() == hashlib.sha256(b"").hexdigest()
    assert c.checksum() == hashlib.sha256(b"diff --git a/x b/x\n").hexdigest()


# --------------------------------------------------------------------------- rejections

def test_duplicate_ids_are_all_refused_naming_each_line(tmp_path):
    path = write_jsonl(tmp_path, [pred("a-1", "FIRST"), pred("b-2"), pred("a-1", "SECOND")])
    loaded = load_predictions(path)
    assert [(p.instance_id, p.model_patch) for p in loaded.predictions] == [("b-2", "diff\n")]
    assert [(e.record, e.field) for e in loaded.errors] == [("a-1", "instance_id")]
    message = str(loaded.errors[0])
    assert "duplicate" in message and str(path) in message and "line 1" in message and "line 3" in message


def test_more_than_one_model_in_a_file_is_rejected(tmp_path):
    path = write_jsonl(tmp_path, [pred("a-1", model="m-1"), pred("b-2", model="m-2")])
    with pytest.raises(InputError) as info:
        load_predictions(path)
    assert "m-1" in str(info.value) and "m-2" in str(info.value)
    assert info.value.field == "model_name_or_path"


def test_attempts_make_repeated_ids_legal(tmp_path):
    path = write_jsonl(tmp_path, [pred("a-1", attempt=1), pred("a-1", attempt=2), pred("b-2", attempt=1)])
    loaded = load_predictions(path)
    assert [p.key for p in loaded.predictions] == ["a-1/attempt-1", "a-1/attempt-2", "b-2/attempt-1"]
    assert [p.attempt for p in loaded.predictions] == [1, 2, 1]
    assert loaded.errors == []


def test_duplicate_id_and_attempt_pair_is_rejected(tmp_path):
    path = write_jsonl(tmp_path, [pred("a-1", attempt=1), pred("a-1", attempt=1), pred("a-1", attempt=2)])
    loaded = load_predictions(path)
    assert [p.key for p in loaded.predictions] == ["a-1/attempt-2"]
    assert [e.record for e in loaded.errors] == ["a-1/attempt-1"]


def test_key_without_attempt_is_the_id():
    assert Prediction("a-1", "m", "x").key == "a-1"
    assert Prediction("a-1", "m", "x", attempt=3).key == "a-1/attempt-3"


@pytest.mark.parametrize("attempt", [0, -1, 1.5, "2", True])
def test_bad_attempt_numbers(tmp_path, attempt):
    loaded = load_predictions(write_jsonl(tmp_path, [pred("ok-1"), pred("a-1", attempt=attempt)]))
    assert [p.instance_id for p in loaded.predictions] == ["ok-1"]
    assert [(e.record, e.field) for e in loaded.errors] == [("a-1", "attempt")]


BAD = [
    ("no instance_id", {"model_name_or_path": "m-1", "model_patch": "x"}, "#1", "instance_id"),
    ("empty instance_id", pred(""), "#1", "instance_id"),
    ("numeric instance_id", pred(7), "#1", "instance_id"),  # type: ignore[arg-type]
    ("patch not a string", pred("a-1", patch=["x"]), "a-1", "model_patch"),  # type: ignore[arg-type]
    ("no model", {"instance_id": "a-1", "model_patch": "x"}, "a-1", "model_name_or_path"),
    ("model not a string", pred("a-1", model=3), "a-1", "model_name_or_path"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("desc, raw, rec, fieldname", BAD, ids=[b[0] for b in BAD])
def test_bad_records_are_errors_naming_record_and_field(tmp_path, desc, raw, rec, fieldname):
    path = write_jsonl(tmp_path, [pred("ok-1"), raw, pred("ok-2")])
    loaded = load_predictions(path)
    assert [p.instance_id for p in loaded.predictions] == ["ok-1", "ok-2"]
    assert len(loaded.errors) == 1
    err = loaded.errors[0]
    assert (err.record, err.field) == (rec, fieldname)
    assert f"'{fieldname}'" in str(err) and f"'{rec}'" in str(err) and str(path) in str(err)


def test_non_object_record_is_an_error(tmp_path):
    loaded = load_predictions(write_jsonl(tmp_path, [pred("ok-1"), ["not", "an", "object"]]))
    assert [p.instance_id for p in loaded.predictions] == ["ok-1"]
    assert loaded.errors[0].record == "#1"


def test_a_file_of_only_bad_records_has_unknown_model(tmp_path):
    loaded = load_predictions(write_jsonl(tmp_path, [{"nope": 1}]))
    assert loaded.predictions == [] and len(loaded.errors) == 1
    assert loaded.model_name_or_path == "unknown"
