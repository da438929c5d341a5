"""Instance loading and validation (harness.inputs.instances)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.errors import InputError
from harness.grading.grade import TestLists
from harness.inputs.instances import Instance, load_instances, parse_instance, read_records

SHA = "0123456789abcdef0123456789abcdef01234567"


def record(iid: str = "owner__repo-1", **overrides) -> dict:
    rec = {
        "instance_id": iid,
        "repo": "owner/repo",
        "base_commit": SHA,
        "patch": "diff --git a/x.py b/x.py\n",
        "test_patch": "diff --git a/tests/test_x.py b/tests/test_x.py\n",
        "FAIL_TO_PASS": ["tests/test_x.py::test_new"],
        "PASS_TO_PASS": ["tests/test_x.py::test_old"],
        "version": "1.0",
    }
    rec.update(overrides)
    return rec


def write(tmp_path: Path, name: str, data, *, jsonl: bool = False) -> Path:
    path = tmp_path / name
    if jsonl:
        path.write_text("".join(json.dumps(r) + "\n" for r in data))
    elif name.endswith((".yaml", ".yml")):
        path.write_text(yaml.safe_dump(data))
    else:
        path.write_text(json.dumps(data))
    return path


# --------------------------------------------------------------------------- formats

def test_json_list(tmp_path):
    path = write(tmp_path, "i.json", [record("a-1"), record("b-2")])
    loaded = load_instances(path)
    assert [i.instance_id for i in loaded.instances] == ["a-1", "b-2"]
    assert loaded.errors == []


def test_json_object_keyed_by_id(tmp_path):
    a, b = record("a-1"), record("b-2")
    del a["instance_id"], b["instance_id"]
    loaded = load_instances(write(tmp_path, "i.json", {"a-1": a, "b-2": b}))
    assert [i.instance_id for i in loaded.instances] == ["a-1", "b-2"]
    assert loaded.instances[0].repo == "owner/repo"


def test_single_json_object(tmp_path):
    loaded = load_instances(write(tmp_path, "one.json", record("solo-1")))
    assert [i.instance_id for i in loaded.instances] == ["solo-1"]


def test_jsonl_skips_blank_lines(tmp_path):
    path = tmp_path / "i.jsonl"
    path.write_text(json.dumps(record("a-1")) + "\n\n   \n" + json.dumps(record("b-2")) + "\n")
    assert [i.instance_id for i in load_instances(path).instances] == ["a-1", "b-2"]


@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
def test_yaml(tmp_path, suffix):
    loaded = load_instances(write(tmp_path, "i" + suffix, [record("a-1"), record("b-2")]))
    assert [i.instance_id for i in loaded.instances] == ["a-1", "b-2"]


def test_jsonl_invalid_line_names_file_and_line(tmp_path):
    path = tmp_path / "i.jsonl"
    path.write_text(json.dumps(record("a-1")) + "\n{not json\n")
    with pytest.raises(InputError) as info:
        load_instances(path)
    assert "line 2" in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize("name, text", [("i.json", "{oops"), ("i.yaml", "a: [unclosed"),
                                        ("i.json", "42"), ("i.json", '"a string"')])
def test_unparsable_or_wrong_shape_file_is_an_input_error(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError) as info:
        read_records(path)
    assert str(path) in str(info.value)


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError) as info:
        load_instances(tmp_path / "nope.json")
    assert "nope.json" in str(info.value)


# --------------------------------------------------------------------------- fields

def test_instance_fields_and_extras():
    inst = parse_instance(record("a-1", hints_text="hint", created_at="2020"), source="f.json")
    assert inst.fail_to_pass == ("tests/test_x.py::test_new",)
    assert inst.pass_to_pass == ("tests/test_x.py::test_old",)
    assert inst.extra == {"hints_text": "hint", "created_at": "2020"}
    assert inst.tests == TestLists(inst.fail_to_pass, inst.pass_to_pass)
    assert inst.repo_dirname == "owner__repo"


def test_test_lists_as_json_encoded_strings():
    inst = parse_instance(record(FAIL_TO_PASS=json.dumps(["t::a", "t::b c"]), PASS_TO_PASS="[]"))
    assert inst.fail_to_pass == ("t::a", "t::b c")
    assert inst.pass_to_pass == ()


@pytest.mark.parametrize("payload", [
    "__import__('os').system('touch /tmp/pwned-by-instance')",
    "['t::a']",                       # Python literal, not JSON
    "('t::a',)",
])
def test_test_list_strings_are_never_evaluated(payload, tmp_path):
    with pytest.raises(InputError) as info:
        parse_instance(record("evil-1", FAIL_TO_PASS=payload))
    assert info.value.field == "FAIL_TO_PASS" and info.value.record == "evil-1"
    assert "not a JSON list" in str(info.value)


def test_json_string_that_is_not_a_list_is_rejected():
    with pytest.raises(InputError) as info:
        parse_instance(record(PASS_TO_PASS='"t::a"'))
    assert info.value.field == "PASS_TO_PASS"


def test_version_is_a_string_and_optional_fields_default():
    raw = record(version=1.0)
    del raw["version"]
    assert parse_instance(raw).version == ""
    assert parse_instance(record(version=None)).version == ""
    assert parse_instance(record(version="3.2")).version == "3.2"
    inst = parse_instance(record(environment_setup_commit=None, problem_statement=None))
    assert inst.environment_setup_commit == "" and inst.problem_statement == ""


def test_checksum_is_stable_and_content_sensitive():
    a = parse_instance(record())
    assert a.checksum() == parse_instance(record()).checksum()
    assert a.checksum() != parse_instance(record(patch="other")).checksum()
    assert a.checksum() != parse_instance(record(PASS_TO_PASS=[])).checksum()


def test_to_record_round_trips():
    inst = parse_instance(record("a-1", extra_field={"k": 1}))
    again = parse_instance(inst.to_record())
    assert again == inst and again.extra == inst.extra


# --------------------------------------------------------------------------- malformations

BAD = [
    # (description, overrides or callable, field)
    ("missing repo", {"repo": None}, "repo"),
    ("missing test_patch", "del:test_patch", "test_patch"),
    ("missing F2P", "del:FAIL_TO_PASS", "FAIL_TO_PASS"),
    ("missing P2P", "del:PASS_TO_PASS", "PASS_TO_PASS"),
    ("repo not a string", {"repo": ["owner/repo"]}, "repo"),
    ("patch not a string", {"patch": 7}, "patch"),
    ("F2P not a list", {"FAIL_TO_PASS": {"t::a": 1}}, "FAIL_TO_PASS"),
    ("F2P with a non-string", {"FAIL_TO_PASS": ["t::a", 3]}, "FAIL_TO_PASS"),
    ("F2P with an empty id", {"FAIL_TO_PASS": ["t::a", ""]}, "FAIL_TO_PASS"),
    ("empty F2P", {"FAIL_TO_PASS": []}, "FAIL_TO_PASS"),
    ("empty F2P as string", {"FAIL_TO_PASS": "[]"}, "FAIL_TO_PASS"),
    ("duplicate ids in F2P", {"FAIL_TO_PASS": ["t::a", "t::b", "t::a"]}, "FAIL_TO_PASS"),
    ("duplicate ids in P2P", {"PASS_TO_PASS": ["t::p", "t::p"]}, "PASS_TO_PASS"),
    ("F2P/P2P overlap", {"FAIL_TO_PASS": ["t::a"], "PASS_TO_PASS": ["t::b", "t::a"]}, "PASS_TO_PASS"),
    ("bad repo", {"repo": "not-a-repo"}, "repo"),
    ("bad repo with a space", {"repo": "owner/re po"}, "repo"),
    ("repo with a trailing newline", {"repo": "owner/repo\n"}, "repo"),
    ("bad sha", {"base_commit": "main"}, "base_commit"),
    ("too short sha", {"base_commit": "abc12"}, "base_commit"),
    ("sha with a trailing newline", {"base_commit": SHA[:10] + "\n"}, "base_commit"),
    ("uppercase sha", {"base_commit": SHA.upper()}, "base_commit"),
    ("empty test_patch", {"test_patch": "  \n"}, "test_patch"),
]


def _apply(rec: dict, change) -> dict:
    if isinstance(change, str) and change.startswith("del:"):
        del rec[change[4:]]
    else:
        rec.update(change)
    return rec


@pytest.mark.parametrize("desc, change, fieldname", BAD, ids=[b[0] for b in BAD])
def test_each_malformation_names_record_and_field_and_keeps_good_records(tmp_path, desc, change,
                                                                         fieldname):
    bad = _apply(record("bad-1"), change)
    path = write(tmp_path, "i.json", [record("good-1"), bad, record("good-2")])
    loaded = load_instances(path)
    assert [i.instance_id for i in loaded.instances] == ["good-1", "good-2"]
    assert len(loaded.errors) == 1
    err = loaded.errors[0]
    assert isinstance(err, InputError)
    assert (err.record, err.field) == ("bad-1", fieldname)
    assert "'bad-1'" in str(err) and f"'{fieldname}'" in str(err) and str(path) in str(err)


@pytest.mark.parametrize("iid", ["has space", "slash/id", "id\n", "", "x;rm -rf"])
def test_bad_instance_ids(iid):
    with pytest.raises(InputError) as info:
        parse_instance(record(iid), position=4)
    assert info.value.field == "instance_id"


def test_record_without_usable_id_is_named_by_position(tmp_path):
    no_id = record()
    del no_id["instance_id"]
    numeric = record(instance_id=12)
    loaded = load_instances(write(tmp_path, "i.json", [record("ok-1"), no_id, numeric]))
    assert [i.instance_id for i in loaded.instances] == ["ok-1"]
    assert [(e.record, e.field) for e in loaded.errors] == [("#1", "instance_id"), ("#2", "instance_id")]


@pytest.mark.parametrize("junk", [["a", "list"], "a string", 42, None])
def test_non_object_records_are_errors_named_by_position(tmp_path, junk):
    loaded = load_instances(write(tmp_path, "i.jsonl", [record("ok-1"), junk], jsonl=True))
    assert [i.instance_id for i in loaded.instances] == ["ok-1"]
    assert len(loaded.errors) == 1 and loaded.errors[0].record == "#1"
    assert "not an object" in str(loaded.errors[0])


def test_duplicate_instance_id_records_are_all_refused_naming_each(tmp_path):
    first, second = record("dup-1", version="1.0"), record("dup-1", version="2.0")
    loaded = load_instances(write(tmp_path, "i.json", [first, record("x-1"), second]))
    # which copy was meant cannot be known: neither is graded (a graded copy would give a
    # report while the summary counts the id as an input error)
    assert [i.instance_id for i in loaded.instances] == ["x-1"]
    assert [(e.record, e.field) for e in loaded.errors] == [("dup-1", "instance_id")]
    message = str(loaded.errors[0])
    assert "duplicate" in message and "record #1" in message and "record #3" in message
    assert str(tmp_path / "i.json") in message


def test_duplicate_instance_ids_in_jsonl_are_named_by_line(tmp_path):
    path = write(tmp_path, "i.jsonl", [record("a-1"), record("dup-1"), record("b-1"), record("dup-1"),
                                       record("dup-1")], jsonl=True)
    loaded = load_instances(path)
    assert [i.instance_id for i in loaded.instances] == ["a-1", "b-1"]
    assert len(loaded.errors) == 1
    assert "line 2, line 4, line 5" in str(loaded.errors[0])


def test_many_bad_records_each_reported(tmp_path):
    recs = [record("ok-1"), record("b-1", repo="x"), record("b-2", FAIL_TO_PASS=[]), "junk",
            record("ok-2")]
    loaded = load_instances(write(tmp_path, "i.json", recs))
    assert [i.instance_id for i in loaded.instances] == ["ok-1", "ok-2"]
    assert [(e.record, e.field) for e in loaded.errors] == [("b-1", "repo"), ("b-2", "FAIL_TO_PASS"),
                                                            ("#3", None)]


# --------------------------------------------------------------------------- --instance-ids

def test_instance_ids_filter_keeps_file_order(tmp_path):
    path = write(tmp_path, "i.json", [record("a-1"), record("b-2"), record("c-3")])
    loaded = load_instances(path, ["c-3", "a-1", "a-1"])
    assert [i.instance_id for i in loaded.instances] == ["a-1", "c-3"]


def test_instance_ids_filter_keeps_only_the_errors_asked_for(tmp_path):
    path = write(tmp_path, "i.json", [record("a-1"), record("bad-1", repo="nope"),
                                      record("bad-2", repo="nope")])
    loaded = load_instances(path, ["a-1", "bad-2"])
    assert [i.instance_id for i in loaded.instances] == ["a-1"]
    assert [e.record for e in loaded.errors] == ["bad-2"]


def test_unknown_instance_id_is_an_error_naming_it(tmp_path):
    path = write(tmp_path, "i.json", [record("a-1"), record("b-2")])
    with pytest.raises(InputError) as info:
        load_instances(path, ["a-1", "zz-9", "yy-8"])
    assert "zz-9" in str(info.value) and "yy-8" in str(info.value)
    assert info.value.field == "--instance-ids"


def test_empty_instance_ids_means_all(tmp_path):
    path = write(tmp_path, "i.json", [record("a-1"), record("b-2")])
    assert len(load_instances(path, []).instances) == 2
    assert len(load_instances(path, None).instances) == 2


def test_instances_are_immutable():
    inst = parse_instance(record())
    assert isinstance(inst, Instance)
    with pytest.raises(AttributeError):  # dataclasses.FrozenInstanceError
        inst.repo = "other/repo"  # type: ignore[misc]
