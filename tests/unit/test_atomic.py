"""atomic_open and the writers on it: the target is the old content or the new, never a mixture or an empty file."""

from __future__ import annotations

import json
import os

import pytest

from harness import atomic as atomic_mod
from harness.atomic import atomic_open, write_json_atomic, write_text_atomic


def test_a_clean_exit_replaces_the_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "deep" / "report.json"
    with atomic_open(target, "w", encoding="utf-8") as out:
        out.write("new")
        assert not target.exists()  # nothing visible before the rename
    assert target.read_text() == "new"
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]


def test_a_failure_keeps_the_old_content_and_removes_the_temporary(tmp_path):
    target = tmp_path / "manifest.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_open(target, "w") as out:
            out.write("half")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_only_writing_modes_are_accepted(tmp_path):
    with pytest.raises(ValueError):
        with atomic_open(tmp_path / "x", "rb"):
            pass


def test_write_json_atomic_writes_and_replaces(tmp_path):
    path = tmp_path / "sub" / "report.json"
    write_json_atomic(path, {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
    write_json_atomic(path, {"b": [1, 2]})
    assert json.loads(path.read_text()) == {"b": [1, 2]}
    assert path.read_text().endswith("\n")
    assert sorted(p.name for p in path.parent.iterdir()) == ["report.json"]  # no temp files left


def test_write_json_atomic_stringifies_unknown_types(tmp_path):
    path = tmp_path / "x.json"
    write_json_atomic(path, {"p": tmp_path, "s": {"only"}})
    data = json.loads(path.read_text())
    assert data["p"] == str(tmp_path) and data["s"] == str({"only"})


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "summary.json"
    write_json_atomic(path, {"old": True})

    def boom(fd):
        raise OSError("disk on fire")

    monkeypatch.setattr(atomic_mod.os, "fsync", boom)
    with pytest.raises(OSError, match="disk on fire"):
        write_json_atomic(path, {"new": True})
    assert json.loads(path.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_write_text_atomic_bytes_and_surrogates(tmp_path):
    write_text_atomic(tmp_path / "b.bin", b"\x00\xff")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\xff"
    raw = b"caf\xe9 ok"  # not UTF-8: survives via surrogateescape
    write_text_atomic(tmp_path / "t.txt", raw.decode("utf-8", "surrogateescape"))
    assert (tmp_path / "t.txt").read_bytes() == raw


def test_atomic_write_is_a_rename_not_an_in_place_write(tmp_path):
    path = tmp_path / "r.json"
    write_json_atomic(path, {"v": 1})
    before = os.stat(path).st_ino
    write_json_atomic(path, {"v": 2})
    assert os.stat(path).st_ino != before
