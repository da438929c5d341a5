"""What a patch means, with real containers (issue 39): a patch that fixes a demo instance is
FULL, with the extra recorded as a flag, when it also carries an already-present hunk, a
content-less binary stub, or a stray symlink inside the repository; the shapes the vendor
submissions carry (`git diff` of an agent's working copy). Before the change each was INVALID
(`patch_apply_failed`, `patch_rejected`, `patch_rejected`): the whole fix lost.

One batch: a copy of harness-demo__calcly-1 per case (same repository, base commit, test
patch and lists), graded through ``harness run``. The symlink out of the repository (the
adversarial suite's ``symlink-out``) is in the batch too and must stay refused.
"""

from __future__ import annotations

import json

import pytest

from tests.patchgen import base_file, demo_instance, file_diff, write_predictions

CALCLY = "harness-demo__calcly-1"
README = "README.md"
GOLD = demo_instance(CALCLY)["patch"]


def _already_present() -> str:
    """A hunk whose post-image is README.md as the pristine tree has it (an environment's own
    edit the submission carries too): git apply refuses it, its reverse applies."""
    text = base_file(CALCLY, README)
    first = text.splitlines(keepends=True)[0]
    before = text.replace(first, first.rstrip("\n") + " (before the environment's edit)\n", 1)
    return file_diff(README, before, text)


STUB = ("diff --git a/test_plot.png b/test_plot.png\nnew file mode 100644\nindex 00000000..50466939\n"
        "Binary files /dev/null and b/test_plot.png differ\n")
SYMLINK = ("diff --git a/symlink_dir b/symlink_dir\nnew file mode 120000\nindex 000000000..945c9b46d\n"
           "--- /dev/null\n+++ b/symlink_dir\n@@ -0,0 +1 @@\n+.\n\\ No newline at end of file\n")
SYMLINK_OUT = ("diff --git a/calcly/leak b/calcly/leak\nnew file mode 120000\nindex 0000000..16ee15a\n"
               "--- /dev/null\n+++ b/calcly/leak\n@@ -0,0 +1 @@\n+../../../../../etc/passwd\n"
               "\\ No newline at end of file\n")

CASES = {
    "present": GOLD + _already_present(),
    "stub": GOLD + STUB,
    "symlink": GOLD + SYMLINK,
    "all-three": _already_present() + GOLD + SYMLINK + STUB,
    "symlink-out": GOLD + SYMLINK_OUT,
    "stub-only": STUB,
}


@pytest.fixture(scope="module")
def batch(tmp_path_factory, cache_dir, engine):
    from tests.conftest import HarnessRun
    workdir = tmp_path_factory.mktemp("patch-meaning")
    ids = {case: f"{CALCLY}-{case}" for case in CASES}
    instances = workdir / "instances.jsonl"
    instances.write_text("".join(json.dumps(dict(demo_instance(CALCLY), instance_id=i)) + "\n" for i in ids.values()))
    predictions = write_predictions(workdir / "predictions.jsonl", {ids[c]: p for c, p in CASES.items()},
                                    model="stray-debris")
    run = HarnessRun(workdir / "runs", cache_dir)("--instances", str(instances), "--predictions", str(predictions),
                                                  "--max-workers", "2", run_id="patch-meaning")
    assert run.exit_code in (0, 1)
    return run, ids


def _report(batch, case: str) -> dict:
    run, ids = batch
    return run.report(ids[case])


def _full(report: dict) -> None:
    why = f"{report['status']} {report['error_reason']} {report['error_detail']!r} {report['integrity']['flags']}"
    assert (report["status"], report["resolved"], report["patch_successfully_applied"]) == ("FULL", True, True), why


def test_an_already_present_hunk_is_left_out_and_the_fix_is_graded(batch):
    report = _report(batch, "present")
    _full(report)
    assert "patch_hunks_already_present" in report["integrity"]["flags"]
    assert [h["path"] for h in report["integrity"]["hunks_already_present"]] == [README]
    assert report["apply_strategy"] == "git_apply"
    phases = [c["phase"] for c in report["commands"]]
    assert "apply:already_present" in phases and "apply:git_apply+without_present" in phases


def test_a_content_less_binary_stub_is_dropped_and_the_fix_is_graded(batch):
    report = _report(batch, "stub")
    _full(report)
    assert "patch_binary_stub_dropped" in report["integrity"]["flags"]
    assert report["integrity"]["binary_stubs_dropped"] == [
        {"path": "test_plot.png", "line": "Binary files /dev/null and b/test_plot.png differ"}]
    assert "test_plot.png" not in report["integrity"]["model_files"]


def test_a_stray_symlink_inside_the_repository_is_dropped_and_the_fix_is_graded(batch):
    report = _report(batch, "symlink")
    _full(report)
    assert "patch_symlink_dropped" in report["integrity"]["flags"]
    assert report["integrity"]["symlinks_dropped"] == [{"path": "symlink_dir", "target": "."}]
    assert "symlinks" not in report["integrity"] and "symlink_dir" not in report["integrity"]["model_files"]


def test_all_three_together(batch):
    report = _report(batch, "all-three")
    _full(report)
    assert {"patch_hunks_already_present", "patch_binary_stub_dropped",
            "patch_symlink_dropped"} <= set(report["integrity"]["flags"])
    assert report["integrity"]["model_files"] == ["calcly/stats.py"]


def test_a_symlink_out_of_the_repository_still_refuses_the_patch(batch):
    report = _report(batch, "symlink-out")
    assert (report["status"], report["error_reason"], report["resolved"]) == ("INVALID", "patch_rejected", False)
    assert "out of the repository" in report["error_detail"]


def test_a_patch_of_nothing_but_a_stub_is_graded_as_the_unchanged_tree(batch):
    report = _report(batch, "stub-only")
    assert (report["status"], report["resolved"], report["patch_successfully_applied"]) == ("NO", False, True)
    assert report["apply_strategy"] == "nothing_left"
    assert "patch_binary_stub_dropped" in report["integrity"]["flags"]
    assert set(report["tests_status"]["FAIL_TO_PASS"]["failure"]) == set(demo_instance(CALCLY)["FAIL_TO_PASS"])
