"""scripts/validate_whole_set.py --merge: disjoint parts of one set, at one commit, become one validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.scripts import loaded_script



@pytest.fixture(scope="module")
def script():
    with loaded_script("validate_whole_set") as module:
        yield module


def _part(root: Path, ids: dict[str, tuple[str, str]], commit: str = "c0ffee") -> Path:
    """A finished validation of ``ids`` (id -> (reference status, empty status)), one repeat."""
    for run in ("gold-1", "empty"):
        (root / run).mkdir(parents=True)
        (root / run / "manifest.json").write_text(json.dumps({"harness_commit": commit}))
    rows = {}
    for iid, (gold, empty) in ids.items():
        for run, status in (("gold-1", gold), ("empty", empty)):
            (root / run / iid).mkdir()
            (root / run / iid / "report.json").write_text(json.dumps({"instance_id": iid, "status": status}))
        rows[iid] = {"instance_id": iid, "reference_full": gold == "FULL", "reference_statuses": [gold],
                     "empty_status": empty, "empty_resolved": empty == "FULL", "valid": gold == "FULL", "reasons": []}
    (root / "validity.json").write_text(json.dumps({
        "repeats": 1, "instances": rows, "empty_resolved_ids": [i for i, (_, e) in ids.items() if e == "FULL"]}))
    (root / "instances.jsonl").write_text("".join(json.dumps({"instance_id": i}) + "\n" for i in ids))
    (root / "whole-set.json").write_text(json.dumps({"command": f"part {root.name}", "wall_minutes": 1.0,
                                                     "versions": {i: "1.0" for i in ids}}))
    return root


def test_parts_become_one_validation_of_links(tmp_path, script):
    a = _part(tmp_path / "a", {"o__r-1": ("FULL", "NO"), "o__r-2": ("NO", "NO")})
    b = _part(tmp_path / "b", {"o__r-3": ("FULL", "FULL")})
    script.merge([a, b], tmp_path / "merged")
    merged = tmp_path / "merged"
    validity = json.loads((merged / "validity.json").read_text())
    assert sorted(validity["instances"]) == ["o__r-1", "o__r-2", "o__r-3"]
    assert validity["reference_full_in_every_repeat"] == 2
    assert validity["empty_resolved_ids"] == ["o__r-3"]
    assert (merged / "gold-1" / "o__r-3").resolve() == (b / "gold-1" / "o__r-3").resolve()
    assert json.loads((merged / "empty" / "o__r-1" / "report.json").read_text())["status"] == "NO"
    assert script._commit_of(merged / "gold-1") == "c0ffee"
    assert json.loads((merged / "whole-set.json").read_text())["command"] == "part a ; part b"
    records = [json.loads(line)["instance_id"] for line in (merged / "instances.jsonl").read_text().splitlines()]
    assert records == ["o__r-1", "o__r-2", "o__r-3"]   # what each part validated, for from-runs


def test_an_instance_in_two_parts_is_refused(tmp_path, script):
    a = _part(tmp_path / "a", {"o__r-1": ("FULL", "NO")})
    b = _part(tmp_path / "b", {"o__r-1": ("FULL", "NO")})
    with pytest.raises(SystemExit, match="o__r-1 is in two parts"):
        script.merge([a, b], tmp_path / "merged")


def test_parts_made_at_different_commits_are_refused(tmp_path, script):
    a = _part(tmp_path / "a", {"o__r-1": ("FULL", "NO")}, commit="aaaa")
    b = _part(tmp_path / "b", {"o__r-2": ("FULL", "NO")}, commit="bbbb")
    with pytest.raises(SystemExit, match="different or unknown commits"):
        script.merge([a, b], tmp_path / "merged")
