"""atomic_open: the target is the old content or the new, never a mixture or an empty file."""

from __future__ import annotations

import pytest

from harness.atomic import atomic_open


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
